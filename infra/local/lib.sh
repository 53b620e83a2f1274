# Shared settings and helpers for the local stack scripts. Sourced, never run.
# Everything the stack downloads or writes lives under $LOCAL_DIR (git-ignored); a second run
# reuses it. Processes we start are tracked by pid files, so `down` stops exactly those.
set -euo pipefail

ROOT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LOCAL_DIR=${SKINPRICES_LOCAL_DIR:-$ROOT_DIR/.local}
RUN_DIR=$LOCAL_DIR/run
LOG_DIR=$LOCAL_DIR/logs

KAFKA_VERSION=3.9.1
KAFKA_LIBS=$LOCAL_DIR/kafka/libs
KAFKA_DATA=$LOCAL_DIR/kafka/data
KAFKA_CONF=$LOCAL_DIR/kafka/config
# 1: single node on 9092 (default). 3: three KRaft nodes on 19092/29092/39092 for fault tests.
KAFKA_NODES=${KAFKA_NODES:-1}
KAFKA_HEAP=${KAFKA_HEAP:--Xms256m -Xmx512m}

# Apicurio 3.1.x is not on Maven Central (only 3.0.9 and 3.3.x are); 3.3 needs Java 21,
# 3.0.9 runs on the Java 17 every machine here has.
APICURIO_VERSION=3.0.9
APICURIO_DIR=$LOCAL_DIR/apicurio
REGISTRY_PORT=${REGISTRY_PORT:-8081}
REGISTRY_HEAP=${REGISTRY_HEAP:--Xmx512m}

DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/skinprices}
# The registry keeps its schemas in PostgreSQL, so schema ids survive a restart while Kafka
# still holds records that reference them.
REGISTRY_DATABASE=${REGISTRY_DATABASE:-skinprices_registry}

mkdir -p "$RUN_DIR" "$LOG_DIR"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

kafka_bootstrap() {
  if [ "$KAFKA_NODES" = 3 ]; then echo "127.0.0.1:19092,127.0.0.1:29092,127.0.0.1:39092"; else echo "127.0.0.1:9092"; fi
}

# pid_alive NAME: the process recorded in $RUN_DIR/NAME.pid is running and is still ours
# (a recycled pid of some other program does not count).
pid_alive() {
  local f=$RUN_DIR/$1.pid pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  grep -q -- "skinprices-$1" "/proc/$pid/cmdline" 2>/dev/null
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_port PORT SECONDS NAME
wait_port() {
  local i
  for ((i = 0; i < $2 * 5; i++)); do
    port_open "$1" && return 0
    sleep 0.2
  done
  return 1
}

# stop_pid NAME: SIGTERM, wait up to 30 s for a clean shutdown, then SIGKILL.
stop_pid() {
  local name=$1 f=$RUN_DIR/$1.pid pid i
  if ! pid_alive "$name"; then rm -f "$f"; return 0; fi
  pid=$(cat "$f")
  log "stopping $name (pid $pid)"
  kill "$pid" 2>/dev/null || true
  for ((i = 0; i < 150; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name did not stop in 30 s; killing it"
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}


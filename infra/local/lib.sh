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

# The project's own PostgreSQL (pg.sh): a primary, and a hot standby of it (`make up-replica`).
PG_PORT=${PG_PORT:-5442}
PG_STANDBY_PORT=${PG_STANDBY_PORT:-5443}
# DATABASE_URL unset: the project's primary, which up.sh starts. Set: that server, started by
# whoever runs it.
if [ -n "${DATABASE_URL:-}" ]; then PG_OWN=0; else PG_OWN=1; fi
DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:$PG_PORT/skinprices}
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

# stop_pids NAME…: SIGTERM to every one at once, wait up to STOP_GRACE_S (30) seconds for all
# to exit cleanly, then SIGKILL what is left. At once rather than one after another, so a
# three-node cluster stops in the time of its slowest node, and no node is left running alone
# longer than the others (kafka.sh says why a lone node no longer waits for a quorum).
stop_pids() {
  local name pid i left
  local -a names=() pids=()
  for name in "$@"; do
    if pid_alive "$name"; then
      pid=$(cat "$RUN_DIR/$name.pid")
      log "stopping $name (pid $pid)"
      names+=("$name")
      pids+=("$pid")
      kill "$pid" 2>/dev/null || true
    else
      rm -f "$RUN_DIR/$name.pid"
    fi
  done
  for ((i = 0; i < ${STOP_GRACE_S:-30} * 5; i++)); do
    left=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && left=$((left + 1)); done
    [ "$left" = 0 ] && break
    sleep 0.2
  done
  for i in "${!pids[@]}"; do
    if kill -0 "${pids[$i]}" 2>/dev/null; then
      log "${names[$i]} did not stop in ${STOP_GRACE_S:-30} s; killing it"
      kill -9 "${pids[$i]}" 2>/dev/null || true
    fi
    rm -f "$RUN_DIR/${names[$i]}.pid"
  done
}

# stop_pid NAME: one process (see stop_pids).
stop_pid() { stop_pids "$1"; }

#!/usr/bin/env bash
# pg.sh start|start-replica|stop|status — the project's own PostgreSQL, from the machine's
# server binaries (the highest version under /usr/lib/postgresql, else `pg_config --bindir`).
#   start          the primary on 127.0.0.1:$PG_PORT (5442), data in .local/pg/primary
#   start-replica  a hot standby of it on 127.0.0.1:$PG_STANDBY_PORT (5443), data in
#                  .local/pg/standby, streaming from the physical slot skinprices_standby
#   stop           both, the standby first
# Settings: infra/local/postgresql.conf. initdb and postgres refuse to run as root, so as root
# they run as the postgres user, which owns .local/pg.
source "$(dirname "$0")/lib.sh"

PG_DIR=$LOCAL_DIR/pg
PRIMARY=$PG_DIR/primary
STANDBY=$PG_DIR/standby
SOCKETS=$PG_DIR/run
SLOT=skinprices_standby

pg_bindir() {
  local d
  d=$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin 2>/dev/null | sort -V | tail -1)
  [ -n "$d" ] || d=$(pg_config --bindir 2>/dev/null) || true
  [ -n "$d" ] && [ -x "$d/postgres" ] && [ -x "$d/pg_basebackup" ] || return 1
  echo "$d"
}
if ! BIN=${PG_BINDIR:-$(pg_bindir)}; then
  # Nothing of ours can be running then (down.sh stops us on machines that use DATABASE_URL too).
  [ "${1:-}" = stop ] && exit 0
  die "no PostgreSQL server binaries (apt-get install postgresql, or PG_BINDIR=…)"
fi

if [ "$(id -u)" = 0 ]; then
  as_pg() { runuser -u postgres -- "$@"; }
else
  as_pg() { "$@"; }
fi

# own PATH…: as root, hand files and directories we wrote to the postgres user.
own() { if [ "$(id -u)" = 0 ]; then chown postgres: "$@"; fi; }

# running DATADIR: its postmaster is alive. pg_ctl status would trust any live process of the same
# user holding the pid of a stale postmaster.pid (a machine restarted without `make down`); a
# postmaster runs in its data directory, which no other process there does.
running() {
  [ -f "$1/postmaster.pid" ] || return 1
  local pid
  pid=$(head -1 "$1/postmaster.pid")
  [ -n "$pid" ] && [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$(cd "$1" && pwd -P)" ]
}
pid_of() { head -1 "$1/postmaster.pid"; }
sql() { "$BIN/psql" -h 127.0.0.1 -p "$1" -U postgres -d postgres -XAtqc "$2"; }
sysid() { as_pg "$BIN/pg_controldata" "$1" 2>/dev/null | sed -n 's/^Database system identifier: *//p'; }

# configure DATADIR PORT NAME: this server's own settings, and the includes that make the
# project's settings and them override initdb's (rewritten at every start, so a moved checkout
# or a standby copied from the primary gets its own).
configure() {
  local dir=$1 port=$2 name=$3
  cat >"$dir/skinprices-instance.conf" <<CONF
# Written by infra/local/pg.sh at every start: this server's own settings.
port = $port
unix_socket_directories = '$SOCKETS'
cluster_name = '$name'
CONF
  cat >"$dir/pg_hba.conf" <<'HBA'
# Written by infra/local/pg.sh: trust, and only from this machine (listen_addresses).
local all         all              trust
host  all         all 127.0.0.1/32 trust
local replication all              trust
host  replication all 127.0.0.1/32 trust
HBA
  sed -i '/# skinprices-include$/d' "$dir/postgresql.conf"
  printf "include '%s' # skinprices-include\ninclude 'skinprices-instance.conf' # skinprices-include\n" \
    "$ROOT_DIR/infra/local/postgresql.conf" >>"$dir/postgresql.conf"
  own "$dir/skinprices-instance.conf" "$dir/pg_hba.conf" "$dir/postgresql.conf"
}

# launch DATADIR PORT NAME: start it (if not running) and wait until it answers.
launch() {
  local dir=$1 port=$2 name=$3 log=$LOG_DIR/pg-${3#skinprices-}.log
  if running "$dir"; then
    log "$name already running (pid $(pid_of "$dir"))"
  else
    port_open "$port" && die "port $port is taken by a process we did not start; stop it or set PG_PORT/PG_STANDBY_PORT"
    # Not running (checked above), so a postmaster.pid left there is stale: postgres would refuse
    # to start while its pid belongs to a live process.
    rm -f "$dir/postmaster.pid"
    configure "$dir" "$port" "$name"
    touch "$log"
    own "$log"
    log "starting $name on 127.0.0.1:$port"
    as_pg "$BIN/pg_ctl" -D "$dir" -l "$log" -w -t 120 start >/dev/null ||
      { tail -30 "$log" >&2; die "$name did not start (log: $log)"; }
  fi
  local i
  for ((i = 0; i < 300; i++)); do
    "$BIN/pg_isready" -h 127.0.0.1 -p "$port" -U postgres -d postgres -q && return 0
    sleep 0.2
  done
  tail -30 "$log" >&2
  die "$name does not answer on port $port"
}

prepare_dirs() {
  mkdir -p "$PG_DIR" "$SOCKETS"
  own "$PG_DIR" "$SOCKETS"
  as_pg test -w "$PG_DIR" || die "the postgres user cannot write $PG_DIR (every parent directory must be searchable by it)"
}

start() {
  prepare_dirs
  local version
  version=$(as_pg "$BIN/postgres" -V | sed -E 's/^[^0-9]*([0-9]+).*/\1/')
  if [ ! -s "$PRIMARY/PG_VERSION" ]; then
    # No cluster there (or an initdb that was killed half-way): make one.
    rm -rf "$PRIMARY"
    log "initdb $PRIMARY (PostgreSQL $version)"
    as_pg "$BIN/initdb" -D "$PRIMARY" -U postgres -A trust -E UTF8 --locale=C.UTF-8 \
      >"$LOG_DIR/pg-initdb.log" 2>&1 || { cat "$LOG_DIR/pg-initdb.log" >&2; die "initdb failed"; }
  elif [ "$(cat "$PRIMARY/PG_VERSION")" != "$version" ]; then
    die "$PRIMARY is PostgreSQL $(cat "$PRIMARY/PG_VERSION"), the binaries $version: make clean, or PG_BINDIR=…"
  fi
  launch "$PRIMARY" "$PG_PORT" skinprices-primary
  log "postgresql primary at postgres://postgres@127.0.0.1:$PG_PORT"
  # A standby made earlier (make up-replica) starts with its primary: stopped, its slot would keep
  # WAL and, with hot_standby_feedback, hold back every vacuum on the primary meanwhile.
  if [ -s "$STANDBY/PG_VERSION" ] && ! running "$STANDBY" && [ -z "$(stale_standby)" ]; then
    launch "$STANDBY" "$PG_STANDBY_PORT" skinprices-standby
  fi
}

# Why the standby's data dir must be copied again (nothing: it is a standby of this primary).
stale_standby() {
  if [ ! -s "$STANDBY/PG_VERSION" ]; then
    echo "no copy yet"
  elif [ ! -f "$STANDBY/standby.signal" ]; then
    echo "it is no longer a standby (promoted)"
  elif [ "$(sysid "$STANDBY")" != "$(sysid "$PRIMARY")" ]; then
    echo "it was copied from another primary"
  else
    case $(sql "$PG_PORT" "SELECT wal_status FROM pg_replication_slots WHERE slot_name = '$SLOT'") in
      reserved | extended) ;;
      *) echo "its slot $SLOT is missing or lost the WAL it needs" ;;
    esac
  fi
}

basebackup() {
  rm -rf "$STANDBY"
  # -C creates the slot: one left by an earlier copy goes first (nothing streams from it now).
  sql "$PG_PORT" "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '$SLOT' AND NOT active" >/dev/null
  local t0=$SECONDS
  # -c fast: the copy starts at a checkpoint; a spread one (the default) takes most of
  # checkpoint_timeout even on an idle server (over 3 minutes here).
  as_pg "$BIN/pg_basebackup" -h 127.0.0.1 -p "$PG_PORT" -U postgres -D "$STANDBY" -R -X stream -c fast -C -S "$SLOT" \
    >"$LOG_DIR/pg-basebackup.log" 2>&1 || { cat "$LOG_DIR/pg-basebackup.log" >&2; die "pg_basebackup failed"; }
  log "copied the primary in $((SECONDS - t0)) s"
}

start_replica() {
  if [ "$PG_OWN" = 0 ]; then
    log "DATABASE_URL is set: no standby of ours (a standby of that server is its operator's)"
    return 0
  fi
  running "$PRIMARY" || die "the primary is not running: make up (or pg.sh start) first"
  prepare_dirs
  local why
  # A running standby is left alone (launch says so).
  if ! running "$STANDBY"; then
    why=$(stale_standby)
    if [ -n "$why" ]; then
      log "copying the primary to $STANDBY ($why)"
      basebackup
    fi
  fi
  launch "$STANDBY" "$PG_STANDBY_PORT" skinprices-standby
  local i state=""
  for ((i = 0; i < 300; i++)); do
    state=$(sql "$PG_STANDBY_PORT" "SELECT status FROM pg_stat_wal_receiver" 2>/dev/null || true)
    if [ "$state" = streaming ]; then
      log "hot standby at postgres://postgres@127.0.0.1:$PG_STANDBY_PORT, streaming from slot $SLOT"
      return 0
    fi
    sleep 0.2
  done
  tail -30 "$LOG_DIR/pg-standby.log" >&2
  die "the standby is not streaming after 60 s (wal receiver: ${state:-none})"
}

stop() {
  local dir name
  for dir in "$STANDBY" "$PRIMARY"; do
    name=skinprices-$(basename "$dir")
    if running "$dir"; then
      log "stopping $name (pid $(pid_of "$dir"))"
      as_pg "$BIN/pg_ctl" -D "$dir" stop -m fast -w -t 60 >/dev/null || die "$name did not stop"
    fi
  done
}

status() {
  local rc=0
  if running "$PRIMARY"; then
    echo "pg-primary: running (pid $(pid_of "$PRIMARY"), 127.0.0.1:$PG_PORT)"
  else
    echo "pg-primary: stopped"
    rc=1
  fi
  if running "$STANDBY"; then
    echo "pg-standby: running (pid $(pid_of "$STANDBY"), 127.0.0.1:$PG_STANDBY_PORT, wal receiver: $(sql "$PG_STANDBY_PORT" "SELECT status FROM pg_stat_wal_receiver" 2>/dev/null || echo '?'))"
  else
    echo "pg-standby: stopped"
  fi
  return $rc
}

case "${1:-}" in
  start) start ;;
  start-replica) start_replica ;;
  stop) stop ;;
  status) status ;;
  *) die "usage: pg.sh start|start-replica|stop|status (PG_PORT, PG_STANDBY_PORT)" ;;
esac

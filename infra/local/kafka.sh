#!/usr/bin/env bash
# kafka.sh start|stop|status — Apache Kafka in KRaft mode from the jars fetch.sh collected.
# KAFKA_NODES=1 (default): one broker+controller on 9092/9093.
# KAFKA_NODES=3: three broker+controller nodes on N9092/N9093 (N=1..3), RF 3, min ISR 2, so one
# node can be killed with `kill -9` and the cluster keeps its quorum (fault tests).
source "$(dirname "$0")/lib.sh"

nodes() { if [ "$KAFKA_NODES" = 3 ]; then echo 1 2 3; else echo 1; fi; }
port_of() { if [ "$KAFKA_NODES" = 3 ]; then echo "$1$2"; else echo "$2"; fi; }

write_config() {
  local n=$1 conf=$KAFKA_CONF/$KAFKA_NODES/node$1.properties voters rf=1 extra=""
  local bport ctrl
  bport=$(port_of "$n" 9092)
  ctrl=$(port_of "$n" 9093)
  if [ "$KAFKA_NODES" = 3 ]; then
    voters="1@127.0.0.1:19093,2@127.0.0.1:29093,3@127.0.0.1:39093"
    rf=3
    # No controlled shutdown: a broker's controlled shutdown waits (up to 5 min) for the
    # controller quorum to approve it, and when the whole cluster stops, the node that is slowest
    # to ask finds the other controllers already gone. Moving leaders off a node is worthless
    # when every node is stopping; logs are still flushed and closed cleanly. (The fault tests
    # stop single nodes with kill -9, where no shutdown runs at all.)
    extra=$'default.replication.factor=3\nmin.insync.replicas=2\ncontrolled.shutdown.enable=false'
  else
    voters="1@127.0.0.1:9093"
  fi
  mkdir -p "$(dirname "$conf")"
  cat >"$conf" <<CONF
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$bport,CONTROLLER://127.0.0.1:$ctrl
advertised.listeners=PLAINTEXT://127.0.0.1:$bport
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$KAFKA_DATA/$KAFKA_NODES/$n
num.partitions=6
offsets.topic.replication.factor=$rf
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$([ "$rf" = 3 ] && echo 2 || echo 1)
group.initial.rebalance.delay.ms=0
# Topics are created from infra/kafka/topics.json: auto-creation on KRaft makes consumers of a
# not-yet-existing topic fail (kafkajs#1618), and a typo would silently create a topic.
auto.create.topics.enable=false
$extra
CONF
  echo "$conf"
}

# An array, so the classpath wildcard reaches java unexpanded.
# shellcheck disable=SC2206
JAVA=(java $KAFKA_HEAP -XX:+UseG1GC -Djava.awt.headless=true
  "-Dlog4j.configuration=file:$ROOT_DIR/infra/local/log4j.properties" -cp "$KAFKA_LIBS/*")

cluster_id() {
  local f=$KAFKA_DATA/$KAFKA_NODES/cluster.id id
  if [ ! -s "$f" ]; then
    mkdir -p "$(dirname "$f")"
    # StorageTool's random ids are base64url and may start with '-', which then reads as a flag.
    while :; do
      id=$("${JAVA[@]}" kafka.tools.StorageTool random-uuid)
      [ "${id:0:1}" != "-" ] && break
    done
    echo "$id" >"$f"
  fi
  cat "$f"
}

start() {
  local id n conf name bport
  [ -f "$KAFKA_LIBS/.complete-$KAFKA_VERSION" ] || bash "$ROOT_DIR/infra/local/fetch.sh"
  id=$(cluster_id)
  for n in $(nodes); do
    name=kafka-$KAFKA_NODES-$n
    bport=$(port_of "$n" 9092)
    if pid_alive "$name"; then log "$name already running (pid $(cat "$RUN_DIR/$name.pid"))"; continue; fi
    port_open "$bport" && die "port $bport is taken by a process we did not start; stop it or free the port"
    conf=$(write_config "$n")
    "${JAVA[@]}" kafka.tools.StorageTool format -t "$id" -c "$conf" --ignore-formatted >"$LOG_DIR/$name-format.log" 2>&1 \
      || { cat "$LOG_DIR/$name-format.log" >&2; die "formatting $name failed"; }
    log "starting $name on 127.0.0.1:$bport"
    # -Dskinprices.name marks the process as ours, so a recycled pid is never mistaken for it.
    nohup "${JAVA[@]}" -Dskinprices.name="skinprices-$name" kafka.Kafka "$conf" \
      >"$LOG_DIR/$name.log" 2>&1 </dev/null &
    echo $! >"$RUN_DIR/$name.pid"
  done
  for n in $(nodes); do
    name=kafka-$KAFKA_NODES-$n
    bport=$(port_of "$n" 9092)
    wait_port "$bport" 90 "$name" || { tail -30 "$LOG_DIR/$name.log" >&2; die "$name did not open port $bport in 90 s"; }
  done
  log "kafka listening at $(kafka_bootstrap)"
}

# Every node at once (lib.sh's stop_pids says why one at a time leaves the last without quorum).
stop() {
  local n names=()
  for n in $(nodes); do names+=("kafka-$KAFKA_NODES-$n"); done
  stop_pids "${names[@]}"
}

status() {
  local n name rc=0
  for n in $(nodes); do
    name=kafka-$KAFKA_NODES-$n
    if pid_alive "$name"; then echo "$name: running (pid $(cat "$RUN_DIR/$name.pid"))"; else echo "$name: stopped"; rc=1; fi
  done
  return $rc
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) die "usage: kafka.sh start|stop|status (KAFKA_NODES=1|3)" ;;
esac

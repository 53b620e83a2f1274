#!/usr/bin/env bash
# registry.sh start|stop|status — Apicurio Registry (Confluent-compatible API under
# /apis/ccompat/v7) with its schemas stored in PostgreSQL. Expects REGISTRY_JDBC_URL,
# REGISTRY_DB_USER and REGISTRY_DB_PASSWORD (up.sh gets them from `stack.ts prepare-db`).
source "$(dirname "$0")/lib.sh"

NAME=registry
APP=$APICURIO_DIR/apicurio-registry-app-$APICURIO_VERSION

start() {
  if pid_alive "$NAME"; then log "registry already running (pid $(cat "$RUN_DIR/$NAME.pid"))"; return 0; fi
  port_open "$REGISTRY_PORT" && die "port $REGISTRY_PORT is taken by a process we did not start; stop it or set REGISTRY_PORT"
  [ -f "$APP/.complete" ] || bash "$ROOT_DIR/infra/local/fetch.sh"
  : "${REGISTRY_JDBC_URL:?run through up.sh, which prepares the registry database}"
  log "starting schema registry (Apicurio $APICURIO_VERSION) on 127.0.0.1:$REGISTRY_PORT"
  # shellcheck disable=SC2086
  QUARKUS_HTTP_HOST=127.0.0.1 \
  QUARKUS_HTTP_PORT=$REGISTRY_PORT \
  QUARKUS_LOG_LEVEL=WARN \
  APICURIO_STORAGE_KIND=sql \
  APICURIO_STORAGE_SQL_KIND=postgresql \
  APICURIO_DATASOURCE_URL=$REGISTRY_JDBC_URL \
  APICURIO_DATASOURCE_USERNAME=$REGISTRY_DB_USER \
  APICURIO_DATASOURCE_PASSWORD=$REGISTRY_DB_PASSWORD \
  APICURIO_REST_DELETION_ARTIFACT_ENABLED=true \
  APICURIO_REST_DELETION_ARTIFACT_VERSION_ENABLED=true \
  APICURIO_REST_DELETION_GROUP_ENABLED=true \
    nohup java $REGISTRY_HEAP -Dskinprices.name=skinprices-$NAME -jar "$APP/apicurio-registry-app-$APICURIO_VERSION-runner.jar" \
    >"$LOG_DIR/$NAME.log" 2>&1 </dev/null &
  echo $! >"$RUN_DIR/$NAME.pid"
  wait_port "$REGISTRY_PORT" 120 || { tail -30 "$LOG_DIR/$NAME.log" >&2; die "registry did not open port $REGISTRY_PORT in 120 s"; }
}

case "${1:-}" in
  start) start ;;
  stop) stop_pid "$NAME" ;;
  status) if pid_alive "$NAME"; then echo "registry: running (pid $(cat "$RUN_DIR/$NAME.pid"))"; else echo "registry: stopped"; exit 1; fi ;;
  *) die "usage: registry.sh start|stop|status" ;;
esac

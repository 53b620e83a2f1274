#!/usr/bin/env bash
# up.sh — fetch (once), start (if not running) and wait for the project's PostgreSQL (pg.sh;
# unless DATABASE_URL names another server), Kafka and the schema registry, create the
# databases, then the topics. Idempotent: a second run reuses the cache and the running
# processes. KAFKA_NODES=3 starts the three-node cluster instead.
source "$(dirname "$0")/lib.sh"

[ -d "$ROOT_DIR/node_modules" ] || die "node_modules missing: run 'npm ci' first (make does)"
TSX="$ROOT_DIR/node_modules/.bin/tsx"
export DATABASE_URL KAFKA_BROKERS=${KAFKA_BROKERS:-$(kafka_bootstrap)}
export SCHEMA_REGISTRY_URL=${SCHEMA_REGISTRY_URL:-http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v7}

bash "$ROOT_DIR/infra/local/fetch.sh"
if [ "$PG_OWN" = 1 ]; then bash "$ROOT_DIR/infra/local/pg.sh" start; fi
bash "$ROOT_DIR/infra/local/kafka.sh" start
db_vars=$("$TSX" "$ROOT_DIR/infra/local/stack.ts" prepare-db) || die "PostgreSQL is not ready (see above)"
eval "$db_vars"
export REGISTRY_JDBC_URL REGISTRY_DB_USER REGISTRY_DB_PASSWORD
bash "$ROOT_DIR/infra/local/registry.sh" start
"$TSX" "$ROOT_DIR/infra/local/stack.ts" wait-kafka
"$TSX" "$ROOT_DIR/infra/local/stack.ts" topics
"$TSX" "$ROOT_DIR/infra/local/stack.ts" wait-registry
log "stack ready: KAFKA_BROKERS=$KAFKA_BROKERS SCHEMA_REGISTRY_URL=$SCHEMA_REGISTRY_URL DATABASE_URL=$DATABASE_URL"

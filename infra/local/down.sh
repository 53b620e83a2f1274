#!/usr/bin/env bash
# down.sh — stop exactly the processes up.sh started (by their pid files, PostgreSQL by its
# data dirs: the standby, then the primary); data stays in .local/.
source "$(dirname "$0")/lib.sh"
bash "$ROOT_DIR/infra/local/registry.sh" stop
KAFKA_NODES=3 bash "$ROOT_DIR/infra/local/kafka.sh" stop
KAFKA_NODES=1 bash "$ROOT_DIR/infra/local/kafka.sh" stop
# After the registry, which keeps its schemas there.
bash "$ROOT_DIR/infra/local/pg.sh" stop
log "stack stopped"

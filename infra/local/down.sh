#!/usr/bin/env bash
# down.sh — stop exactly the processes up.sh started (by their pid files); data stays in .local/.
source "$(dirname "$0")/lib.sh"
bash "$ROOT_DIR/infra/local/registry.sh" stop
KAFKA_NODES=3 bash "$ROOT_DIR/infra/local/kafka.sh" stop
KAFKA_NODES=1 bash "$ROOT_DIR/infra/local/kafka.sh" stop
log "stack stopped"

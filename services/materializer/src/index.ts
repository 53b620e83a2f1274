/** The materializer's parts, for embedding (tests, a supervisor); main.ts wires them for a process. */
export { applyBatch, MATERIALIZED_KINDS, type ApplyResult, type MaterializedKind } from './apply.js';
export { DEFAULT_PRIORITY, ListingsFirst, nextPriority, type PriorityOptions, type PriorityState } from './priority.js';
export { Materializer, type BatchReport, type MaterializerOptions, type MaterializerState } from './materializer.js';
export { kafkaGroups, otherKindsGroup } from './groups.js';
export { CHANGES_CHANNEL, OutboxPublisher, type OutboxOptions, type OutboxState } from './outbox.js';
export { MaterializerMetrics } from './metrics.js';
export { Heartbeat, measureLag, type HeartbeatOptions, type PartitionLag } from './heartbeat.js';
export { applyIsolating, classifyFailure, sqlState, type FailureClass } from './poison.js';
export { materializerConfigSchema, MIGRATIONS_DIR, type MaterializerConfig } from './config.js';
export { replay, type ReplayOptions, type ReplayResult, type ReplayState } from './replay.js';
export { tableChecksums, type TableChecksum } from './checksums.js';
export { candleColumns, eachKeyOnce, LISTING_COLUMNS, listingRow } from './listings.js';
export {
  clusterIdOf,
  describeMismatch,
  isOffsetsMismatch,
  offsetMismatches,
  planOffsetReset,
  resetStoredOffsets,
  storedOffsetMismatch,
  verifyStoredOffsets,
  type OffsetMismatch,
  type ResetPlan,
  type StoredOffset,
} from './offsets.js';
export { completeRemoves, vouchedOutcome, type MarkerClaims } from './markers.js';
export { refreshLiquidity, type LiquidityRefresh } from './derived.js';
export { schemaLockSql } from './lock.js';
export { hourPartitionName } from './partitions.js';
export { ServedListings, type RepeatClass } from './served.js';

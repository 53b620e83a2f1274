/** The API's parts, for embedding (tests, the supervisor of `make run`); main.ts wires a process. */
export { buildApp, CATALOGUE_MARKETS, LIST_MARKETS, type AppDeps } from './app.js';
export { apiConfigSchema, MIGRATIONS_DIR as API_MIGRATIONS_DIR, type ApiConfig } from './config.js';
export { KeyStore, KEYS_CONTRACT, type ApiKey, type AuthFailure, type CreateKeyInput } from './keys.js';
export { FailedAuthLimiter, MemoryRateLimiter, RedisRateLimiter, type RateLimiter, type Verdict } from './limits.js';
export { ListBodyCache } from './list-cache.js';
export type { ListSource } from './list-reads.js';
export { ROWS_PER_SEGMENT, SegmentedList, type ListRow, type RowChange } from './list-segments.js';
export { ApiMetrics } from './metrics.js';
export {
  ENDPOINT_IDS,
  ENDPOINTS,
  PLANS,
  planFor,
  WEBHOOK_ENDPOINT_IDS,
  type EndpointId,
  type Plan,
  type WebhookEndpointId,
} from './plans.js';
export { ReadModel } from './readmodel.js';
export { DEFAULT_STATUS_OPTIONS } from './status.js';
export type { HistoryPoint } from './routes/schemas.js';
export { ReadModelVersion } from './version.js';
export type { WebhookSettings } from './webhooks/routes.js';
export { WEBHOOKS_API_CONTRACT } from './webhooks/store.js';

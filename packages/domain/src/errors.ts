/**
 * One error type for the whole platform. Retry logic reads `retryable`, never the message text:
 * a poller backs off on `upstream_timeout` but gives up on `upstream_malformed`, a consumer
 * reconnects on `db_unavailable` but stops on `migration_checksum_mismatch`.
 */
const CODES = {
  // input we refuse: never retryable, the same input fails the same way
  invalid_decimal: false,
  non_positive_price: false,
  invalid_phase: false,
  invalid_exterior: false,
  invalid_timestamp: false,
  invalid_item: false,
  unknown_market: false,
  config_invalid: false,
  // upstream marketplaces
  upstream_timeout: true,
  upstream_unavailable: true,
  upstream_rate_limited: true,
  // a truncated or garbled body is usually transient: worth another try of the same page
  upstream_malformed: true,
  // 4xx other than 429: our request is wrong, repeating it will not help
  upstream_rejected: false,
  // a kind asked of an adapter whose format does not serve it (or without the input it needs):
  // a mistake in our wiring, not anything the upstream said
  kind_unsupported: false,
  // the caller gave up on the request (shutdown): nothing failed, nothing to retry
  cancelled: false,
  // our own infrastructure
  kafka_unavailable: true,
  registry_unavailable: true,
  schema_incompatible: false,
  serde_invalid_event: false,
  db_unavailable: true,
  migration_checksum_mismatch: false,
  migration_failed: false,
  copy_failed: true,
  // stored consumer offsets belong to another Kafka cluster, or to a log that no longer reaches
  // them (a topic deleted and created again): applying would skip records, so an operator resets
  offsets_mismatch: false,
  // another process holds what we need (a running materializer while replaying): retry later
  busy: true,
} as const satisfies Record<string, boolean>;

export type ErrorCode = keyof typeof CODES;
export const ERROR_CODES = Object.keys(CODES) as readonly ErrorCode[];

export interface AppErrorOptions {
  cause?: unknown;
  /** Overrides the code's default; e.g. a 4xx upstream status is not worth retrying. */
  retryable?: boolean;
  /** Structured context for logs (field name, market, status…). Never secrets. */
  details?: Record<string, unknown>;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly retryable: boolean;
  readonly details: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.retryable = options.retryable ?? CODES[code];
    this.details = options.details ?? {};
  }
}

/** True only for errors that say so; unknown errors are not retried blindly. */
export function isRetryable(err: unknown): boolean {
  return err instanceof AppError && err.retryable;
}

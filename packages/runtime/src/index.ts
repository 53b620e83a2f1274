export { commonEnv, intFromEnv, parseConfig } from './config.js';
export { createLogger, type Logger } from './logger.js';
export { ShutdownManager } from './shutdown.js';
export { waitForUrl } from './wait.js';
export { serveMetrics, type MetricsServer } from './metrics.js';
export { Backoff, backoffMs, type BackoffPolicy } from './backoff.js';

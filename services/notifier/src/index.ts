/** The notifier's parts, for embedding (tests, benchmarks); main.ts wires them for a process. */
export { Notifier, type NotifierDeps, type NotifierOptions, type NotifierState } from './notifier.js';
export { NotifierMetrics } from './metrics.js';
export { notifierConfigSchema, type NotifierConfig } from './config.js';
export { ChangeConsumer, freshFrom, matchChanges, type CommittedBatch, type ConsumerState } from './consumer.js';
export { Dispatcher, LEASE_MARGIN_MS, type DispatcherOptions, type DispatcherState } from './dispatcher.js';
export { Sealer, shouldSeal, type SealerState } from './sealer.js';
export {
  CREATED_AT_MARGIN_MS,
  KEYS_CHANNEL,
  signingSecrets,
  Subscriptions,
  type ActiveSubscription,
  type LoadMark,
} from './subscriptions.js';
export {
  classifyError,
  classifyResponse,
  Deliverer,
  RESPONSE_READ_BYTES,
  USER_AGENT,
  type DeliveryRequest,
  type DeliveryResult,
} from './deliver.js';
export {
  DISABLE_MIN_ATTEMPTS,
  FAILING_DISABLE_MS,
  next,
  type AttemptOutcome,
  type DeliveryState,
  type Transition,
} from './outcome.js';
export { splitByDailyLimit, type BatchEvent, type NewMessage } from './messages.js';

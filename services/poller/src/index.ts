/** The poller's parts, for embedding (tests, a supervisor); main.ts wires them for a process. */
export { Poller, type CycleResult, type JobState, type PollerDeps, type PollerOptions } from './poller.js';
export { PollerMetrics } from './metrics.js';
export { intervalsFor, pollerConfigSchema, type PollerConfig } from './config.js';
export { CircuitBreaker, TokenBucket, withRetry } from './resilience.js';
export { eventOf } from './events.js';
export {
  CatalogueGate,
  initialGate,
  nextGate,
  type GateEvent,
  type GateReason,
  type GateState,
} from './catalogue-gate.js';
export { KafkaCursorStore, type CursorStore } from './cursor-store.js';

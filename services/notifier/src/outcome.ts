/*
 * What one delivery attempt does to its message and subscription: the pure transition the
 * dispatcher applies (dispatcher.ts performs the effects). No I/O, no clock, no randomness of its
 * own: `now` and `random` are arguments, so every branch is unit-tested.
 *
 *                      ┌──── 2xx ────────────────────────────────▶ succeeded (failing_since cleared)
 *   pending ──claim──▶ delivering
 *      ▲               ├── 5xx/429/timeout/refused, horizon not reached ─▶ pending (next_attempt_at)
 *      └───────────────┘
 *                      └── 3xx/4xx/blocked address, or horizon reached ──▶ failed
 *
 * The subscription's failing streak (failing_since) says "its endpoint is down": only a retryable
 * failure starts or continues it, a success ends it. A final answer (3xx, other 4xx, an address we
 * refuse) is about one message, not the endpoint's health, and leaves the streak as it is. Test
 * deliveries (webhook.test) never touch it: a customer's tests neither disable a subscription nor
 * keep a broken one alive. The subscription is disabled, with the reason, when a retryable failure
 * comes FAILING_DISABLE_MS into the streak on a message already tried DISABLE_MIN_ATTEMPTS times
 * (one message's first failure after a day of sparse, isolated failures disables nothing).
 * A 429 or 503 with Retry-After pauses the whole subscription until then (pausedUntil), not only
 * the message: the receiver asked us to slow down.
 */
import { HOUR_MS } from '@skinprices/domain';
import { RETRY_HORIZON_MS, retryDelayMs } from '@skinprices/webhooks';

/** One HTTP attempt's result (deliver.ts classifies responses and errors into these). */
export type AttemptOutcome =
  | { kind: 'ok'; status: number; error?: undefined }
  /** Worth another try: 5xx, 429, a timeout, a refused or reset connection. */
  | { kind: 'retry'; status?: number; error: string; retryAfterMs?: number }
  /** Trying again would not help: 3xx (never followed), other 4xx, an address we refuse. */
  | { kind: 'fail'; status?: number; error: string };

/** What the transition needs to know of the message and its subscription, times in epoch ms. */
export interface DeliveryState {
  /** Attempts made, this one included (the dispatcher counts it when it claims). */
  attempts: number;
  /** When the message's first attempt was made: the retry horizon counts from here. */
  firstAttemptAt: number;
  /** When the message's (first) change was committed: latency is measured from here. */
  committedAt: number;
  /** The subscription's first failure since its last success; null: not failing. */
  failingSince: number | null;
  /** A webhook.test message: its result never touches the subscription's failing streak. */
  test: boolean;
}

/**
 * The message's new state and what happens to its subscription. `failingSince` is the
 * subscription's failing streak after the attempt: null (ended), a start (kept, or started now), or
 * absent (untouched: the attempt says nothing about the endpoint's health).
 */
export type Transition =
  | {
      status: 'succeeded';
      deliveredAt: number;
      latencyMs: number;
      statusCode: number;
      /** null (a success ends the streak), or absent for a test delivery. */
      failingSince?: null;
    }
  | {
      status: 'pending' | 'failed';
      /** When to try again (status pending). */
      nextAttemptAt?: number;
      statusCode: number | null;
      error: string;
      /** Set only by a retryable failure of a message that is not a test. */
      failingSince?: number;
      /** The receiver's Retry-After: no delivery of the subscription before then. */
      pausedUntil?: number;
      /** Set when the subscription is to be disabled: the reason shown to its owner. */
      disable?: string;
    };

/** A subscription every delivery of which failed this long is disabled. */
export const FAILING_DISABLE_MS = 24 * HOUR_MS;

/** ... and only on a message tried at least this often (the failure in hand included). */
export const DISABLE_MIN_ATTEMPTS = 3;

/** last_error is shown in the delivery log: bounded, whatever a receiver answered. */
const MAX_ERROR_CHARS = 300;

export function next(state: DeliveryState, outcome: AttemptOutcome, now: number, random: () => number): Transition {
  if (outcome.kind === 'ok')
    return {
      status: 'succeeded',
      deliveredAt: now,
      // A clock step between the materializer's host and ours must not make it negative.
      latencyMs: Math.max(0, Math.round(now - state.committedAt)),
      statusCode: outcome.status,
      ...(state.test ? {} : { failingSince: null }),
    };
  const error = outcome.error.slice(0, MAX_ERROR_CHARS);
  const failing = outcome.kind === 'retry' && !state.test;
  const failingSince = failing ? (state.failingSince ?? now) : undefined;
  const disable =
    failingSince !== undefined && now - failingSince >= FAILING_DISABLE_MS && state.attempts >= DISABLE_MIN_ATTEMPTS
      ? `every delivery failed for 24 h; last: ${error}`.slice(0, MAX_ERROR_CHARS + 50)
      : undefined;
  const pausedUntil =
    outcome.kind === 'retry' && outcome.retryAfterMs !== undefined ? now + outcome.retryAfterMs : undefined;
  const common = {
    statusCode: outcome.status ?? null,
    error,
    ...(failingSince === undefined ? {} : { failingSince }),
    ...(pausedUntil === undefined ? {} : { pausedUntil }),
    ...(disable ? { disable } : {}),
  };
  // "At least 24 h": a failure before the horizon is retried even if the retry lands past it.
  if (outcome.kind === 'fail' || now - state.firstAttemptAt >= RETRY_HORIZON_MS) return { status: 'failed', ...common };
  const delay = outcome.retryAfterMs ?? retryDelayMs(state.attempts, random);
  return { status: 'pending', nextAttemptAt: now + delay, ...common };
}

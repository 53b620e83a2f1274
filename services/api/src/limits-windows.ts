/**
 * The limits' windows and the arithmetic of counting in them, shared by every limiter (limits.ts),
 * the per-turn batching (limits-batch.ts) and the cluster primary's counter (limits-shared.ts).
 */
import type { ApiKey } from './keys.js';

export type Verdict = { ok: true } | { ok: false; window: 'second' | 'minute' | 'day'; retryAfterS: number };

/** What the limits read of a key: all that crosses to Redis or to the cluster primary. */
export type LimitedKey = Pick<ApiKey, 'prefix' | 'perSecond' | 'perMinute' | 'perDay'>;

/**
 * A batch of n hits of one key, counted: how many of them each window admitted, in window order
 * (second ≥ minute ≥ day, since a hit refused by a window never reaches the next). Hit i (0-based,
 * in arrival order) passes a window iff i < its count: the first hits get the room, as they would
 * one at a time.
 */
export type Admitted = readonly [second: number, minute: number, day: number];

export const WINDOWS = [
  ['second', 1_000],
  ['minute', 60_000],
  ['day', 86_400_000],
] as const;

export const limitOf = (key: LimitedKey, w: (typeof WINDOWS)[number][0]) =>
  w === 'second' ? key.perSecond : w === 'minute' ? key.perMinute : key.perDay;

/** Whole seconds until the window ends (at least 1: the spec's "retry after 1 second"). */
export const retryAfter = (now: number, ms: number) => Math.max(1, Math.ceil((ms - (now % ms)) / 1000));

/**
 * How many of `n` hits reaching a window pass it, when it held `before` hits of its `limit`. The
 * window counts all n either way (as INCR does one at a time: a refused hit is counted where it
 * was refused), so `before` may already be past the limit.
 */
export const room = (limit: number, before: number, n: number) => Math.max(0, Math.min(n, limit - before));

/** The verdict of hit i of a batch counted as `admitted`: the first window that refused it, if any. */
export function verdictOf(admitted: Admitted, i: number, now: number): Verdict {
  for (let w = 0; w < WINDOWS.length; w++) {
    if (i < admitted[w]!) continue;
    const [window, ms] = WINDOWS[w]!;
    return { ok: false, window, retryAfterS: retryAfter(now, ms) };
  }
  return { ok: true };
}

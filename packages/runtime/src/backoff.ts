/**
 * The one backoff of the platform: exponential with full jitter ("Exponential Backoff And
 * Jitter", AWS Architecture Blog). The wait before retry n is uniform in [0, min(max, base·2^(n−1))):
 * the ceiling grows so a persistent failure is not hammered, and the jitter spreads processes that
 * failed together (every poller when the broker went away) so they do not return in step.
 */

export interface BackoffPolicy {
  /** The first retry's ceiling. */
  baseMs: number;
  /** The largest ceiling. */
  maxMs: number;
}

/** The wait before retry `attempt` (1-based). */
export function backoffMs(attempt: number, policy: BackoffPolicy, random: () => number = Math.random): number {
  return Math.floor(random() * Math.min(policy.maxMs, policy.baseMs * 2 ** (Math.max(1, attempt) - 1)));
}

/** A loop's backoff: each failure waits longer (up to the policy's max), a success starts over. */
export class Backoff {
  private failures = 0;

  constructor(
    private readonly policy: BackoffPolicy,
    private readonly random: () => number = Math.random,
  ) {}

  /** Failures since the last success. */
  get attempts(): number {
    return this.failures;
  }

  /** Counts a failure; returns how long to wait before trying again. */
  next(): number {
    this.failures++;
    return backoffMs(this.failures, this.policy, this.random);
  }

  reset(): void {
    this.failures = 0;
  }
}

/**
 * What stands between a poller and a struggling upstream: a token-bucket rate limit that also
 * honours Retry-After, retries with exponential backoff and full jitter driven by the error's
 * `retryable` flag, and a circuit breaker that stops hammering a marketplace that keeps failing.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { type AppError, isRetryable } from '@skinprices/domain';
import { backoffMs } from '@skinprices/runtime';

/**
 * A token bucket for one upstream: `burst` requests at once, then `perSecond` sustained (which
 * may be far below one: Skinport allows 8 per 5 minutes). Not the API's per-key limiter.
 */
export class TokenBucket {
  private tokens: number;
  private last = Date.now();
  private pausedUntil = 0;
  private readonly perSecond: number;
  private readonly burst: number;

  constructor(rate: { perSecond: number; burst?: number }) {
    this.perSecond = rate.perSecond;
    // At least one token, or a rate below 1/s could never send its first request.
    this.burst = Math.max(1, rate.burst ?? rate.perSecond);
    this.tokens = this.burst;
  }

  /** No request before `until` (epoch ms): the upstream said Retry-After. */
  pauseUntil(until: number): void {
    this.pausedUntil = Math.max(this.pausedUntil, until);
  }

  async acquire(signal?: AbortSignal): Promise<void> {
    for (;;) {
      const now = Date.now();
      if (now < this.pausedUntil) {
        await sleep(this.pausedUntil - now, undefined, { signal });
        continue;
      }
      this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.perSecond);
      this.last = now;
      if (this.tokens >= 1) {
        this.tokens -= 1;
        return;
      }
      await sleep(Math.ceil(((1 - this.tokens) / this.perSecond) * 1000), undefined, { signal });
    }
  }
}

export interface RetryOptions {
  /** Attempts after the first. @default 4 */
  retries: number;
  /** First backoff ceiling. @default 250 */
  baseMs: number;
  /** Largest backoff. @default 15000 */
  maxMs: number;
  limiter: TokenBucket;
  /** Wait after a 429 without Retry-After (the format's documented habit); absent: the backoff. */
  bare429Ms?: number;
  signal?: AbortSignal;
  random?: () => number;
  onRetry?: (err: AppError, attempt: number, waitMs: number) => void;
}

export async function withRetry<T>(fn: () => Promise<T>, o: RetryOptions): Promise<T> {
  const random = o.random ?? Math.random;
  for (let attempt = 0; ; attempt++) {
    await o.limiter.acquire(o.signal);
    try {
      return await fn();
    } catch (err) {
      if (!isRetryable(err) || attempt >= o.retries || o.signal?.aborted) throw err;
      const e = err as AppError;
      const retryAfter = e.details.retryAfterMs;
      let wait = backoffMs(attempt + 1, { baseMs: o.baseMs, maxMs: o.maxMs }, random);
      if (retryAfter === undefined && e.code === 'upstream_rate_limited' && o.bare429Ms !== undefined) {
        // A bare 429 (Steam): the ban lasts about this long whatever we do; every job waits it out.
        o.limiter.pauseUntil(Date.now() + o.bare429Ms);
        wait = o.bare429Ms + Math.floor(random() * o.baseMs);
      } else if (typeof retryAfter === 'number') {
        // Honour the upstream's word, plus jitter so several pollers do not return in step.
        o.limiter.pauseUntil(Date.now() + retryAfter);
        wait = retryAfter + Math.floor(random() * o.baseMs);
      }
      o.onRetry?.(e, attempt + 1, wait);
      await sleep(wait, undefined, { signal: o.signal });
    }
  }
}

/*
 * Circuit breaker states:
 *
 *   closed ──(threshold failed cycles in a row)──▶ open ──(cool-down over)──▶ half-open
 *     ▲                                              ▲                            │
 *     └──────────────(a cycle succeeds)──────────────┼────────────────────────────┤
 *                                                    └───(the trial cycle fails)──┘
 */
export type CircuitState = 'closed' | 'open' | 'half-open';

export class CircuitBreaker {
  private failures = 0;
  private openedAt = 0;
  private current: CircuitState = 'closed';

  constructor(
    private readonly threshold: number,
    private readonly coolDownMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  get state(): CircuitState {
    if (this.current === 'open' && this.now() - this.openedAt >= this.coolDownMs) this.current = 'half-open';
    return this.current;
  }

  /** Milliseconds until a trial is allowed (0 when closed or half-open). */
  waitMs(): number {
    return this.state === 'open' ? this.coolDownMs - (this.now() - this.openedAt) : 0;
  }

  record(success: boolean): void {
    if (success) {
      this.failures = 0;
      this.current = 'closed';
      return;
    }
    this.failures++;
    if (this.current === 'half-open' || this.failures >= this.threshold) {
      this.current = 'open';
      this.openedAt = this.now();
    }
  }
}

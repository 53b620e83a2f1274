/*
 * Every wait here runs on vitest's fake clock: no test sleeps for real, and the times asserted
 * are exact instead of "at least, give or take a loaded machine".
 */
import type * as timersPromises from 'node:timers/promises';
import { AppError } from '@skinprices/domain';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CircuitBreaker, TokenBucket, withRetry } from './resilience.js';

// resilience.ts sleeps with node:timers/promises' setTimeout, which vitest's fake clock does not
// replace (it fakes the global timers only), so those sleeps would stay real. Route them through
// the global setTimeout, which the fake clock does replace.
vi.mock('node:timers/promises', async (importOriginal) => ({
  ...(await importOriginal<typeof timersPromises>()),
  setTimeout: <T>(ms?: number, value?: T, options?: { signal?: AbortSignal }): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const signal = options?.signal;
      if (signal?.aborted) return reject(signal.reason);
      const onAbort = (): void => {
        globalThis.clearTimeout(timer);
        reject(signal?.reason);
      };
      const timer = globalThis.setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve(value as T);
      }, ms);
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
}));

beforeEach(() => void vi.useFakeTimers());
afterEach(() => void vi.useRealTimers());

const fast = () => ({ retries: 3, baseMs: 1, maxMs: 5, limiter: new TokenBucket({ perSecond: 1000 }) });

describe('withRetry', () => {
  it('retries retryable errors and returns the first success', async () => {
    let calls = 0;
    const result = withRetry(async () => {
      calls++;
      if (calls < 3) throw new AppError('upstream_unavailable', '503');
      return 'ok';
    }, fast());
    await vi.runAllTimersAsync();
    expect(await result).toBe('ok');
    expect(calls).toBe(3);
  });

  it('gives up at once on a non-retryable error', async () => {
    let calls = 0;
    const outcome = expect(
      withRetry(async () => {
        calls++;
        throw new AppError('upstream_rejected', '404');
      }, fast()),
    ).rejects.toMatchObject({ code: 'upstream_rejected' });
    await vi.runAllTimersAsync();
    await outcome;
    expect(calls).toBe(1);
  });

  it('gives up after the allowed retries', async () => {
    let calls = 0;
    const outcome = expect(
      withRetry(async () => {
        calls++;
        throw new AppError('upstream_timeout', 'slow');
      }, fast()),
    ).rejects.toMatchObject({ code: 'upstream_timeout' });
    await vi.runAllTimersAsync();
    await outcome;
    expect(calls).toBe(4);
  });

  it('waits Retry-After before the next request, and not a millisecond less', async () => {
    const waits: number[] = [];
    let calls = 0;
    const result = withRetry(
      async () => {
        if (calls++ === 0) throw new AppError('upstream_rate_limited', '429', { details: { retryAfterMs: 120 } });
        return 1;
      },
      { ...fast(), random: () => 0, onRetry: (_e, _a, w) => waits.push(w) },
    );
    await vi.advanceTimersByTimeAsync(119);
    expect(calls).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toBe(2);
    expect(await result).toBe(1);
    expect(waits).toEqual([120]);
  });
});

describe('CircuitBreaker', () => {
  it('opens after the threshold, half-opens after the cool-down, closes on success', () => {
    let now = 0;
    const cb = new CircuitBreaker(3, 1000, () => now);
    cb.record(false);
    cb.record(false);
    expect(cb.state).toBe('closed');
    cb.record(false);
    expect(cb.state).toBe('open');
    expect(cb.waitMs()).toBe(1000);
    now = 1000;
    expect(cb.state).toBe('half-open');
    cb.record(false);
    expect(cb.state).toBe('open');
    now = 2500;
    expect(cb.state).toBe('half-open');
    cb.record(true);
    expect(cb.state).toBe('closed');
  });
});

describe('withRetry after a bare 429', () => {
  it("waits the format's ban length, not the short backoff, and holds every other request too", async () => {
    const limiter = new TokenBucket({ perSecond: 1000 });
    const times: number[] = [];
    const started = Date.now();
    const result = withRetry(
      async () => {
        times.push(Date.now() - started);
        if (times.length === 1) throw new AppError('upstream_rate_limited', '429', { details: {} });
        return 'ok';
      },
      { retries: 3, baseMs: 1, maxMs: 5, limiter, bare429Ms: 60_000, random: () => 0 },
    );
    let other = false;
    await vi.advanceTimersByTimeAsync(1);
    const otherJob = limiter.acquire().then(() => (other = true));
    await vi.advanceTimersByTimeAsync(59_000);
    expect(other).toBe(false);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await result).toBe('ok');
    await otherJob;
    expect(times).toEqual([0, 60_000]);
  });

  it('a 429 with Retry-After still follows Retry-After', async () => {
    const times: number[] = [];
    const started = Date.now();
    const result = withRetry(
      async () => {
        times.push(Date.now() - started);
        if (times.length === 1)
          throw new AppError('upstream_rate_limited', '429', { details: { retryAfterMs: 2_000 } });
        return 'ok';
      },
      { ...fast(), bare429Ms: 60_000, random: () => 0 },
    );
    await vi.runAllTimersAsync();
    expect(await result).toBe('ok');
    expect(times).toEqual([0, 2_000]);
  });
});

describe('TokenBucket', () => {
  it('runs below one request per second: 8 per 5 minutes with a burst of 8, then one per 37.5 s', async () => {
    const limiter = new TokenBucket({ perSecond: 8 / 300, burst: 8 });
    const started = Date.now();
    let acquired = 0;
    const all = (async () => {
      for (let i = 0; i < 10; i++) {
        await limiter.acquire();
        acquired++;
      }
    })();
    await vi.advanceTimersByTimeAsync(0);
    expect(acquired).toBe(8);
    await vi.advanceTimersByTimeAsync(37_499);
    expect(acquired).toBe(8);
    await vi.advanceTimersByTimeAsync(1);
    expect(acquired).toBe(9);
    await vi.advanceTimersByTimeAsync(37_500);
    await all;
    expect(acquired).toBe(10);
    expect(Date.now() - started).toBe(75_000);
  });

  it('spaces requests at the configured rate: a burst of 20, then one per 50 ms', async () => {
    const limiter = new TokenBucket({ perSecond: 20 });
    const started = Date.now();
    let acquired = 0;
    const all = (async () => {
      for (let i = 0; i < 30; i++) {
        await limiter.acquire();
        acquired++;
      }
    })();
    await vi.advanceTimersByTimeAsync(0);
    expect(acquired).toBe(20);
    await vi.advanceTimersByTimeAsync(499);
    expect(acquired).toBe(29);
    await vi.advanceTimersByTimeAsync(1);
    await all;
    expect(acquired).toBe(30);
    expect(Date.now() - started).toBe(500);
  });

  it('holds every request until a pause (Retry-After) is over', async () => {
    const limiter = new TokenBucket({ perSecond: 1000 });
    limiter.pauseUntil(Date.now() + 2_000);
    let done = false;
    const p = limiter.acquire().then(() => (done = true));
    await vi.advanceTimersByTimeAsync(1_999);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await p;
    expect(done).toBe(true);
  });

  it('gives up waiting at once when its signal aborts', async () => {
    const limiter = new TokenBucket({ perSecond: 1000 });
    limiter.pauseUntil(Date.now() + 60_000);
    const abort = new AbortController();
    const outcome = expect(limiter.acquire(abort.signal)).rejects.toMatchObject({ name: 'AbortError' });
    await vi.advanceTimersByTimeAsync(10);
    abort.abort();
    await outcome;
    expect(vi.getTimerCount()).toBe(0);
  });
});

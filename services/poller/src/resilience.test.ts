import { AppError } from '@skinprices/domain';
import { describe, expect, it } from 'vitest';
import { backoffMs, CircuitBreaker, RateLimiter, withRetry } from './resilience.js';

const fast = { retries: 3, baseMs: 1, maxMs: 5, limiter: new RateLimiter(1000) };

describe('withRetry', () => {
  it('retries retryable errors and returns the first success', async () => {
    let calls = 0;
    const result = await withRetry(async () => {
      calls++;
      if (calls < 3) throw new AppError('upstream_unavailable', '503');
      return 'ok';
    }, fast);
    expect(result).toBe('ok');
    expect(calls).toBe(3);
  });

  it('gives up at once on a non-retryable error', async () => {
    let calls = 0;
    await expect(
      withRetry(async () => {
        calls++;
        throw new AppError('upstream_rejected', '404');
      }, fast),
    ).rejects.toMatchObject({ code: 'upstream_rejected' });
    expect(calls).toBe(1);
  });

  it('gives up after the allowed retries', async () => {
    let calls = 0;
    await expect(
      withRetry(async () => {
        calls++;
        throw new AppError('upstream_timeout', 'slow');
      }, fast),
    ).rejects.toMatchObject({ code: 'upstream_timeout' });
    expect(calls).toBe(4);
  });

  it('waits at least Retry-After before the next request', async () => {
    const waits: number[] = [];
    let calls = 0;
    const started = Date.now();
    await withRetry(
      async () => {
        if (calls++ === 0) throw new AppError('upstream_rate_limited', '429', { details: { retryAfterMs: 120 } });
        return 1;
      },
      { ...fast, limiter: new RateLimiter(1000), onRetry: (_e, _a, w) => waits.push(w) },
    );
    expect(waits[0]).toBeGreaterThanOrEqual(120);
    expect(Date.now() - started).toBeGreaterThanOrEqual(115);
  });
});

describe('backoffMs', () => {
  it('stays under an exponential ceiling capped at max', () => {
    expect(backoffMs(1, 100, 10_000, () => 0.999)).toBeLessThan(100);
    expect(backoffMs(4, 100, 10_000, () => 0.999)).toBeLessThan(800);
    expect(backoffMs(20, 100, 10_000, () => 0.999)).toBeLessThan(10_000);
    expect(backoffMs(3, 100, 10_000, () => 0)).toBe(0);
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

describe('RateLimiter', () => {
  it('spaces requests at the configured rate', async () => {
    const limiter = new RateLimiter(20);
    const started = Date.now();
    for (let i = 0; i < 30; i++) await limiter.acquire();
    // 20 burst, then 10 more at 20/s = ~500 ms
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
  });
});

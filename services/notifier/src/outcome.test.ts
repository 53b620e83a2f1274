/** The pure transition of one delivery attempt (outcome.ts): every answer a receiver can give. */
import { HOUR_MS } from '@skinprices/domain';
import { RETRY_HORIZON_MS } from '@skinprices/webhooks';
import { describe, expect, it } from 'vitest';
import { DISABLE_MIN_ATTEMPTS, FAILING_DISABLE_MS, next, type DeliveryState } from './outcome.js';

const T0 = Date.UTC(2026, 0, 10, 12);
const fresh: DeliveryState = {
  attempts: 1,
  firstAttemptAt: T0,
  committedAt: T0 - 300,
  failingSince: null,
  test: false,
};
const half = () => 0.5;

describe('next(state, outcome)', () => {
  it('2xx: succeeded, latency from the commit, the failing streak ended', () => {
    const t = next({ ...fresh, failingSince: T0 - HOUR_MS }, { kind: 'ok', status: 204 }, T0 + 200, half);
    expect(t).toEqual({
      status: 'succeeded',
      deliveredAt: T0 + 200,
      latencyMs: 500,
      statusCode: 204,
      failingSince: null,
    });
  });

  it('a commit time ahead of our clock gives latency 0, not a negative one', () => {
    const t = next({ ...fresh, committedAt: T0 + 1_000 }, { kind: 'ok', status: 200 }, T0, half);
    expect(t.status === 'succeeded' && t.latencyMs).toBe(0);
  });

  it('5xx: pending again after the exponential delay with jitter; the subscription starts failing', () => {
    const outcome = { kind: 'retry', status: 503, error: 'HTTP 503' } as const;
    const first = next(fresh, outcome, T0, () => 0);
    expect(first).toMatchObject({ status: 'pending', nextAttemptAt: T0 + 2_500, statusCode: 503, failingSince: T0 });
    const fourth = next({ ...fresh, attempts: 4 }, outcome, T0, () => 1);
    expect(fourth).toMatchObject({ status: 'pending', nextAttemptAt: T0 + 40_000 });
  });

  it("429 with Retry-After: the receiver's delay, not the schedule's, and the whole subscription paused till then", () => {
    const t = next(fresh, { kind: 'retry', status: 429, error: 'HTTP 429', retryAfterMs: 7_000 }, T0, half);
    expect(t).toMatchObject({ status: 'pending', nextAttemptAt: T0 + 7_000, pausedUntil: T0 + 7_000, statusCode: 429 });
    // Without Retry-After nothing is paused: the schedule spaces this message only.
    expect(next(fresh, { kind: 'retry', status: 429, error: 'HTTP 429' }, T0, half)).not.toHaveProperty('pausedUntil');
  });

  it('Retry-After on the last retry still pauses the subscription (the receiver said so)', () => {
    const late = { ...fresh, attempts: 30, firstAttemptAt: T0 - RETRY_HORIZON_MS };
    const t = next(late, { kind: 'retry', status: 503, error: 'HTTP 503', retryAfterMs: 60_000 }, T0, half);
    expect(t).toMatchObject({ status: 'failed', pausedUntil: T0 + 60_000 });
  });

  it.each([
    ['timeout', 'timed out after 10000 ms'],
    ['refused', 'ECONNREFUSED: connect ECONNREFUSED 10.0.0.1:443'],
  ])('%s: retried, no status code', (_, error) => {
    const t = next(fresh, { kind: 'retry', error }, T0, half);
    expect(t).toMatchObject({ status: 'pending', statusCode: null, error });
  });

  it.each([
    [404, 'HTTP 404: not found'],
    [301, 'HTTP 301: redirects are not followed'],
  ])(
    '%i: failed at once; the failing streak untouched (an answer about this message, not the endpoint)',
    (status, error) => {
      const t = next(fresh, { kind: 'fail', status, error }, T0, half);
      expect(t).toEqual({ status: 'failed', statusCode: status, error });
      const during = next(
        { ...fresh, attempts: 5, failingSince: T0 - FAILING_DISABLE_MS },
        { kind: 'fail', status, error },
        T0,
        half,
      );
      expect(during).toEqual({ status: 'failed', statusCode: status, error });
    },
  );

  it('a retryable failure once the horizon passed since the first attempt: failed', () => {
    const late = { ...fresh, attempts: 30, firstAttemptAt: T0 - RETRY_HORIZON_MS };
    expect(next(late, { kind: 'retry', status: 500, error: 'HTTP 500' }, T0, half).status).toBe('failed');
    // A moment before the horizon it is still retried, even if the retry lands past it.
    const before = { ...late, firstAttemptAt: T0 - RETRY_HORIZON_MS + 1 };
    expect(next(before, { kind: 'retry', status: 500, error: 'HTTP 500' }, T0, half).status).toBe('pending');
  });

  it('24 h of failures disable the subscription, saying why; a shorter streak keeps its start', () => {
    const outcome = { kind: 'retry', status: 500, error: 'HTTP 500: down' } as const;
    const tried = { ...fresh, attempts: DISABLE_MIN_ATTEMPTS };
    const streak = next({ ...tried, failingSince: T0 - FAILING_DISABLE_MS + 1 }, outcome, T0, half);
    expect(streak).toMatchObject({ status: 'pending', failingSince: T0 - FAILING_DISABLE_MS + 1 });
    expect(streak).not.toHaveProperty('disable');
    const t = next({ ...tried, failingSince: T0 - FAILING_DISABLE_MS }, outcome, T0, half);
    expect(t).toMatchObject({ disable: 'every delivery failed for 24 h; last: HTTP 500: down' });
  });

  // Root cause guarded: a day-old streak disabled the subscription on the first failure of any
  // message — one new message failing once after a day of rare, isolated failures was enough.
  it('a 24 h streak disables only on a message tried DISABLE_MIN_ATTEMPTS times', () => {
    const outcome = { kind: 'retry', status: 500, error: 'HTTP 500' } as const;
    const old = { ...fresh, failingSince: T0 - 2 * FAILING_DISABLE_MS };
    const once = next({ ...old, attempts: DISABLE_MIN_ATTEMPTS - 1 }, outcome, T0, half);
    expect(once).toMatchObject({ status: 'pending', failingSince: old.failingSince });
    expect(once).not.toHaveProperty('disable');
    expect(next({ ...old, attempts: DISABLE_MIN_ATTEMPTS }, outcome, T0, half)).toHaveProperty('disable');
  });

  // Root cause guarded: a customer's test deliveries to a receiver that is down started the
  // streak (and so could disable the subscription); a test answered 2xx ended a real streak.
  it('a test delivery never touches the failing streak', () => {
    const test = { ...fresh, test: true, attempts: 10, failingSince: T0 - FAILING_DISABLE_MS };
    for (const outcome of [
      { kind: 'retry', status: 500, error: 'HTTP 500' },
      { kind: 'fail', status: 404, error: 'HTTP 404' },
      { kind: 'ok', status: 204 },
    ] as const) {
      const t = next(test, outcome, T0, half);
      expect(t).not.toHaveProperty('failingSince');
      expect(t).not.toHaveProperty('disable');
    }
    expect(next({ ...test, failingSince: null }, { kind: 'retry', error: 'timed out' }, T0, half)).not.toHaveProperty(
      'failingSince',
    );
  });

  it('bounds the error kept', () => {
    const t = next(fresh, { kind: 'fail', status: 400, error: 'x'.repeat(5_000) }, T0, half);
    expect(t.status === 'failed' && t.error.length).toBeLessThanOrEqual(300);
  });
});

import { describe, expect, it } from 'vitest';
import { RETRY_HORIZON_MS, retryAfterMs, retryDelayMs } from './schedule.js';

describe('retryDelayMs', () => {
  it('doubles from 5 s with equal jitter (half fixed, half random)', () => {
    expect(retryDelayMs(1, () => 0)).toBe(2_500);
    expect(retryDelayMs(1, () => 1)).toBe(5_000);
    expect(retryDelayMs(2, () => 0)).toBe(5_000);
    expect(retryDelayMs(3, () => 0.5)).toBe(15_000);
  });

  it('stays within [step/2, step] and never above an hour', () => {
    for (let attempt = 1; attempt <= 60; attempt++) {
      const step = Math.min(3_600_000, 5_000 * 2 ** (attempt - 1));
      for (const r of [0, 0.25, 0.999999]) {
        const d = retryDelayMs(attempt, () => r);
        expect(d).toBeGreaterThanOrEqual(step / 2);
        expect(d).toBeLessThanOrEqual(step);
      }
    }
    expect(retryDelayMs(1_000_000, () => 0.999)).toBeLessThanOrEqual(3_600_000);
    expect(retryDelayMs(0, () => 0)).toBe(2_500); // below 1 reads as the first attempt
  });

  it('retries for 24 hours', () => {
    expect(RETRY_HORIZON_MS).toBe(86_400_000);
  });
});

describe('retryAfterMs', () => {
  const now = Date.UTC(2025, 0, 1, 12, 0, 0);

  it('reads delta-seconds', () => {
    expect(retryAfterMs('30', now)).toBe(30_000);
    expect(retryAfterMs(' 120 ', now)).toBe(120_000);
  });

  it('reads the three HTTP-date forms', () => {
    expect(retryAfterMs('Wed, 01 Jan 2025 12:00:45 GMT', now)).toBe(45_000);
    expect(retryAfterMs('Wednesday, 01-Jan-25 12:01:00 GMT', now)).toBe(60_000);
    expect(retryAfterMs('Wed Jan  1 12:00:10 2025', now)).toBe(10_000);
  });

  it('clamps to [1 s, 1 h]', () => {
    expect(retryAfterMs('0', now)).toBe(1_000);
    expect(retryAfterMs('Wed, 01 Jan 2025 11:00:00 GMT', now)).toBe(1_000); // in the past
    expect(retryAfterMs('86400', now)).toBe(3_600_000);
    expect(retryAfterMs('99999999999999999999999', now)).toBe(3_600_000);
    expect(retryAfterMs('Thu, 01 Jan 2026 00:00:00 GMT', now)).toBe(3_600_000);
  });

  it('ignores what is absent or unreadable', () => {
    for (const garbage of [undefined, '', 'soon', '-5', '1.5', '1e3', '2025-01-01T12:00:30Z', 'Wed, 99 Foo 2025 GMT']) {
      expect(retryAfterMs(garbage, now)).toBeUndefined();
    }
  });
});

import { describe, expect, it } from 'vitest';
import type { ApiKey } from './keys.js';
import { MemoryRateLimiter } from './limits.js';

const key = (over: Partial<ApiKey> = {}): ApiKey => ({
  id: '1',
  prefix: 'abcdef0123',
  customer: 'c',
  plan: 'basic',
  allowedEndpoints: null,
  disabled: false,
  expiresAt: null,
  perSecond: 10,
  perMinute: 300,
  perDay: 50_000,
  createdAt: new Date(0),
  note: null,
  ...over,
});

describe('MemoryRateLimiter', () => {
  it('allows 10 in a second, refuses the 11th with Retry-After 1, and starts over next second', async () => {
    const l = new MemoryRateLimiter();
    const t = 1_700_000_000_000;
    for (let i = 0; i < 10; i++) expect(await l.hit(key(), t + i)).toEqual({ ok: true });
    expect(await l.hit(key(), t + 500)).toEqual({ ok: false, window: 'second', retryAfterS: 1 });
    expect(await l.hit(key(), t + 1_000)).toEqual({ ok: true });
  });

  it('a request refused by the second does not count against the minute', async () => {
    const l = new MemoryRateLimiter();
    const k = key({ perSecond: 2, perMinute: 4 });
    const t = 1_700_000_040_000; // the start of a minute
    const codes: string[] = [];
    for (let s = 0; s < 3; s++)
      for (let i = 0; i < 3; i++) {
        const v = await l.hit(k, t + s * 1_000 + i);
        codes.push(v.ok ? 'ok' : v.window);
      }
    // Seconds 0 and 1 spend the minute's 4; in second 2 the minute refuses until the second does.
    expect(codes).toEqual(['ok', 'ok', 'second', 'ok', 'ok', 'second', 'minute', 'minute', 'second']);
    const v = await l.hit(k, t + 3_000);
    expect(v).toEqual({ ok: false, window: 'minute', retryAfterS: 57 });
  });

  it('keys are counted apart', async () => {
    const l = new MemoryRateLimiter();
    const t = 1_700_000_000_000;
    for (let i = 0; i < 10; i++) await l.hit(key(), t);
    expect((await l.hit(key(), t)).ok).toBe(false);
    expect((await l.hit(key({ prefix: 'zzzzzzzzzz' }), t)).ok).toBe(true);
  });
});

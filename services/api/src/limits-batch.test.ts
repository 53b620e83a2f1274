import fc from 'fast-check';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { HitCoalescer, type Batch } from './limits-batch.js';
import { MemoryRateLimiter, RedisRateLimiter, verdictOf, type LimitedKey, type Verdict } from './limits.js';

const T0 = 1_700_000_000_000;

/** The limiter's counters, to compare two limiters' state after the same hits. */
const countsOf = (l: MemoryRateLimiter) =>
  (l as unknown as { counts: Map<string, { window: number; n: number }> }).counts;

/** Small limits, so that every window refuses often; two sets, so one prefix can change limits. */
const limitSets = fc.array(
  fc.record({
    perSecond: fc.integer({ min: 0, max: 6 }),
    perMinute: fc.integer({ min: 0, max: 15 }),
    perDay: fc.integer({ min: 0, max: 40 }),
  }),
  { minLength: 2, maxLength: 2 },
);

/** Time steps that stay in a second, cross one, a minute or a day. */
const step = fc.oneof(
  fc.constant(0),
  fc.integer({ min: 1, max: 999 }),
  fc.constantFrom(1_000, 59_000, 60_000, 86_400_000),
);

const hitArb = fc.record({ prefix: fc.constantFrom('a', 'b', 'c'), limits: fc.nat(1), fresh: fc.boolean(), dt: step });

/** Keys by prefix and limit set: the same object each time unless `fresh` (a reloaded key). */
function keyMaker(sets: { perSecond: number; perMinute: number; perDay: number }[]) {
  const made = new Map<string, LimitedKey>();
  return (h: { prefix: string; limits: number; fresh: boolean }): LimitedKey => {
    const id = `${h.prefix}:${h.limits}`;
    const key = made.get(id) ?? { prefix: h.prefix, ...sets[h.limits]! };
    made.set(id, key);
    return h.fresh ? { ...key } : key;
  };
}

/** What n sequential hits answer, one at a time. */
async function sequential(l: MemoryRateLimiter, key: LimitedKey, n: number, now: number): Promise<Verdict[]> {
  const out: Verdict[] = [];
  for (let i = 0; i < n; i++) out.push(await l.hit(key, now));
  return out;
}

describe('MemoryRateLimiter.hitMany', () => {
  it('answers and counts exactly as n sequential hits (property)', async () => {
    const op = fc.record({ hit: hitArb, n: fc.nat(25) });
    await fc.assert(
      fc.asyncProperty(limitSets, fc.array(op, { maxLength: 40 }), async (sets, ops) => {
        const [many, one] = [new MemoryRateLimiter(), new MemoryRateLimiter()];
        const keyOf = keyMaker(sets);
        let now = T0;
        for (const { hit, n } of ops) {
          now += hit.dt;
          const key = keyOf(hit);
          const admitted = many.hitMany(key, n, now);
          const got = Array.from({ length: n }, (_, i) => verdictOf(admitted, i, now));
          expect(got).toEqual(await sequential(one, key, n, now));
          expect(countsOf(many)).toEqual(countsOf(one));
        }
      }),
      { numRuns: 300 },
    );
  });

  it('admits in arrival order: second, then minute, then day', () => {
    const l = new MemoryRateLimiter();
    const key = { prefix: 'k', perSecond: 5, perMinute: 3, perDay: 2 };
    expect(l.hitMany(key, 7, T0)).toEqual([5, 3, 2]);
    // The minute counted 5 (the ones past the second), the day 3: nothing passes either now.
    expect(l.hitMany(key, 2, T0 + 1_000)).toEqual([2, 0, 0]);
    expect(countsOf(l).get('k:minute')?.n).toBe(7);
    expect(countsOf(l).get('k:day')?.n).toBe(3);
  });
});

/** A coalescer counting in `l`, as the primary does; `calls` records each turn's batches. */
function coalescedMemory(l: MemoryRateLimiter) {
  const calls: { prefix: string; n: number }[][] = [];
  const c = new HitCoalescer((batches) => {
    calls.push(batches.map((b) => ({ prefix: b.key.prefix, n: b.n })));
    for (const b of batches) b.settle(l.hitMany(b.key, b.n, b.now));
  });
  return { c, calls };
}

describe('HitCoalescer', () => {
  it('hits of a turn, batched, answer and count exactly as the same hits one at a time (property)', async () => {
    const turns = fc.array(fc.array(hitArb, { minLength: 1, maxLength: 30 }), { maxLength: 12 });
    await fc.assert(
      fc.asyncProperty(limitSets, turns, async (sets, ts) => {
        const [batched, one] = [new MemoryRateLimiter(), new MemoryRateLimiter()];
        const { c, calls } = coalescedMemory(batched);
        const keyOf = keyMaker(sets);
        let now = T0;
        for (const turn of ts) {
          const hits = turn.map((h) => ({ key: keyOf(h), now: (now += h.dt) }));
          const got = await Promise.all(hits.map((h) => c.hit(h.key, h.now)));
          const want: Verdict[] = [];
          for (const h of hits) want.push(await one.hit(h.key, h.now));
          expect(got).toEqual(want);
          expect(countsOf(batched)).toEqual(countsOf(one));
        }
        // One call to the counter per turn.
        expect(calls).toHaveLength(ts.length);
      }),
      { numRuns: 200 },
    );
  });

  it('sends a turn as one call with one batch per key, in arrival order', async () => {
    const { c, calls } = coalescedMemory(new MemoryRateLimiter());
    const keys = ['x', 'y', 'z'].map((prefix) => ({ prefix, perSecond: 10, perMinute: 100, perDay: 1_000 }));
    const verdicts = await Promise.all(Array.from({ length: 99 }, (_, i) => c.hit(keys[i % 3]!, T0)));
    expect(calls).toEqual([
      [
        { prefix: 'x', n: 33 },
        { prefix: 'y', n: 33 },
        { prefix: 'z', n: 33 },
      ],
    ]);
    // Each key's first 10 pass: hits 0..29 of the 99.
    expect(verdicts.map((v) => v.ok)).toEqual(Array.from({ length: 99 }, (_, i) => i < 30));
  });

  it("opens a key's next batch when the second changes within a turn", async () => {
    const { c, calls } = coalescedMemory(new MemoryRateLimiter());
    const key = { prefix: 'k', perSecond: 1, perMinute: 100, perDay: 1_000 };
    const got = await Promise.all([c.hit(key, T0 + 998), c.hit(key, T0 + 999), c.hit(key, T0 + 1_000)]);
    expect(calls).toEqual([
      [
        { prefix: 'k', n: 2 },
        { prefix: 'k', n: 1 },
      ],
    ]);
    expect(got).toEqual([{ ok: true }, { ok: false, window: 'second', retryAfterS: 1 }, { ok: true }]);
  });

  it('a counter that throws fails every hit of the turn', async () => {
    const c = new HitCoalescer(() => {
      throw new Error('counter down');
    });
    const key = { prefix: 'k', perSecond: 1, perMinute: 1, perDay: 1 };
    const all = await Promise.allSettled([c.hit(key, T0), c.hit(key, T0), c.hit({ ...key, prefix: 'j' }, T0)]);
    expect(all.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
  });

  it('a batch is final once counted: a hit after the flush opens a new one', async () => {
    const seen: Batch[] = [];
    const c = new HitCoalescer((batches) => {
      seen.push(...batches);
      for (const b of batches) b.settle([b.n, b.n, b.n]);
    });
    const key = { prefix: 'k', perSecond: 9, perMinute: 9, perDay: 9 };
    await c.hit(key, T0);
    await c.hit(key, T0);
    expect(seen.map((b) => b.n)).toEqual([1, 1]);
  });
});

describe('RedisRateLimiter: a failed call', () => {
  it('fails every hit of its turn, of every key, and the gauge says so', async () => {
    const registry = new Registry();
    const l = new RedisRateLimiter('redis://127.0.0.1:1', registry); // nobody listens there
    try {
      const key = { prefix: 'k', perSecond: 10, perMinute: 10, perDay: 10 };
      const hits = [l.hit(key, T0), l.hit(key, T0), l.hit({ ...key, prefix: 'j' }, T0)];
      const all = await Promise.allSettled(hits);
      expect(all.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
      const up = (await registry.getSingleMetric('api_limiter_redis_up')?.get())?.values[0]?.value;
      expect(up).toBe(0);
    } finally {
      l.close().catch(() => {});
    }
  });
});

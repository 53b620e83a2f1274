/**
 * The Redis rate limiter against the real Redis: a batch (`hitMany`) and a turn of hits counted by
 * one script call answer and count exactly as the same hits one at a time in memory, and several
 * limiters (as several API processes) sharing Redis admit exactly each window's limit between them.
 * Every run uses its own key prefixes; the counters expire by themselves.
 */
import { randomUUID } from 'node:crypto';
import { createConnection, type Socket } from 'node:net';
import { MemoryRateLimiter, RedisRateLimiter, type Verdict } from '@skinprices/api';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const DAY = Date.UTC(2030, 0, 1); // the start of a day, so of a minute and a second too
type Key = { prefix: string; perSecond: number; perMinute: number; perDay: number };

type Reply = string | number | null;

/**
 * A bare Redis connection (the tests' package has no Redis client, see scale-out.test.ts):
 * inline commands, one at a time; replies +, -, : and $ (all GET, PTTL and MONITOR answer).
 */
class RawRedis {
  private buf = '';
  private readonly waiting: ((reply: Reply) => void)[] = [];
  /** After MONITOR: every command Redis runs, one status line each. */
  private onPush: ((line: string) => void) | undefined;

  private constructor(private readonly socket: Socket) {
    socket.on('data', (d: Buffer) => {
      this.buf += d.toString('latin1');
      this.drain();
    });
  }

  static connect(url: string): Promise<RawRedis> {
    const { hostname, port } = new URL(url);
    return new Promise((resolve, reject) => {
      const socket = createConnection({ host: hostname, port: Number(port || 6379) });
      socket.once('error', reject);
      socket.once('connect', () => resolve(new RawRedis(socket)));
    });
  }

  call(command: string): Promise<Reply> {
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      this.socket.write(`${command}\r\n`);
    });
  }

  async monitor(onLine: (line: string) => void): Promise<void> {
    await this.call('MONITOR');
    this.onPush = onLine;
  }

  close(): void {
    this.socket.destroy();
  }

  private drain(): void {
    for (;;) {
      const eol = this.buf.indexOf('\r\n');
      if (eol < 0) return;
      const line = this.buf.slice(0, eol);
      let reply: Reply = line[0] === ':' ? Number(line.slice(1)) : line.slice(1);
      let next = eol + 2;
      if (line[0] === '$') {
        const len = Number(line.slice(1));
        if (len >= 0 && this.buf.length < next + len + 2) return;
        reply = len < 0 ? null : this.buf.slice(next, next + len);
        next = len < 0 ? next : next + len + 2;
      }
      this.buf = this.buf.slice(next);
      const waiter = this.waiting.shift();
      if (waiter) waiter(reply);
      else this.onPush?.(String(reply));
    }
  }
}

let redis: RawRedis;
beforeAll(async () => {
  redis = await RawRedis.connect(url);
});
afterAll(() => redis.close());

/** The memory limiter's counters (per prefix and window, the current window only). */
const memoryCounts = (l: MemoryRateLimiter) =>
  (l as unknown as { counts: Map<string, { window: number; n: number }> }).counts;

/** Redis's counters for the same slots as the memory limiter holds. */
async function redisCountsLike(l: MemoryRateLimiter): Promise<Map<string, { window: number; n: number }>> {
  const out = new Map<string, { window: number; n: number }>();
  for (const [slot, { window }] of memoryCounts(l))
    out.set(slot, { window, n: Number(await redis.call(`GET sp:rl:${slot}:${window}`)) });
  return out;
}

/** How many of sequential verdicts each window admitted (they are in arrival order: first come, first served). */
const admittedOf = (vs: Verdict[]) => [
  vs.filter((v) => v.ok || v.window !== 'second').length,
  vs.filter((v) => v.ok || v.window === 'day').length,
  vs.filter((v) => v.ok).length,
];

const limits = fc.record({
  perSecond: fc.integer({ min: 0, max: 6 }),
  perMinute: fc.integer({ min: 0, max: 15 }),
  perDay: fc.integer({ min: 0, max: 40 }),
});
const step = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 999 }), fc.constantFrom(1_000, 60_000, 86_400_000));

describe('RedisRateLimiter on the real Redis', () => {
  const limiters: RedisRateLimiter[] = [];
  const limiter = () => {
    const l = new RedisRateLimiter(url);
    limiters.push(l);
    return l;
  };
  afterAll(async () => {
    for (const l of limiters) await l.close();
  });

  it('hitMany answers and counts exactly as n sequential hits (property)', async () => {
    const l = limiter();
    const op = fc.record({ k: fc.nat(1), n: fc.nat(20), dt: step });
    await fc.assert(
      fc.asyncProperty(
        fc.array(limits, { minLength: 2, maxLength: 2 }),
        fc.array(op, { maxLength: 30 }),
        async (ls, ops) => {
          const run = randomUUID();
          const keys: Key[] = ls.map((x, i) => ({ prefix: `${run}-${i}`, ...x }));
          const one = new MemoryRateLimiter();
          let now = DAY;
          for (const { k, n, dt } of ops) {
            now += dt;
            const want: Verdict[] = [];
            for (let i = 0; i < n; i++) want.push(await one.hit(keys[k]!, now));
            expect(await l.hitMany(keys[k]!, n, now)).toEqual(admittedOf(want));
            expect(await redisCountsLike(one)).toEqual(memoryCounts(one));
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('a turn of hits, counted in one call, answers as the same hits one at a time (property)', async () => {
    const l = limiter();
    const hit = fc.record({ k: fc.nat(2), dt: step });
    const turns = fc.array(fc.array(hit, { minLength: 1, maxLength: 25 }), { maxLength: 8 });
    await fc.assert(
      fc.asyncProperty(fc.array(limits, { minLength: 3, maxLength: 3 }), turns, async (ls, ts) => {
        const run = randomUUID();
        const keys: Key[] = ls.map((x, i) => ({ prefix: `${run}-${i}`, ...x }));
        const one = new MemoryRateLimiter();
        let now = DAY;
        for (const turn of ts) {
          const hits = turn.map(({ k, dt }) => ({ key: keys[k]!, now: (now += dt) }));
          const got = await Promise.all(hits.map((h) => l.hit(h.key, h.now)));
          const want: Verdict[] = [];
          for (const h of hits) want.push(await one.hit(h.key, h.now));
          expect(got).toEqual(want);
          expect(await redisCountsLike(one)).toEqual(memoryCounts(one));
        }
      }),
      { numRuns: 40 },
    );
  });

  it('sends a turn of many hits of several keys as one script call', async () => {
    const l = limiter();
    // Redis knows the script from here on: the call below is one EVALSHA, not EVALSHA then EVAL.
    await l.hitMany({ prefix: `${randomUUID()}-warm`, perSecond: 1, perMinute: 1, perDay: 1 }, 1, DAY);
    const run = randomUUID();
    const monitor = await RawRedis.connect(url);
    const commands: string[][] = [];
    // Each line: +<time> [<db> <client>] "<command>" "<arg>"...
    await monitor.monitor((line) => {
      if (line.includes(run)) commands.push([...line.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!));
    });
    try {
      const keys = [0, 1, 2].map((i): Key => ({ prefix: `${run}-${i}`, perSecond: 10, perMinute: 100, perDay: 1_000 }));
      const got = await Promise.all(Array.from({ length: 90 }, (_, i) => l.hit(keys[i % 3]!, DAY)));
      expect(got.filter((v) => v.ok)).toHaveLength(30);
      await new Promise((resolve) => setTimeout(resolve, 100)); // MONITOR's lines have come
      const names = commands.map((c) => c[0]!.toLowerCase());
      expect(names.filter((n) => n.startsWith('eval'))).toEqual(['evalsha']);
      // numkeys 9: each key's three windows; in the script, per window one INCRBY (and one PEXPIRE: new counters).
      expect(commands[0]![2]).toBe('9');
      expect(names.filter((n) => n === 'incrby')).toHaveLength(9);
    } finally {
      monitor.close();
    }
  });

  it("four limiters (as four processes) hammering the same keys admit exactly each window's limit", async () => {
    const ls = [limiter(), limiter(), limiter(), limiter()];
    const run = randomUUID();
    const plan = [
      {
        key: { prefix: `${run}-s`, perSecond: 37, perMinute: 1e6, perDay: 1e9 },
        start: DAY + 500,
        stepMs: 0,
        window: 'second',
      },
      {
        key: { prefix: `${run}-m`, perSecond: 1e6, perMinute: 53, perDay: 1e9 },
        start: DAY,
        stepMs: 1_000,
        window: 'minute',
      },
      {
        key: { prefix: `${run}-d`, perSecond: 1e6, perMinute: 1e6, perDay: 71 },
        start: DAY,
        stepMs: 60_000,
        window: 'day',
      },
    ];
    const verdicts = new Map<string, Promise<Verdict>[]>(plan.map((p) => [p.key.prefix, []]));
    await Promise.all(
      ls.map(async (l) => {
        for (let t = 0; t < 20; t++) {
          for (const p of plan)
            for (let i = 0; i < 10; i++) verdicts.get(p.key.prefix)!.push(l.hit(p.key, p.start + t * p.stepMs));
          await new Promise((resolve) => setImmediate(resolve));
        }
      }),
    );
    for (const p of plan) {
      const vs = await Promise.all(verdicts.get(p.key.prefix)!);
      const limit = { second: 37, minute: 53, day: 71 }[p.window]!;
      expect(vs.filter((v) => v.ok)).toHaveLength(limit);
      expect(vs.filter((v) => !v.ok && v.window === p.window)).toHaveLength(800 - limit);
    }
    // Each window's counter expires by itself: a little after its window.
    const ttl = await redis.call(`PTTL sp:rl:${run}-s:second:${Math.floor((DAY + 500) / 1_000)}`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(2_000);
  });
});

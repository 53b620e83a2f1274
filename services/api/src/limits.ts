/**
 * Request limits per key: per second (10, spec section 8), per minute and per day, as fixed
 * windows. The per-second window is checked first, and a request refused there does not count
 * against the minute or the day. One API process can count in memory; several must share the
 * counts: through Redis (one Lua script per event-loop turn for all its hits: atomic, one round
 * trip), or, on one machine, through the node:cluster primary (limits-shared.ts).
 *
 * Hits of one key that arrive together are counted as one batch (`hitMany`, limits-batch.ts) with
 * exactly the outcome of the same hits one at a time: the property tests in limits-batch.test.ts
 * hold it to that against `MemoryRateLimiter.hit`.
 */
import { Redis } from 'ioredis';
import { Gauge, type Registry } from 'prom-client';
import type { ApiKey } from './keys.js';
import { HitCoalescer, type Batch } from './limits-batch.js';
import { limitOf, retryAfter, room, WINDOWS, type Admitted, type LimitedKey, type Verdict } from './limits-windows.js';

export { verdictOf, type Admitted, type LimitedKey, type Verdict } from './limits-windows.js';

export interface RateLimiter {
  hit(key: ApiKey, now?: number): Promise<Verdict>;
  close(): Promise<void>;
}

export class MemoryRateLimiter implements RateLimiter {
  private readonly counts = new Map<string, { window: number; n: number }>();

  async hit(key: LimitedKey, now = Date.now()): Promise<Verdict> {
    for (const [w, ms] of WINDOWS) {
      const slot = `${key.prefix}:${w}`;
      const window = Math.floor(now / ms);
      const c = this.counts.get(slot);
      const n = c && c.window === window ? c.n + 1 : 1;
      this.counts.set(slot, { window, n });
      if (n > limitOf(key, w)) return { ok: false, window: w, retryAfterS: retryAfter(now, ms) };
    }
    return { ok: true };
  }

  /**
   * Counts `n` hits of `key` at `now` at once, synchronously (so atomically): the counters end as
   * n calls of `hit` would leave them, and `verdictOf` gives each hit the verdict `hit` would have.
   */
  hitMany(key: LimitedKey, n: number, now = Date.now()): Admitted {
    const admitted: number[] = [];
    let reaching = n;
    for (const [w, ms] of WINDOWS) {
      // No hit reaches this window: one at a time, none would have touched its counter either.
      if (reaching > 0) {
        const slot = `${key.prefix}:${w}`;
        const window = Math.floor(now / ms);
        const c = this.counts.get(slot);
        const before = c && c.window === window ? c.n : 0;
        this.counts.set(slot, { window, n: before + reaching });
        reaching = room(limitOf(key, w), before, reaching);
      }
      admitted.push(reaching);
    }
    return admitted as unknown as Admitted;
  }

  async close(): Promise<void> {}
}

/**
 * One turn's batches at once. KEYS: three per batch (its second, minute and day counters); ARGV:
 * the three windows' expiries (ms), then per batch its n and its three limits. Each window INCRBYs
 * what reaches it, and passes on what fits under its limit, as INCR one hit at a time would. The
 * answer is 0 when every hit of every batch is admitted (the usual case: the shortest reply), else
 * per batch its three counts.
 */
const SCRIPT = `
local out, all = {}, true
for b = 0, #KEYS / 3 - 1 do
  local n = tonumber(ARGV[4 + 4 * b])
  local full, got = n, {}
  for i = 1, 3 do
    if n > 0 then
      local key = KEYS[3 * b + i]
      local after = redis.call('INCRBY', key, n)
      if after == n then redis.call('PEXPIRE', key, ARGV[i]) end
      local room = tonumber(ARGV[4 + 4 * b + i]) - (after - n)
      if room < n then n = math.max(room, 0) end
    end
    got[i] = n
  end
  if n < full then all = false end
  out[b + 1] = got
end
if all then return 0 end
return out`;

/** The script's arguments for `batches` (keys first, ioredis's numkeys before them). */
function scriptArgs(batches: readonly Pick<Batch, 'key' | 'n' | 'now'>[]): (string | number)[] {
  const keys: string[] = [];
  const args: number[] = WINDOWS.map(([, ms]) => ms + 1_000);
  for (const { key, n, now } of batches) {
    for (const [w, ms] of WINDOWS) keys.push(`sp:rl:${key.prefix}:${w}:${Math.floor(now / ms)}`);
    args.push(n, ...WINDOWS.map(([w]) => limitOf(key, w)));
  }
  return [keys.length, ...keys, ...args];
}

/** The script's answer as one `Admitted` per batch. */
const admittedOf = (reply: 0 | number[][], batches: readonly Pick<Batch, 'n'>[]): Admitted[] =>
  batches.map(({ n }, b) => (reply === 0 ? [n, n, n] : (reply[b] as unknown as Admitted)));

/**
 * Counts in Redis, exact over any number of processes and machines sharing it: the hits of one
 * event-loop turn go as one script call (limits-batch.ts says why per turn). Without Redis there
 * is no fallback: the client queues commands while it reconnects and fails them after two retries,
 * so every keyed request fails (500) until Redis is back; a failed call fails every hit of its
 * turn. `api_limiter_redis_up` (in `registry`, the API's) says so at each scrape: 1 while the
 * client is connected and its last command did not fail for want of Redis.
 */
export class RedisRateLimiter implements RateLimiter {
  private readonly redis: Redis;
  /** The last command failed without an answer from Redis (closed, refused, retries spent). */
  private lastFailed = false;
  private readonly batches = new HitCoalescer((batches) => void this.countTurn(batches));

  constructor(url: string, registry?: Registry) {
    this.redis = new Redis(url, { maxRetriesPerRequest: 2, enableOfflineQueue: true, lazyConnect: false });
    this.redis.defineCommand('spLimitMany', { lua: SCRIPT });
    // Reconnected: the failure is over even if no request has come since to prove it.
    this.redis.on('ready', () => (this.lastFailed = false));
    // Without a listener ioredis prints every failed reconnect to stderr, past the logger; the
    // outage shows in api_limiter_redis_up, and each request it fails logs its error.
    this.redis.on('error', () => {});
    const up = () => this.redisUp();
    new Gauge({
      name: 'api_limiter_redis_up',
      help: "Whether the rate limiter's Redis is reachable (1): the client is connected and its last command did not fail for want of Redis; while 0 every keyed request fails",
      registers: registry ? [registry] : [],
      // Over a cluster's workers (cluster.ts), each with its own client: any one without Redis is 0.
      aggregator: 'min',
      collect() {
        this.set(up() ? 1 : 0);
      },
    });
  }

  /** The client is connected (`ready`) and its last command did not fail for want of Redis. */
  private redisUp(): boolean {
    return this.redis.status === 'ready' && !this.lastFailed;
  }

  hit(key: LimitedKey, now = Date.now()): Promise<Verdict> {
    return this.batches.hit(key, now);
  }

  /** Counts `n` hits of `key` at `now` at once, atomically in Redis (see `Admitted`). */
  async hitMany(key: LimitedKey, n: number, now = Date.now()): Promise<Admitted> {
    return (await this.count([{ key, n, now }]))[0]!;
  }

  private async countTurn(batches: readonly Batch[]): Promise<void> {
    try {
      const admitted = await this.count(batches);
      batches.forEach((b, i) => b.settle(admitted[i]!));
    } catch (err) {
      for (const b of batches) b.fail(err);
    }
  }

  private async count(batches: readonly Pick<Batch, 'key' | 'n' | 'now'>[]): Promise<Admitted[]> {
    let reply: 0 | number[][];
    try {
      reply = await (
        this.redis as unknown as { spLimitMany(...a: (string | number)[]): Promise<0 | number[][]> }
      ).spLimitMany(...scriptArgs(batches));
      this.lastFailed = false;
    } catch (err) {
      // A ReplyError is Redis answering (a script error): it is reachable. Anything else (the
      // connection closed, retries spent) means it is not.
      this.lastFailed = !(err instanceof Error && err.name === 'ReplyError');
      throw err;
    }
    return admittedOf(reply, batches);
  }

  async close(): Promise<void> {
    await this.redis.quit();
  }
}

/**
 * Failed authentications per client address, in fixed one-minute windows: a client without a
 * valid key gets `perMinute` 401s, then 429s until the window ends, each costing a map lookup.
 * Failures are counted as they happen; a valid key from the same address is never refused here.
 * Per process, on purpose: it protects each process's CPU, and a shared counter would make every
 * refused request a Redis round trip. At most `maxAddresses` are tracked; a flood of addresses
 * beyond that starts the table over (the window's counts are then lost, never the limiter).
 */
export class FailedAuthLimiter {
  private readonly counts = new Map<string, { window: number; n: number }>();

  constructor(
    readonly perMinute = 60,
    private readonly maxAddresses = 100_000,
  ) {}

  /** Seconds until `address`'s failures are forgiven (0: it is within its limit). */
  blockedFor(address: string, now = Date.now()): number {
    const c = this.counts.get(address);
    if (!c || c.window !== Math.floor(now / 60_000) || c.n <= this.perMinute) return 0;
    return retryAfter(now, 60_000);
  }

  /** Counts one failed authentication of `address`. */
  record(address: string, now = Date.now()): void {
    const window = Math.floor(now / 60_000);
    const c = this.counts.get(address);
    if (c && c.window === window) c.n++;
    else {
      if (this.counts.size >= this.maxAddresses) this.counts.clear();
      this.counts.set(address, { window, n: 1 });
    }
  }
}

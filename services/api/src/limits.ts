/**
 * Request limits per key: per second (10, spec section 8), per minute and per day, as fixed
 * windows. The per-second window is checked first, and a request refused there does not count
 * against the minute or the day. One API process can count in memory; several must share the
 * counts, through Redis (one Lua script per request: atomic, one round trip).
 */
import { Redis } from 'ioredis';
import { Gauge, type Registry } from 'prom-client';
import type { ApiKey } from './keys.js';

export type Verdict = { ok: true } | { ok: false; window: 'second' | 'minute' | 'day'; retryAfterS: number };

export interface RateLimiter {
  hit(key: ApiKey, now?: number): Promise<Verdict>;
  close(): Promise<void>;
}

const WINDOWS = [
  ['second', 1_000],
  ['minute', 60_000],
  ['day', 86_400_000],
] as const;

const limitOf = (key: ApiKey, w: (typeof WINDOWS)[number][0]) =>
  w === 'second' ? key.perSecond : w === 'minute' ? key.perMinute : key.perDay;

/** Whole seconds until the window ends (at least 1: the spec's "retry after 1 second"). */
const retryAfter = (now: number, ms: number) => Math.max(1, Math.ceil((ms - (now % ms)) / 1000));

export class MemoryRateLimiter implements RateLimiter {
  private readonly counts = new Map<string, { window: number; n: number }>();

  async hit(key: ApiKey, now = Date.now()): Promise<Verdict> {
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

  async close(): Promise<void> {}
}

const SCRIPT = `
for i = 1, 3 do
  local n = redis.call('INCR', KEYS[i])
  if n == 1 then redis.call('PEXPIRE', KEYS[i], ARGV[3 + i]) end
  if n > tonumber(ARGV[i]) then return i end
end
return 0`;

/**
 * Counts in Redis. Without Redis there is no fallback: the client queues commands while it
 * reconnects and fails them after two retries, so every keyed request fails (500) until Redis is
 * back. `api_limiter_redis_up` (in `registry`, the API's) says so at each scrape: 1 while the
 * client is connected and its last command did not fail for want of Redis.
 */
export class RedisRateLimiter implements RateLimiter {
  private readonly redis: Redis;
  /** The last command failed without an answer from Redis (closed, refused, retries spent). */
  private lastFailed = false;

  constructor(url: string, registry?: Registry) {
    this.redis = new Redis(url, { maxRetriesPerRequest: 2, enableOfflineQueue: true, lazyConnect: false });
    this.redis.defineCommand('spLimit', { numberOfKeys: 3, lua: SCRIPT });
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
      collect() {
        this.set(up() ? 1 : 0);
      },
    });
  }

  /** The client is connected (`ready`) and its last command did not fail for want of Redis. */
  private redisUp(): boolean {
    return this.redis.status === 'ready' && !this.lastFailed;
  }

  async hit(key: ApiKey, now = Date.now()): Promise<Verdict> {
    const keys = WINDOWS.map(([w, ms]) => `sp:rl:${key.prefix}:${w}:${Math.floor(now / ms)}`);
    const args = [...WINDOWS.map(([w]) => limitOf(key, w)), ...WINDOWS.map(([, ms]) => ms + 1_000)];
    let over: number;
    try {
      over = await (this.redis as unknown as { spLimit(...a: (string | number)[]): Promise<number> }).spLimit(
        ...keys,
        ...args,
      );
      this.lastFailed = false;
    } catch (err) {
      // A ReplyError is Redis answering (a script error): it is reachable. Anything else (the
      // connection closed, retries spent) means it is not.
      this.lastFailed = !(err instanceof Error && err.name === 'ReplyError');
      throw err;
    }
    if (over === 0) return { ok: true };
    const [w, ms] = WINDOWS[over - 1] as (typeof WINDOWS)[number];
    return { ok: false, window: w, retryAfterS: retryAfter(now, ms) };
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

import { createServer, type AddressInfo, type Socket } from 'node:net';
import { Registry } from 'prom-client';
import { describe, expect, it, vi } from 'vitest';
import type { ApiKey } from './keys.js';
import { MemoryRateLimiter, RedisRateLimiter } from './limits.js';

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

/**
 * Just enough of Redis's protocol for the limiter: INFO answers "loaded" (the client's ready
 * check), the limit script answers 0 (within every limit), anything else OK.
 */
async function fakeRedis(port = 0): Promise<{ port: number; stop(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    let buf = '';
    socket.on('data', (chunk) => {
      buf += chunk.toString('latin1');
      // Each command is an array of bulk strings: *<n>\r\n then n times $<len>\r\n<arg>\r\n.
      for (;;) {
        const lines = buf.split('\r\n');
        const n = Number(lines[0]?.slice(1));
        if (!lines[0]?.startsWith('*') || lines.length < 2 * n + 2) return;
        const name = (lines[2] ?? '').toLowerCase();
        buf = lines.slice(2 * n + 1).join('\r\n');
        const info = '# Server\r\nloading:0\r\n';
        socket.write(
          name === 'info' ? `$${info.length}\r\n${info}\r\n` : name.startsWith('eval') ? ':0\r\n' : '+OK\r\n',
        );
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    stop: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

const redisUp = async (registry: Registry) =>
  (await registry.getSingleMetric('api_limiter_redis_up')?.get())?.values[0]?.value;

describe('RedisRateLimiter: api_limiter_redis_up', () => {
  it('is 1 while connected, 0 once Redis goes away and a request fails, 1 again after it reconnects', async () => {
    const redis = await fakeRedis();
    const registry = new Registry();
    const l = new RedisRateLimiter(`redis://127.0.0.1:${redis.port}`, registry);
    try {
      expect(await l.hit(key())).toEqual({ ok: true });
      expect(await redisUp(registry)).toBe(1);

      await redis.stop();
      await expect(l.hit(key())).rejects.toThrow();
      expect(await redisUp(registry)).toBe(0);

      // Back on the same port: the client reconnects by itself, and the gauge follows without a request.
      const again = await fakeRedis(redis.port);
      try {
        await vi.waitFor(async () => expect(await redisUp(registry)).toBe(1), { timeout: 5_000, interval: 50 });
        expect(await l.hit(key())).toEqual({ ok: true });
      } finally {
        await l.close();
        await again.stop();
      }
    } finally {
      await redis.stop().catch(() => {});
    }
  });

  it('is 0 while Redis has never answered', async () => {
    const redis = await fakeRedis();
    await redis.stop(); // a free port nobody listens on
    const registry = new Registry();
    const l = new RedisRateLimiter(`redis://127.0.0.1:${redis.port}`, registry);
    try {
      expect(await redisUp(registry)).toBe(0);
      await expect(l.hit(key())).rejects.toThrow();
      expect(await redisUp(registry)).toBe(0);
    } finally {
      l.close().catch(() => {});
    }
  });

  it('without a registry, registers nothing (tests and tools build limiters freely)', () => {
    const registry = new Registry();
    const l = new RedisRateLimiter('redis://127.0.0.1:1');
    expect(registry.getSingleMetric('api_limiter_redis_up')).toBeUndefined();
    void l.close().catch(() => {});
  });
});

import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { parseRetryAfter, UpstreamClient } from './client.js';

const NOW = Date.UTC(2015, 9, 21, 7, 27, 30);

describe('parseRetryAfter', () => {
  it.each([
    ['3', 3_000],
    ['0', 0],
    ['120', 120_000],
    [' 3 ', 3_000],
  ])('reads delay-seconds %j as %d ms', (value, ms) => {
    expect(parseRetryAfter(value, NOW)).toBe(ms);
  });

  it.each([
    ['1.5', 1_500],
    ['0.25', 250],
    ['0.0004', 0],
    ['2.0005', 2_001],
  ])('reads fractional seconds %j as whole milliseconds %d', (value, ms) => {
    expect(parseRetryAfter(value, NOW)).toBe(ms);
  });

  it('reads an HTTP date as the time from the given now', () => {
    expect(parseRetryAfter('Wed, 21 Oct 2015 07:28:00 GMT', NOW)).toBe(30_000);
  });

  it('an HTTP date already past means "now": 0, never negative', () => {
    expect(parseRetryAfter('Wed, 21 Oct 2015 07:20:00 GMT', NOW)).toBe(0);
  });

  it('uses the first value of a repeated header', () => {
    expect(parseRetryAfter(['2', '60'], NOW)).toBe(2_000);
    expect(parseRetryAfter(['Wed, 21 Oct 2015 07:28:00 GMT'], NOW)).toBe(30_000);
    expect(parseRetryAfter([], NOW)).toBeUndefined();
  });

  it.each([undefined, '', '   '])('an absent or blank header %j is undefined', (value) => {
    expect(parseRetryAfter(value, NOW)).toBeUndefined();
  });

  it.each(['soon', '5s', '1e3', 'NaN', 'two minutes'])('garbage %j is undefined', (value) => {
    expect(parseRetryAfter(value, NOW)).toBeUndefined();
  });

  // Neither delay-seconds (RFC 9110: 1*DIGIT) nor an HTTP date, yet V8's lenient Date.parse reads them as
  // dates in 2001 (or 2099 for 'x 2099'): a bogus header must not turn into "retry at once" or "in 80 years".
  it.each(['-1', '1,5', 'Retry 1', 'x 2099'])(
    'a non-date the JS date parser happens to accept %j is undefined',
    (value) => {
      expect(parseRetryAfter(value, NOW)).toBeUndefined();
    },
  );
});

// Root cause guarded: the skew is re-learnt from every response's whole-second Date header, so
// `Date.now() + skew` stepped back by up to a second between responses. A cycle's rows then looked
// older than the cycle's own start, and its COMPLETE marker removed the very rows it had just seen.
describe('UpstreamClient.upstreamNow', () => {
  it('never goes back when a later Date header (whole seconds) re-bases the skew', async () => {
    const upstreamTime = 'Tue, 01 Jan 2030 00:00:00 GMT';
    const server = createServer((_req, res) => {
      res.writeHead(200, { date: upstreamTime, 'content-type': 'application/json' });
      res.end('{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    const client = new UpstreamClient({ baseUrl: `http://127.0.0.1:${port}`, market: 'cn-a' });
    try {
      await client.syncClock();
      const first = client.upstreamNow();
      expect(first).toBeGreaterThanOrEqual(Date.parse(upstreamTime));
      await new Promise((r) => setTimeout(r, 50));
      const beforeResync = client.upstreamNow();
      await client.syncClock(); // the same whole second again: the raw sum steps back by ~50 ms
      const after = client.upstreamNow();
      expect(after).toBeGreaterThanOrEqual(beforeResync);
      expect(beforeResync).toBeGreaterThanOrEqual(first + 40);
    } finally {
      await client.close();
      server.close();
    }
  });
});

describe('UpstreamClient: request headers and compressed bodies', () => {
  const body = JSON.stringify({ items: [{ market_hash_name: 'AK-47 | Redline (Field-Tested)', min_price: 12.34 }] });

  /** A server that answers `encode(body)` with the given content-encoding and records request headers. */
  async function serve(encoding: string | undefined, bytes: Buffer) {
    const seen: Record<string, string | string[] | undefined>[] = [];
    const server = createServer((req, res) => {
      seen.push(req.headers);
      res.writeHead(200, {
        'content-type': 'application/json',
        'x-ratelimit-remaining': '7',
        ...(encoding ? { 'content-encoding': encoding } : {}),
      });
      res.end(bytes);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    return { seen, url: `http://127.0.0.1:${port}`, close: () => server.close() };
  }

  it.each([
    ['br', brotliCompressSync(body)],
    ['gzip', gzipSync(body)],
    ['deflate', deflateSync(body)],
    [undefined, Buffer.from(body)],
  ])('decodes a %s body and sends the configured headers', async (encoding, bytes) => {
    const up = await serve(encoding, bytes);
    const client = new UpstreamClient({
      baseUrl: up.url,
      market: 'eu-a',
      headers: { 'accept-encoding': 'br', authorization: 'secret-key' },
    });
    const headers: unknown[] = [];
    client.onHeaders((h) => headers.push(h['x-ratelimit-remaining']));
    try {
      expect(await client.getJson('/v1/items')).toEqual(JSON.parse(body));
      expect(up.seen[0]).toMatchObject({
        'accept-encoding': 'br',
        authorization: 'secret-key',
        accept: 'application/json',
      });
      expect(headers).toEqual(['7']);
    } finally {
      await client.close();
      up.close();
    }
  });

  it('refuses an unknown content-encoding, and a body that does not decode, as malformed', async () => {
    for (const [encoding, bytes, retryable] of [
      ['zstd', Buffer.from(body), false],
      ['br', Buffer.from('not brotli at all'), true],
    ] as const) {
      const up = await serve(encoding, bytes);
      const client = new UpstreamClient({ baseUrl: up.url, market: 'eu-a' });
      try {
        await expect(client.getJson('/v1/items')).rejects.toMatchObject({ code: 'upstream_malformed', retryable });
      } finally {
        await client.close();
        up.close();
      }
    }
  });

  it('refuses a compressed body that decodes past maxBodyBytes (a decompression bomb), without retry', async () => {
    const bomb = brotliCompressSync(Buffer.alloc(5_000_000, 0x20));
    expect(bomb.length).toBeLessThan(10_000);
    const up = await serve('br', bomb);
    const client = new UpstreamClient({ baseUrl: up.url, market: 'eu-a', maxBodyBytes: 1_000_000 });
    try {
      await expect(client.getJson('/v1/items')).rejects.toMatchObject({ code: 'upstream_malformed', retryable: false });
    } finally {
      await client.close();
      up.close();
    }
  });
});

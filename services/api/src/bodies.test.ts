import { crc32, gunzipSync, inflateRawSync } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { inflateHead, makeBody, tailOf, VersionedCache } from './bodies.js';

/**
 * Decodes exactly one gzip member the way curl and Chromium do: header, one deflate stream, its
 * trailer, and nothing after it. Returns what the member holds, or throws.
 */
function decodeOneMember(bytes: Buffer): string {
  expect(bytes.subarray(0, 3)).toEqual(Buffer.from([0x1f, 0x8b, 8]));
  expect(bytes[3]).toBe(0); // no optional header fields: the deflate data starts at byte 10
  const deflate = bytes.subarray(10, bytes.length - 8);
  const text = inflateRawSync(deflate);
  const crc = bytes.readUInt32LE(bytes.length - 8);
  const isize = bytes.readUInt32LE(bytes.length - 4);
  expect(crc).toBe(crc32(text) >>> 0);
  expect(isize).toBe(text.length % 2 ** 32);
  return text.toString();
}

const streamToString = async (s: NodeJS.ReadableStream) => {
  const parts: Buffer[] = [];
  for await (const p of s) parts.push(p as Buffer);
  return Buffer.concat(parts).toString();
};

describe('bodies: head + per-key tail as one gzip member', () => {
  // Root cause guarded: the tail used to be a second gzip member. RFC 1952 allows that, but curl
  // (exit 23) and Chromium's fetch decode only the first member, so the JSON lost its envelope.
  it('one gzip member: curl and browsers decode the whole body (two members cut the JSON)', async () => {
    const head = `{"data":${JSON.stringify(Array.from({ length: 5_000 }, (_, i) => ({ name: `item ${i}`, price: `${i}.25` })))}`;
    const body = await makeBody(head);
    const tail = tailOf(body, ',"requestor":"acme","plan":"pro","timestamp":"2026-01-01T00:00:00.000Z"}');
    const whole = Buffer.concat([body.headGzip, tail.gzip]);
    const text = decodeOneMember(whole);
    expect(JSON.parse(text).plan).toBe('pro');
    expect(gunzipSync(whole).toString()).toBe(text);
  });

  it('any head and tail decode to their concatenation, gzip and plain', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.string({ unit: 'binary', maxLength: 3_000 }),
        fc.string({ unit: 'binary', maxLength: 300 }),
        async (h, t) => {
          const body = await makeBody(h);
          const tail = tailOf(body, t);
          expect(decodeOneMember(Buffer.concat([body.headGzip, tail.gzip]))).toBe(h + t);
          expect((await streamToString(inflateHead(body))) + tail.plain.toString()).toBe(h + t);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('tails are memoised per body and differ per key', async () => {
    const body = await makeBody('{"a":1');
    expect(tailOf(body, ',"plan":"pro"}')).toBe(tailOf(body, ',"plan":"pro"}'));
    expect(tailOf(body, ',"plan":"pro"}').etag).not.toBe(tailOf(body, ',"plan":"basic"}').etag);
  });
});

describe('VersionedCache', () => {
  it('get serves the old value while a newer one builds; fresh waits for it', async () => {
    let version = 1;
    let data = 'old';
    const cache = new VersionedCache<string>(() => version, 60_000);
    const build = async () => data;
    expect(await cache.get('shard', build)).toBe('old');
    version = 2;
    data = 'new';
    // Within minAgeMs get answers from the cache (stale-while-revalidate)…
    expect(await cache.get('shard', build)).toBe('old');
    // …but a builder of another cached value must not store stale data under the new version.
    expect(await cache.fresh('shard', build)).toBe('new');
    expect(await cache.get('shard', build)).toBe('new');
  });

  it('keeps a value costFactor times as long as its build took before building again', async () => {
    let version = 1;
    let builds = 0;
    const cache = new VersionedCache<number>(() => version, 0, undefined, 4);
    const slowBuild = async () => {
      await new Promise((r) => setTimeout(r, 60));
      return ++builds;
    };
    expect(await cache.get('list', slowBuild)).toBe(1);
    version = 2;
    // Built in ~60 ms: kept ~240 ms although minAgeMs is 0, and ahead() says how long is left.
    expect(await cache.get('list', slowBuild)).toBe(1);
    const wait = cache.ahead('list', slowBuild);
    expect(wait).toBeGreaterThan(100);
    expect(wait).toBeLessThanOrEqual(400);
    await new Promise((r) => setTimeout(r, wait + 5));
    expect(cache.ahead('list', slowBuild)).toBe(0); // started now
    // fresh joins the rebuild ahead() started (single-flight): no third build.
    expect(await cache.fresh('list', slowBuild)).toBe(2);
    expect(builds).toBe(2);
  });

  it('does not count the time a build spent queued (a whole-read slot) as its cost', async () => {
    let version = 1;
    const cache = new VersionedCache<{ queuedMs: number }>(
      () => version,
      0,
      undefined,
      4,
      (v) => v.queuedMs,
    );
    // 80 ms in all, 70 of them queued: its cost is ~10 ms, kept ~40 ms, not ~320.
    const build = async () => {
      await new Promise((r) => setTimeout(r, 80));
      return { queuedMs: 70 };
    };
    await cache.get('list', build);
    version = 2;
    expect(cache.ahead('list', build)).toBeLessThanOrEqual(100);
  });

  it('an outer value built from fresh inner values carries the data of its version', async () => {
    let version = 1;
    let rows = 0;
    const inner = new VersionedCache<number>(() => version, 60_000);
    const outer = new VersionedCache<string>(() => version, 0);
    const buildOuter = async () => `rows=${await inner.fresh('shard', async () => rows)}`;
    expect(await outer.get('body', buildOuter)).toBe('rows=0');
    version = 2;
    rows = 5;
    await outer.get('body', buildOuter); // the first request after a change may see the old body
    await new Promise((r) => setImmediate(r)); // its rebuild settles
    expect(await outer.get('body', buildOuter)).toBe('rows=5');
    // With the inner value served stale, the outer one would keep the old rows under version 2.
    const stale = new VersionedCache<string>(() => version, 0);
    const innerStale = new VersionedCache<number>(() => version, 60_000);
    const buildStale = async () => `rows=${await innerStale.get('shard', async () => rows)}`;
    version = 3;
    expect(await stale.get('body', buildStale)).toBe('rows=5');
    version = 4;
    rows = 9;
    await stale.get('body', buildStale);
    await new Promise((r) => setImmediate(r));
    expect(await stale.get('body', buildStale)).toBe('rows=5');
  });

  it('derived values lag by at most maxLagMs; data changes rebuild as before', async () => {
    let version = 1;
    let derived = 1;
    let data = 'a';
    let now = 1_000_000;
    const realNow = Date.now;
    Date.now = () => now;
    try {
      const cache = new VersionedCache<string>(() => version, 0, { version: () => derived, maxLagMs: 15_000 });
      const build = async () => data;
      const settle = () => new Promise((r) => setImmediate(r));
      expect(await cache.get('list', build)).toBe('a');
      derived = 2;
      data = 'b';
      now += 14_000;
      expect(await cache.get('list', build)).toBe('a'); // only derived moved, within the lag
      await settle();
      expect(await cache.get('list', build)).toBe('a'); // and nothing was rebuilt
      now += 2_000;
      await cache.get('list', build); // past the lag: this request triggers the rebuild
      await settle();
      expect(await cache.get('list', build)).toBe('b');
      data = 'c';
      version = 2; // a data change is not held back by the derived lag
      await cache.get('list', build);
      await settle();
      expect(await cache.get('list', build)).toBe('c');
    } finally {
      Date.now = realNow;
    }
  });
});

/**
 * The API's edge as a hostile client meets it, over real sockets, against real PostgreSQL (keys in
 * their own schema, an empty read model migrated by the materializer's migrations): NUL bytes,
 * deep nesting, malformed requests, huge headers, wrong methods, key floods. Every answer is in
 * the one error shape, none is a 5xx, and keyed answers vary on the key.
 */
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  API_MIGRATIONS_DIR,
  buildApp,
  FailedAuthLimiter,
  KeyStore,
  MemoryRateLimiter,
  ReadModel,
} from '@skinprices/api';
import { MIGRATIONS_DIR } from '@skinprices/materializer';
import { createLogger } from '@skinprices/runtime';
import { migrate, PgNotifications, type Pool } from '@skinprices/store';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { curlGet } from '../support/clients.js';
import { TestStack } from '../support/stack.js';

const SHAPE = (status: number) => ({
  error: { status, code: expect.any(String) as unknown, message: expect.any(String) as unknown },
});

/** Sends raw bytes and returns the status line's code and the body (the server closes or answers once). */
async function raw(port: number, bytes: string): Promise<{ status: number; body: string }> {
  const sock = connect(port, '127.0.0.1');
  sock.write(bytes);
  let text = '';
  for await (const chunk of sock) {
    text += (chunk as Buffer).toString();
    const head = text.indexOf('\r\n\r\n');
    const len = /content-length: (\d+)/i.exec(text)?.[1];
    if (head >= 0 && len && text.length >= head + 4 + Number(len)) break;
  }
  sock.destroy();
  return { status: Number(text.slice(9, 12)), body: text.slice(text.indexOf('\r\n\r\n') + 4) };
}

describe('API edge: hostile input', () => {
  const stack = new TestStack();
  let app: FastifyInstance;
  let base: string;
  let port: number;
  let keysPool: Pool;
  let keys: KeyStore;
  let key: string;
  let keysSchema: string;
  const logger = createLogger('api', 'silent');

  beforeAll(async () => {
    const read = await stack.schema();
    await migrate(read.pool, MIGRATIONS_DIR);
    const k = await stack.schema();
    keysPool = k.pool;
    keysSchema = k.name;
    await migrate(keysPool, API_MIGRATIONS_DIR);
    keys = new KeyStore(keysPool);
    key = (await keys.create({ customer: 'edge@example.com', plan: 'enterprise', perSecond: 100_000 })).secret;
    app = buildApp({
      keys,
      limiter: new MemoryRateLimiter(),
      read: new ReadModel(read.pool),
      version: () => 0,
      logger,
      failedAuth: new FailedAuthLimiter(20),
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    port = (app.server.address() as { port: number }).port;
    base = `http://127.0.0.1:${port}`;
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await stack.cleanup();
  });

  const get = (path: string, headers: Record<string, string> = { 'x-api-key': key }) =>
    fetch(`${base}${path}`, { headers });

  // Root cause guarded: a %00 reached PostgreSQL (text cannot hold U+0000) and answered 500.
  it('a NUL byte in any parameter is a 400 naming it, on every endpoint that takes text', async () => {
    const paths = [
      '/v1/prices/search?market_hash_name=a%00b',
      '/v1/prices/cn-a/history?market_hash_name=a%00b',
      '/v1/prices/cn-a/history?market_hash_name=a&phase=x%00',
      '/v1/prices/cn-a/float-buyorder?market_hash_name=a%00b',
      '/v1/market-sales/search?market_hash_name=a%00b',
      '/v1/store?market_hash_name=a%00b',
      '/v1/prices/cn%00a',
    ];
    for (const path of paths) {
      const res = await get(path);
      const body = await res.json();
      expect({ path, status: res.status }).toEqual({ path, status: res.status === 404 ? 404 : 400 });
      expect(body).toEqual(SHAPE(res.status));
    }
    const post = await fetch(`${base}/v1/prices/latest`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ items: ['a\u0000b'] }),
    });
    expect(post.status).toBe(400);
    expect(await post.json()).toMatchObject({
      error: { code: 'bad_parameter', message: expect.stringMatching(/^items/) },
    });
  });

  // Root cause guarded: markets nested 20,000 arrays deep overflowed the stack (500).
  it('deeply nested JSON is a 400, not a stack overflow', async () => {
    const deep = `${'['.repeat(20_000)}${']'.repeat(20_000)}`;
    for (const body of [`{"items":["a"],"markets":${deep}}`, deep, '{"items":["a"],"markets":[["cn-a"]]}']) {
      const res = await fetch(`${base}/v1/prices/latest`, {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        body,
      });
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual(SHAPE(400));
    }
  });

  // Root cause guarded: Node and Fastify answered these before our handler, in their own shapes
  // or with empty bodies (13.6 % of error answers in the probe).
  it('framework and parser errors come in our error shape', async () => {
    const cases: [string, number, string][] = [
      ['bad percent-encoding', 400, `GET /v1/prices/%zz HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\n\r\n`],
      ['long path segment', 414, `GET /v1/prices/${'a'.repeat(300)} HTTP/1.1\r\nHost: x\r\n\r\n`],
      ['headers over 16 KiB', 431, `GET /v1/prices/cn-a HTTP/1.1\r\nHost: x\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`],
      ['garbage request line', 400, 'GARBAGE\r\n\r\n'],
      ['bad content-length', 400, 'POST /v1/prices/latest HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n'],
      [
        'unmeetable Expect',
        417,
        `GET /v1/prices/cn-a HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nx-api-key: ${key}\r\n\r\n`,
      ],
      [
        'empty JSON body',
        400,
        `POST /v1/prices/latest HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n`,
      ],
      [
        'text/plain body',
        415,
        `POST /v1/prices/latest HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\n{}`,
      ],
    ];
    // Found by make chaos: Node's own empty 400 for a missing Host, and CONNECT closed unanswered.
    cases.push(
      ['HTTP/1.1 without Host', 400, `GET /v1/prices/cn-a HTTP/1.1\r\nx-api-key: ${key}\r\n\r\n`],
      ['CONNECT', 405, 'CONNECT /v1/status HTTP/1.1\r\nHost: x\r\n\r\n'],
      ['TRACE', 405, 'TRACE /v1/prices/cn-a HTTP/1.1\r\nHost: x\r\n\r\n'],
      ['PROPFIND', 405, 'PROPFIND /v1/store HTTP/1.1\r\nHost: x\r\n\r\n'],
    );
    for (const [what, status, bytes] of cases) {
      const r = await raw(port, bytes);
      expect({ what, status: r.status }).toEqual({ what, status });
      expect({ what, body: JSON.parse(r.body) as unknown }).toEqual({ what, body: SHAPE(status) });
    }
  });

  it('a wrong method is a 405 with Allow; OPTIONS lists the methods', async () => {
    const del = await fetch(`${base}/v1/prices/cn-a`, { method: 'DELETE', headers: { 'x-api-key': key } });
    expect(del.status).toBe(405);
    expect(del.headers.get('allow')).toBe('GET, HEAD');
    expect(await del.json()).toMatchObject({ error: { status: 405, code: 'method_not_allowed' } });
    const put = await fetch(`${base}/v1/prices/latest`, { method: 'PUT' });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('GET, HEAD, POST');
    const options = await fetch(`${base}/v1/prices/latest`, { method: 'OPTIONS' });
    expect(options.status).toBe(204);
    expect(options.headers.get('allow')).toBe('GET, HEAD, POST');
    expect((await fetch(`${base}/nowhere`, { method: 'DELETE' })).status).toBe(404);
  });

  // Root cause guarded: answers said `Cache-Control: public` with no Vary on the key, so a shared
  // cache would hand one customer's answer (requestor, plan) to anyone.
  it('keyed answers vary on the key headers', async () => {
    for (const path of [
      '/v1/prices/cn-a',
      '/v1/prices/latest',
      '/v1/prices/search?market_hash_name=x',
      // Answers serialised from objects, not cached bodies.
      '/v1/prices/cn-a/float-buyorder',
      '/v1/store?market_hash_name=x',
      '/v1/market-sales/search?market_hash_name=x',
      '/v1/indexes/market-cap',
    ]) {
      const res = await get(path, { 'x-api-key': key, 'accept-encoding': 'gzip' });
      expect(res.status).toBe(200);
      expect(res.headers.get('vary')?.split(/,\s*/)).toEqual(
        expect.arrayContaining(['x-api-key', 'authorization', 'accept-encoding']),
      );
    }
  });

  it('curl --compressed reads a cached body whole (one gzip member)', async () => {
    const r = await curlGet(`${base}/v1/prices/cn-a`, key);
    expect(r.exit).toBe(0);
    expect(JSON.parse(r.body)).toMatchObject({ data: [], requestor: 'edge@example.com', plan: 'enterprise' });
  });

  // Root cause guarded: requests without a valid key were not limited (5,445 rps of 401s, each
  // unknown prefix a PostgreSQL query) while paying keys slowed down.
  it('failed authentication is limited per client address; a valid key still passes', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 25; i++)
      statuses.push((await get('/v1/prices/cn-a', { 'x-api-key': `sp_${'0'.repeat(10)}_${'x'.repeat(40)}` })).status);
    expect(statuses.slice(0, 20)).toEqual(Array(20).fill(401));
    expect(statuses.slice(20)).toEqual(Array(5).fill(429));
    const refused = await get('/v1/prices/cn-a', {});
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await refused.json()).toMatchObject({ error: { status: 429, code: 'auth_rate_limited' } });
    expect((await get('/v1/prices/cn-a')).status).toBe(200);
  });

  // Root cause guarded: an unknown prefix cost a PostgreSQL query and a known one a cache hit, so
  // the response time told whether a prefix exists (663 µs vs 341 µs).
  it('unknown prefix and wrong secret do the same work: no query, the same time within noise', async () => {
    const knownPrefix = key.split('_')[1] as string;
    const wrongSecret = `sp_${knownPrefix}_${'y'.repeat(43)}`;
    const unknown = () => `sp_${Math.random().toString(36).slice(2, 12).padEnd(10, '0')}_${'y'.repeat(43)}`;
    await keys.authenticate(wrongSecret);
    let queries = 0;
    const query = keysPool.query.bind(keysPool);
    (keysPool as unknown as { query: unknown }).query = (...args: Parameters<Pool['query']>) => {
      queries++;
      return query(...args);
    };
    const a: number[] = [];
    const b: number[] = [];
    try {
      for (let i = 0; i < 4_000; i++) {
        const [which, k] = i % 2 ? [a, wrongSecret] : [b, unknown()];
        const t0 = process.hrtime.bigint();
        expect(await keys.authenticate(k)).toBe('invalid');
        which.push(Number(process.hrtime.bigint() - t0));
      }
    } finally {
      (keysPool as unknown as { query: unknown }).query = query;
    }
    expect(queries).toBe(0);
    const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1] as number;
    const [ma, mb] = [median(a), median(b)];
    console.log(`authenticate median: wrong secret ${ma} ns, unknown prefix ${mb} ns`);
    expect(Math.abs(ma - mb)).toBeLessThan(Math.max(ma, mb) * 0.5 + 5_000);
  });

  /** A key-change listener for `store`, as the API wires one (main.ts), once it listens. */
  async function listenFor(store: KeyStore): Promise<PgNotifications> {
    const listener = new PgNotifications(
      keysPool,
      [{ channel: 'skinprices_keys', payload: keysSchema, onNotify: () => void store.reload() }],
      logger,
      (on) => store.setListening(on),
    );
    listener.start();
    for (let i = 0; i < 50 && listener.state !== 'listening'; i++) await sleep(100);
    return listener;
  }

  // PgNotifications calls every subscription once LISTEN has taken effect (and after each
  // reconnection): what changed while nobody listened is read then.
  it('a key created before the listener took effect (its NOTIFY missed) is usable once it listens', async () => {
    const other = new KeyStore(keysPool);
    await other.reload();
    // Created now: nobody listens on `other`'s behalf, and its snapshot is fresh (no age reload).
    const created = await keys.create({ customer: 'early@example.com', plan: 'basic' });
    expect(await other.authenticate(created.secret)).toBe('invalid');
    const listener = await listenFor(other);
    try {
      let seen: unknown = 'invalid';
      // Well within the 5 s after which an unlistened snapshot would be reloaded anyway.
      for (let i = 0; i < 20 && typeof seen === 'string'; i++) {
        seen = await other.authenticate(created.secret);
        if (typeof seen === 'string') await sleep(50);
      }
      expect(seen).toMatchObject({ customer: 'early@example.com' });
    } finally {
      await listener.stop();
    }
  });

  it('a key created in another process is usable as soon as its NOTIFY arrives', async () => {
    const other = new KeyStore(keysPool);
    await other.reload();
    const listener = await listenFor(other);
    try {
      const created = await keys.create({ customer: 'late@example.com', plan: 'basic' });
      let seen: unknown = 'invalid';
      for (let i = 0; i < 50 && typeof seen === 'string'; i++) {
        seen = await other.authenticate(created.secret);
        if (typeof seen === 'string') await sleep(50);
      }
      expect(seen).toMatchObject({ customer: 'late@example.com' });
      await keys.update(created.key.prefix, { disabled: true });
      for (let i = 0; i < 50 && seen !== 'disabled'; i++) {
        seen = await other.authenticate(created.secret);
        if (seen !== 'disabled') await sleep(50);
      }
      expect(seen).toBe('disabled');
    } finally {
      await listener.stop();
    }
  });
});

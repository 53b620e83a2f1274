/**
 * The reference (/docs) and the status page (/status) through the whole app, with a fake read
 * model and key store: headers, assets, the key's ways in (header, form cookie, never the URL) and
 * escaping. The browser tests against a real pipeline are test/integration/pages.test.ts.
 */
import { gunzipSync } from 'node:zlib';
import { createLogger } from '@skinprices/runtime';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../app.js';
import type { ApiKey, KeyStore } from '../keys.js';
import { MemoryRateLimiter } from '../limits.js';
import type { ReadModel } from '../readmodel.js';
import { KEY_COOKIE } from './status-page.js';
import { SWAGGER_UI_VERSION } from './reference.js';

const NAME = `★ M9 Bayonet | "Doppler" <b>(Factory New)`;
const apiKey = (over: Partial<ApiKey> = {}): ApiKey => ({
  id: '1',
  prefix: 'p',
  customer: 'ops@example.com',
  plan: 'basic',
  allowedEndpoints: null,
  disabled: false,
  expiresAt: null,
  perSecond: 10_000,
  perMinute: 1_000_000,
  perDay: 10_000_000,
  createdAt: new Date(0),
  note: null,
  ...over,
});
const KEYS: Record<string, ApiKey> = {
  good: apiKey(),
  statusOnly: apiKey({ prefix: 'q', allowedEndpoints: ['GET /v1/status'] }),
};
const now = new Date('2026-11-20T12:00:00.000Z');
const read = {
  dbNow: async () => now,
  clock: async () => now,
  freshness: async () => [
    {
      market: 'cn-a',
      kind: 'LISTINGS',
      last_outcome: 'COMPLETE',
      last_finished_at: now,
      last_complete_at: now,
      consecutive_failed: 0,
      last_applied_at: now,
      last_complete_applied_at: new Date(now.getTime() - 10_000),
    },
    {
      market: 'eu-a',
      kind: 'LISTINGS',
      last_outcome: 'FAILED',
      last_finished_at: now,
      last_complete_at: null,
      consecutive_failed: 3,
      last_applied_at: now,
      last_complete_applied_at: null,
    },
  ],
  materializers: async () => [
    {
      member_id: 'm1',
      group_id: 'g',
      host: 'h',
      pid: 1,
      state: 'consuming',
      started_at: now,
      heartbeat_at: now,
      last_batch_at: now,
      lag: '0',
    },
  ],
  deadLetters: async () => [],
  replication: async () => ({ standby: false, lag_bytes: null, lag_s: null, receiving: null }),
  search: async (name: string) =>
    name === NAME
      ? [
          { market: 'cn-a', price_rmb: '1234.50', phase: '', count: 3, change_24h: '1.25', change_7d: null },
          { market: 'eu-a', price: '150.00', phase: '', count: 1, change_24h: null, change_7d: null },
        ].map((r) => ({ ...r, market_hash_name: name, updated_at: now.toISOString() }))
      : [],
  history: async (market: string, name: string) =>
    name === NAME && market === 'eu-a'
      ? [
          { date: '2026-11-19', price: '140.00', count: 2 },
          { date: '2026-11-20', price: '150.00', count: 1 },
        ]
      : [],
  knowsItem: async (name: string) => name === NAME,
  // The change routes take their log at start; these tests never call them.
  changeLog: () => ({}),
} as unknown as ReadModel;

describe('pages', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = buildApp({
      keys: { authenticate: async (s?: string) => (s ? (KEYS[s] ?? 'invalid') : 'missing') } as unknown as KeyStore,
      limiter: new MemoryRateLimiter(),
      read,
      version: () => 0,
      logger: createLogger('api', 'silent'),
    });
    await app.ready();
  });
  afterAll(() => app.close());

  it('/docs: Swagger UI from our own assets, locked to this origin by CSP, without a key', async () => {
    const res = await app.inject({ url: '/docs' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.headers['content-security-policy']).toMatch(/script-src 'self';.*connect-src 'self'/);
    const srcs = [...res.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(srcs.filter((s) => !s!.startsWith('/'))).toEqual([]);
    expect(srcs).toContain(`/docs/assets/swagger-ui-bundle.js?v=${SWAGGER_UI_VERSION}`);
    expect((await app.inject({ url: '/docs/plain' })).body).toContain('GET /v1/prices/{market}');
  });

  it('/docs/assets: content types, gzip, ETag and 304, immutable only for the versioned URL; nothing else', async () => {
    const url = `/docs/assets/swagger-ui-bundle.js?v=${SWAGGER_UI_VERSION}`;
    const js = await app.inject({ url, headers: { 'accept-encoding': 'gzip' } });
    expect(js.statusCode).toBe(200);
    expect(js.headers).toMatchObject({
      'content-type': 'text/javascript; charset=utf-8',
      'content-encoding': 'gzip',
      'cache-control': 'public, max-age=31536000, immutable',
      'x-content-type-options': 'nosniff',
    });
    expect(gunzipSync(js.rawPayload).toString()).toContain('SwaggerUIBundle');
    const again = await app.inject({ url, headers: { 'if-none-match': String(js.headers.etag) } });
    expect(again.statusCode).toBe(304);
    expect((await app.inject({ url: '/docs/assets/swagger-ui.css' })).headers).toMatchObject({
      'content-type': 'text/css; charset=utf-8',
      'cache-control': 'public, max-age=300',
    });
    expect((await app.inject({ url: '/docs/assets/favicon-32x32.png' })).headers['content-type']).toBe('image/png');
    expect((await app.inject({ url: '/docs/assets/reference.js' })).body).toContain('validatorUrl: null');
    for (const bad of ['index.html', 'package.json', '..%2Fpackage.json', 'swagger-ui-bundle.js.map', 'toString']) {
      const res = await app.inject({ url: `/docs/assets/${bad}` });
      expect(res.statusCode, bad).toBe(404);
      expect(res.json().error.code).toBe('not_found');
    }
  });

  it('/status with a key header: freshness rows, the pipeline, and an item escaped, with its prices and chart', async () => {
    const res = await app.inject({
      url: `/status?item=${encodeURIComponent(NAME)}`,
      headers: { 'x-api-key': 'good' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['content-security-policy']).toMatch(/default-src 'none'/);
    const b = res.body;
    expect(b).toContain('<tr data-market="cn-a" data-kind="LISTINGS" data-stale="false">');
    expect(b).toContain('<tr data-market="eu-a" data-kind="LISTINGS" data-stale="true">');
    expect(b).toContain('<b id="lag">0 records</b>');
    expect(b).not.toContain(NAME);
    expect(b).toContain('★ M9 Bayonet | &quot;Doppler&quot; &lt;b&gt;(Factory New)');
    expect(b).toMatch(/<td class="num price">1234\.50<\/td>/);
    // The chart: the first marketplace with data (cn-a has none, eu-a two days).
    expect(b).toContain('<figure id="history" data-market="eu-a">');
    expect(b).toContain('data-points="2"');
  });

  it('/status: no key is the key form (401), a key in the URL is refused, an unknown item says so', async () => {
    const none = await app.inject({ url: '/status?item=x%22y' });
    expect(none.statusCode).toBe(401);
    expect(none.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(none.body).toContain('<form method="post" action="/status/key" id="key-form">');
    expect(none.body).toContain('name="item" value="x&quot;y"');
    const inUrl = await app.inject({ url: '/status?key=good', headers: { 'x-api-key': 'good' } });
    expect(inUrl.statusCode).toBe(400);
    expect(inUrl.body).toMatch(/key: a key never goes in a URL/);
    const unknown = await app.inject({ url: '/status?item=nothing', headers: { 'x-api-key': 'good' } });
    expect(unknown.body).toContain('No marketplace lists <b>nothing</b> now.');
    expect(unknown.body).not.toContain('<figure');
    const badMarket = await app.inject({ url: '/status?item=x&market=mars', headers: { 'x-api-key': 'good' } });
    expect(badMarket.statusCode).toBe(400);
  });

  it('/status: a key whose ACL lacks search and history sees the status and is told what is not shown', async () => {
    const res = await app.inject({
      url: `/status?item=${encodeURIComponent(NAME)}`,
      headers: { 'x-api-key': 'statusOnly' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('id="freshness"');
    expect(res.body).toContain('may not call GET /v1/prices/search, GET /v1/prices/{market}/history');
    expect(res.body).not.toContain('id="prices"');
  });

  it('the key form sets an HttpOnly SameSite=Strict cookie scoped to /status, which GET /status accepts', async () => {
    const post = await app.inject({
      method: 'POST',
      url: '/status/key',
      headers: { 'content-type': 'application/x-www-form-urlencoded', host: 'api.test', origin: 'http://api.test' },
      payload: `key=good&item=${encodeURIComponent(NAME)}`,
    });
    expect(post.statusCode).toBe(303);
    expect(post.headers.location).toBe(`/status?item=${encodeURIComponent(NAME)}`);
    const set = String(post.headers['set-cookie']);
    expect(set).toBe(`${KEY_COOKIE}=good; Path=/status; HttpOnly; SameSite=Strict; Max-Age=28800`);
    const page = await app.inject({ url: '/status', headers: { cookie: `other=1; ${KEY_COOKIE}=good` } });
    expect(page.statusCode).toBe(200);
    // The cookie is the page's only: the JSON endpoints do not take it.
    const api = await app.inject({ url: '/v1/status', headers: { cookie: `${KEY_COOKIE}=good` } });
    expect(api.statusCode).toBe(401);
    // A bad cookie is a 401 form that clears it.
    const bad = await app.inject({ url: '/status', headers: { cookie: `${KEY_COOKIE}=nope` } });
    expect(bad.statusCode).toBe(401);
    expect(String(bad.headers['set-cookie'])).toMatch(new RegExp(`^${KEY_COOKIE}=; .*Max-Age=0`));
    // Forgetting: an empty key clears it.
    const forget = await app.inject({
      method: 'POST',
      url: '/status/key',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: '',
    });
    expect(forget.statusCode).toBe(303);
    expect(String(forget.headers['set-cookie'])).toMatch(/Max-Age=0/);
  });

  it('the key form is refused from another site; form bodies stay 415 on the JSON endpoints', async () => {
    const cross = await app.inject({
      method: 'POST',
      url: '/status/key',
      headers: { 'content-type': 'application/x-www-form-urlencoded', host: 'api.test', origin: 'https://evil.test' },
      payload: 'key=attacker',
    });
    expect(cross.statusCode).toBe(400);
    expect(cross.headers['set-cookie']).toBeUndefined();
    const fetchMeta = await app.inject({
      method: 'POST',
      url: '/status/key',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'cross-site' },
      payload: 'key=attacker',
    });
    expect(fetchMeta.statusCode).toBe(400);
    const form = await app.inject({
      method: 'POST',
      url: '/v1/prices/latest',
      headers: { 'x-api-key': 'good', 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'items=x',
    });
    expect(form.statusCode).toBe(415);
    expect(form.json().error.code).toBe('unsupported_media_type');
  });
});

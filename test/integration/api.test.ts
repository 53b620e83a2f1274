/**
 * The read API against the real PostgreSQL filled by the pipeline (simulator → pollers → Kafka →
 * materializer): shapes and types, the plan × endpoint matrix, ACL keys, every 401, both auth
 * headers, POST limits, `markets` filters, history, market-cap clamping, gzip, ETag, errors, and
 * the per-second limit under concurrent requests, in memory and shared through Redis.
 */
import { gunzipSync } from 'node:zlib';
import { Decimal } from 'decimal.js';
import {
  API_MIGRATIONS_DIR,
  ApiMetrics,
  buildApp,
  ENDPOINT_IDS,
  FailedAuthLimiter,
  KeyStore,
  MemoryRateLimiter,
  planFor,
  ReadModel,
  RedisRateLimiter,
  WEBHOOK_ENDPOINT_IDS,
  type EndpointId,
  type Plan,
  type RateLimiter,
  type WebhookEndpointId,
} from '@skinprices/api';
import { SalesExportCache } from '@skinprices/exports';
import { createLogger } from '@skinprices/runtime';
import { migrate, type Pool } from '@skinprices/store';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  EVERY_ENDPOINT_POLLS,
  projectTopics,
  startMaterializer,
  startPoller,
  startSimulator,
  untilApplied,
  type Sim,
} from '../support/pipeline.js';
import { itemPageUrlProblems, typeIdProblems } from '../support/contract.js';
import { TestStack } from '../support/stack.js';

const PLAN = EVERY_ENDPOINT_POLLS;
const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const DEC = /^\d+(\.\d+)?$/;

describe('read API', () => {
  const stack = new TestStack();
  let sim: Sim;
  let pool: Pool;
  let keysPool: Pool;
  let app: FastifyInstance;
  let keys: KeyStore;
  const k: Record<'basic' | 'pro' | 'enterprise' | 'acl' | 'disabled' | 'expired', string> = {
    basic: '',
    pro: '',
    enterprise: '',
    acl: '',
    disabled: '',
    expired: '',
  };
  let item: { name: string; phase: string; price: string };
  const logger = createLogger('api', 'silent');

  function appWith(limiter: RateLimiter, clock?: () => number): FastifyInstance {
    return buildApp({
      ...(clock ? { clock } : {}),
      keys,
      limiter,
      read: new ReadModel(pool),
      version: () => 0,
      logger,
    });
  }

  beforeAll(async () => {
    sim = await startSimulator(stack, 120);
    const suffix = await projectTopics(stack);
    ({ pool } = await stack.schema());
    ({ pool: keysPool } = await stack.schema());
    await startMaterializer(stack, suffix, pool);
    for (const [market, kinds] of PLAN) {
      const { poller } = await startPoller(stack, sim, market, suffix);
      for (const kind of kinds) await untilApplied(pool, (await poller.runOnce(kind)).marker.cycle_id);
      if (market === 'cn-a') {
        await sim.control('POST', '/_sim/clock', { advanceMs: 3_600_000 });
        await untilApplied(pool, (await poller.runOnce('LISTINGS')).marker.cycle_id);
      }
    }
    // The materializer's export loop builds and stores the sales export; the API only serves it.
    await new SalesExportCache(pool).refresh();
    await migrate(keysPool, API_MIGRATIONS_DIR);
    keys = new KeyStore(keysPool);
    // The shared keys may make many requests a second; the limit tests use keys of their own.
    const make = async (plan: Plan, extra = {}) =>
      (await keys.create({ customer: `${plan}@example.com`, plan, perSecond: 10_000, ...extra })).secret;
    k.basic = await make('basic');
    k.pro = await make('pro');
    k.enterprise = await make('enterprise');
    k.acl = await make('enterprise', { allowedEndpoints: ['GET /v1/prices/latest'] });
    k.disabled = await make('pro', { disabled: true });
    k.expired = await make('pro', { expiresAt: new Date(Date.now() - 1000) });
    app = appWith(new MemoryRateLimiter());
    const { rows } = await pool.query<{ market_hash_name: string; phase: string; price: string }>(
      `SELECT c.market_hash_name, c.phase, c.price FROM listings_current c
       JOIN listings_current b USING (market_hash_name, phase)
       WHERE c.market = 'cn-a' AND b.market = 'eu-a' AND c.price IS NOT NULL AND b.price IS NOT NULL AND c.phase = ''
       ORDER BY 1 LIMIT 1`,
    );
    item = { name: rows[0]!.market_hash_name, phase: rows[0]!.phase, price: rows[0]!.price };
  }, 180_000);
  afterAll(async () => {
    await app?.close();
    await stack.cleanup();
  });

  const get = (url: string, key?: string, headers: Record<string, string> = {}) =>
    app.inject({ method: 'GET', url, headers: { ...(key ? { 'x-api-key': key } : {}), ...headers } });

  /**
   * The endpoints that read: the webhook endpoints write, and answer only where webhooks are
   * configured; their plan gate and ACLs are tested in webhooks-api.test.ts.
   */
  type ReadEndpointId = Exclude<EndpointId, WebhookEndpointId>;
  const READ_ENDPOINT_IDS = ENDPOINT_IDS.filter(
    (id): id is ReadEndpointId => !(WEBHOOK_ENDPOINT_IDS as readonly EndpointId[]).includes(id),
  );

  /** One concrete request per endpoint id. */
  const SAMPLE: Record<
    ReadEndpointId,
    () => { method: 'GET' | 'POST' | 'HEAD'; url: string; payload?: unknown; market?: string }
  > = {
    'GET /v1/prices/{market}': () => ({ method: 'GET', url: '/v1/prices/cn-b' }),
    'GET /v1/prices/{market}/buyorder': () => ({ method: 'GET', url: '/v1/prices/cn-a/buyorder' }),
    'GET /v1/prices/latest': () => ({ method: 'GET', url: '/v1/prices/latest' }),
    'POST /v1/prices/latest': () => ({ method: 'POST', url: '/v1/prices/latest', payload: { items: [item.name] } }),
    'GET /v1/prices/search': () => ({
      method: 'GET',
      url: `/v1/prices/search?market_hash_name=${encodeURIComponent(item.name)}`,
    }),
    'GET /v1/prices/{market}/history': () => ({
      method: 'GET',
      url: `/v1/prices/cn-a/history?market_hash_name=${encodeURIComponent(item.name)}`,
    }),
    'GET /v1/{store_market}': () => ({ method: 'GET', url: '/v1/store' }),
    'GET /v2/prices/float-ranged': () => ({ method: 'GET', url: '/v2/prices/float-ranged?market=cn-a' }),
    'GET /v1/prices/{market}/float-buyorder': () => ({ method: 'GET', url: '/v1/prices/cn-b/float-buyorder' }),
    'GET /v1/market-sales/search': () => ({
      method: 'GET',
      url: `/v1/market-sales/search?market_hash_name=${encodeURIComponent(item.name)}`,
    }),
    'GET /v1/market-sales/export': () => ({ method: 'GET', url: '/v1/market-sales/export' }),
    'GET /v1/indexes/market-cap': () => ({ method: 'GET', url: '/v1/indexes/market-cap' }),
    'GET /v1/status': () => ({ method: 'GET', url: '/v1/status' }),
    'GET /v1/prices/changes': () => ({ method: 'GET', url: '/v1/prices/changes?since=now' }),
    // HEAD: the stream's headers only (a GET would follow changes until the client leaves).
    'GET /v1/prices/stream': () => ({ method: 'HEAD', url: '/v1/prices/stream' }),
  };

  it('plan × endpoint: every endpoint answers 200 to a plan that includes it and 403 otherwise', async () => {
    const rank: Record<Plan, number> = { basic: 0, pro: 1, enterprise: 2 };
    for (const id of READ_ENDPOINT_IDS)
      for (const plan of ['basic', 'pro', 'enterprise'] as const) {
        const s = SAMPLE[id]();
        const res = await app.inject({
          method: s.method,
          url: s.url,
          headers: { 'x-api-key': k[plan] },
          ...(s.payload ? { payload: s.payload } : {}),
        });
        const need = planFor(id, s.url.includes('/cn-a/') ? 'cn-a' : undefined);
        expect(res.statusCode, `${id} with ${plan}: ${res.body.slice(0, 200)}`).toBe(
          rank[plan] >= rank[need] ? 200 : 403,
        );
        if (res.statusCode === 403 && s.method !== 'HEAD') expect(res.json().error.code).toBe('plan_required');
      }
    // CN-A's individual float buy orders are enterprise; CN-B's range orders are pro.
    expect((await get('/v1/prices/cn-a/float-buyorder', k.pro)).statusCode).toBe(403);
    expect((await get('/v1/prices/cn-a/float-buyorder', k.enterprise)).statusCode).toBe(200);
  });

  it('an ACL key reaches only its endpoints (403 elsewhere, even within its plan)', async () => {
    expect((await get('/v1/prices/latest', k.acl)).statusCode).toBe(200);
    const res = await get('/v1/prices/cn-a', k.acl);
    expect(res.statusCode).toBe(403);
    expect(res.json().error.code).toBe('endpoint_not_allowed');
  });

  it('401 for a missing, malformed, unknown, disabled or expired key; both auth headers work', async () => {
    const cases: [string | undefined, string][] = [
      [undefined, 'key_missing'],
      ['garbage', 'key_invalid'],
      [`sp_0123456789_${'x'.repeat(43)}`, 'key_invalid'],
      [`${k.pro.slice(0, -2)}xx`, 'key_invalid'],
      [k.disabled, 'key_disabled'],
      [k.expired, 'key_expired'],
    ];
    for (const [key, code] of cases) {
      const res = await get('/v1/prices/cn-a', key);
      expect(res.statusCode, code).toBe(401);
      expect(res.json()).toEqual({ error: { status: 401, code, message: expect.any(String) } });
    }
    expect((await get('/v1/prices/cn-a', undefined, { authorization: `Bearer ${k.basic}` })).statusCode).toBe(200);
    expect((await get('/v1/prices/cn-a', k.basic)).statusCode).toBe(200);
  });

  it('GET /v1/prices/cn-a: the envelope and the CN-A row of the spec, prices equal the truth', async () => {
    const res = await get('/v1/prices/cn-a', k.basic);
    expect(res.headers['cache-control']).toBe('public, max-age=30');
    const body = res.json();
    expect(body).toMatchObject({ source: 'CN-A', requestor: 'basic@example.com', plan: 'basic' });
    expect(body.timestamp).toMatch(TIME);
    const row = body.data.find((r: { market_hash_name: string }) => r.market_hash_name === item.name);
    expect(Object.keys(row).sort()).toEqual(
      [
        'id',
        'market_hash_name',
        'stattrak',
        'souvenir',
        'price_rmb',
        'change_24h',
        'change_7d',
        'change_30d',
        'change_90d',
        'avg_7d',
        'avg_30d',
        'avg_90d',
        'count',
        'phase',
        'updated_at',
        'cn_a_template_id',
        'liquidity',
      ].sort(),
    );
    expect(row.price_rmb).toMatch(DEC);
    expect(Number.isInteger(row.id) && Number.isInteger(row.count)).toBe(true);
    expect([0, 1]).toContain(row.stattrak);
    expect(row.updated_at).toMatch(TIME);
    const { records } = (await sim.control('GET', '/_sim/truth?market=cn-a&kind=listings')) as {
      records: { market_hash_name: string; phase: string; price: string | null; count: number }[];
    };
    const truth = new Map(
      records.filter((r) => r.price !== null).map((r) => [`${r.market_hash_name}|${r.phase}`, `${r.price} ${r.count}`]),
    );
    expect(
      new Map(
        body.data.map((r: { market_hash_name: string; phase: string; price_rmb: string; count: number }) => [
          `${r.market_hash_name}|${r.phase}`,
          `${r.price_rmb} ${r.count}`,
        ]),
      ),
    ).toEqual(truth);
    for (const r of body.data) expect(new Decimal(r.price_rmb).gt(0)).toBe(true);
  });

  it('other marketplaces have the 2.4 row; unknown or unserved marketplaces are 404', async () => {
    const row = (await get('/v1/prices/eu-a', k.basic)).json().data[0];
    for (const f of [
      'id',
      'market_hash_name',
      'item_page_url',
      'stattrak',
      'souvenir',
      'exterior',
      'price',
      'count',
      'updated_at',
      'liquidity',
    ])
      expect(row, f).toHaveProperty(f);
    // Every 2.4 row links to the item with its marketplace's template (was null on all of them).
    for (const market of ['eu-a', 'cn-b']) {
      const rows = (await get(`/v1/prices/${market}`, k.basic)).json().data;
      expect(rows.length, market).toBeGreaterThan(0);
      expect(itemPageUrlProblems(market, rows)).toEqual([]);
    }
    for (const url of [
      '/v1/prices/usd-1',
      '/v1/prices/nowhere',
      '/v1/prices/store/buyorder',
      '/v1/prices/cn-c/buyorder',
      '/v1/nothing',
      '/v3/x',
    ]) {
      const res = await get(url, k.enterprise);
      expect(res.statusCode, url).toBe(404);
      expect(res.json().error.code).toBe('not_found');
    }
  });

  it('the catalogue: items keyed by name, per marketplace; `markets` filters; unknown slugs are 400', async () => {
    const all = (await get('/v1/prices/latest', k.basic)).json();
    expect(all.items[item.name]['cn-a'].price_rmb).toBe(item.price);
    expect(all.items[item.name]['eu-a'].price).toMatch(DEC);
    expect(Object.values(all.items).some((v) => 'store' in (v as object))).toBe(false);
    const some = (await get('/v1/prices/latest?markets=eu-a,usd-1', k.basic)).json();
    for (const v of Object.values(some.items))
      for (const m of Object.keys(v as object)) expect(['eu-a', 'usd-1']).toContain(m);
    const bad = await get('/v1/prices/latest?markets=eu-a,mars', k.basic);
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.message).toMatch(/^markets:/);
  });

  it('POST /v1/prices/latest: 100 items accepted, 101 refused; non-JSON 415, oversized 413', async () => {
    const names = Object.keys((await get('/v1/prices/latest', k.basic)).json().items).slice(0, 100);
    const post = (payload: unknown, headers: Record<string, string> = {}) =>
      app.inject({
        method: 'POST',
        url: '/v1/prices/latest',
        payload: payload as string,
        headers: { 'x-api-key': k.basic, ...headers },
      });
    const ok = await post({ items: names, markets: ['cn-a'] });
    expect(ok.statusCode).toBe(200);
    expect(Object.keys(ok.json().items).length).toBeGreaterThan(0);
    for (const v of Object.values(ok.json().items)) expect(Object.keys(v as object)).toEqual(['cn-a']);
    const tooMany = await post({ items: [...names, 'one more'] });
    expect(tooMany.statusCode).toBe(400);
    expect(tooMany.json().error.message).toMatch(/^items:/);
    expect((await post('items=x', { 'content-type': 'text/plain' })).statusCode).toBe(415);
    expect(
      (await post(JSON.stringify({ items: ['x'.repeat(70_000)] }), { 'content-type': 'application/json' })).statusCode,
    ).toBe(413);
    expect((await post({ items: 'nope' })).json().error.message).toMatch(/^items:/);
  });

  it('history: daily closes and hourly snapshots of one item', async () => {
    const url = `/v1/prices/cn-a/history?market_hash_name=${encodeURIComponent(item.name)}`;
    const daily = (await get(url, k.basic)).json();
    expect(daily.points.length).toBeGreaterThan(0);
    expect(daily.points[0]).toEqual({
      date: expect.stringMatching(/^\d{4}-\d{2}-\d{2}$/),
      price: expect.stringMatching(DEC),
      count: expect.any(Number),
      // Candles (beyond the spec): close repeats price; low ≤ open, close ≤ high.
      open: expect.stringMatching(DEC),
      high: expect.stringMatching(DEC),
      low: expect.stringMatching(DEC),
      close: daily.points[0].price,
    });
    const c = daily.points[0] as Record<'open' | 'high' | 'low' | 'close', string>;
    const low = new Decimal(c.low);
    const high = new Decimal(c.high);
    for (const v of [c.open, c.close]) {
      expect(low.lte(v), `low ${c.low} ≤ ${v}`).toBe(true);
      expect(high.gte(v), `high ${c.high} ≥ ${v}`).toBe(true);
    }
    // Hourly snapshots are observations: a DELTA cycle does not observe an unchanged item.
    const hourly = (await get(`${url}&resolution=hourly`, k.basic)).json();
    expect(hourly.points.length).toBeGreaterThanOrEqual(1);
    expect(hourly.points[0].time).toMatch(TIME);
    expect((await get(`${url}&resolution=weekly`, k.basic)).json().error.message).toMatch(/^resolution:/);
    expect((await get('/v1/prices/cn-a/history', k.basic)).json().error.message).toMatch(/^market_hash_name:/);
    const hist = (await get(`/v1/prices/hist-a/history?market_hash_name=${encodeURIComponent(item.name)}`, k.basic))
      .statusCode;
    expect(hist).toBe(200);
  });

  it('market cap: days clamp to 7..365 and hours to 12..168; points carry cleaned', async () => {
    const cap = async (qs: string) => (await get(`/v1/indexes/market-cap?${qs}`, k.enterprise)).json();
    expect((await cap('days=1')).days).toBe(7);
    expect((await cap('days=1000')).days).toBe(365);
    expect((await cap('resolution=hourly&hours=1')).hours).toBe(12);
    expect((await cap('resolution=hourly&hours=1000')).hours).toBe(168);
    const hourly = await cap('resolution=hourly');
    expect(hourly.points.length).toBeGreaterThan(0);
    expect(hourly.points[0]).toMatchObject({ market_cap_rmb: expect.stringMatching(DEC), cleaned: true });
    expect((await get('/v1/indexes/market-cap?days=x', k.enterprise)).json().error.message).toMatch(/^days:/);
  });

  it('gzip when accepted (the same JSON), ETag and 304', async () => {
    const plain = await get('/v1/prices/cn-a', k.pro);
    const zipped = await get('/v1/prices/cn-a', k.pro, { 'accept-encoding': 'gzip, br' });
    expect(zipped.headers['content-encoding']).toBe('gzip');
    expect(JSON.parse(gunzipSync(zipped.rawPayload).toString())).toEqual(plain.json());
    const etag = plain.headers.etag as string;
    expect(etag).toMatch(/^W\/".+"$/);
    expect((await get('/v1/prices/cn-a', k.pro, { 'if-none-match': etag })).statusCode).toBe(304);
    // The tail (requestor, plan) is part of the tag: another customer's body differs.
    expect((await get('/v1/prices/cn-a', k.basic)).headers.etag).not.toBe(etag);
    // The body is written in two parts; its length is still declared, and HEAD gets headers only.
    expect(Number(zipped.headers['content-length'])).toBe(zipped.rawPayload.length);
    const head = await app.inject({ method: 'HEAD', url: '/v1/prices/cn-a', headers: { 'x-api-key': k.pro } });
    expect(head.statusCode).toBe(200);
    expect(head.headers['content-length']).toBe(plain.headers['content-length']);
    expect(head.rawPayload.length).toBe(0);
  });

  it('shapes of the other books: buy orders, store, float-ranged, float buy orders, sales search, export', async () => {
    const bo = (await get('/v1/prices/cn-a/buyorder', k.pro)).json();
    expect(bo.source).toBe('CN-A');
    const row = bo.data[0];
    expect(Object.keys(row).sort()).toEqual(
      [
        'id',
        'market_hash_name',
        'templateId',
        'buyorder_price',
        'blue_buyorder_price',
        'phase',
        'typeId',
        'updated_at',
        'count',
      ].sort(),
    );
    expect(
      bo.data.every((r: { buyorder_price: string | null }) => r.buyorder_price === null || DEC.test(r.buyorder_price)),
    ).toBe(true);
    // CN-B tier rows carry the suffix in the name; CN-B has no blue price.
    const cnB = (await get('/v1/prices/cn-b/buyorder', k.pro)).json().data;
    const tiers = await pool.query<{ tier: string }>(`SELECT DISTINCT tier FROM buyorders_current WHERE tier <> ''`);
    for (const { tier } of tiers.rows)
      expect(
        cnB.some(
          (r: { market_hash_name: string; phase: string }) =>
            r.market_hash_name.endsWith(`(${tier})`) && r.phase === tier,
        ),
      ).toBe(true);
    expect(cnB[0]).not.toHaveProperty('blue_buyorder_price');
    // typeId is an integer on every CN-B row (was null on general orders): 0 for those.
    expect(typeIdProblems(cnB)).toEqual([]);
    expect(cnB.some((r: { phase: string; typeId: number }) => r.phase === '' && r.typeId === 0)).toBe(true);

    const store = (await get('/v1/store', k.basic)).json();
    const booked = store.data.find((r: { order_book: unknown }) => r.order_book !== null);
    expect(booked.order_book.asks[0]).toEqual({ price: expect.stringMatching(DEC), count: expect.any(Number) });
    const one = (
      await get(`/v1/store?market_hash_name=${encodeURIComponent(booked.market_hash_name)}`, k.basic)
    ).json();
    expect(one.data.map((r: { market_hash_name: string }) => r.market_hash_name)).toEqual([booked.market_hash_name]);

    const fr = (await get('/v2/prices/float-ranged?market=cn-a', k.pro)).json().data[0];
    expect(fr).toMatchObject({
      market: 'cn-a',
      float_range: { min: expect.stringMatching(DEC), max: expect.stringMatching(DEC) },
    });
    expect((await get('/v2/prices/float-ranged?market=eu-a', k.pro)).json().error.message).toMatch(/^market:/);

    const fbo = (await get('/v1/prices/cn-a/float-buyorder', k.enterprise)).json().data;
    expect(fbo.length).toBeGreaterThan(0);
    expect(fbo[0]).toMatchObject({
      order_id: expect.any(String),
      price: expect.stringMatching(DEC),
      quantity: expect.any(Number),
    });
    const withMin = fbo.find((o: { float_range: { min: string | null } }) => o.float_range.min !== null);
    const filtered = (await get(`/v1/prices/cn-a/float-buyorder?float=${withMin.float_range.min}`, k.enterprise)).json()
      .data;
    expect(filtered.map((o: { order_id: string }) => o.order_id)).toContain(withMin.order_id);
    // An order that sets only a maximum matches every float below it.
    await pool.query(
      `INSERT INTO float_buyorders_current (market, order_id, market_hash_name, phase, currency, price, quantity, float_min, float_max, observed_at, cycle_id)
       VALUES ('cn-a', 'open-below', 'Open Below', '', 'CNY', 1.00, 1, NULL, 0.2, now(), 'test')`,
    );
    const openBelow = (url: string) =>
      get(url, k.enterprise).then((r) => r.json().data.map((o: { order_id: string }) => o.order_id));
    expect(await openBelow('/v1/prices/cn-a/float-buyorder?float=0.01')).toContain('open-below');
    expect(await openBelow('/v1/prices/cn-a/float-buyorder?float=0.2')).not.toContain('open-below');
    expect((await get('/v1/prices/cn-a/float-buyorder?float=2', k.enterprise)).json().error.message).toMatch(/^float:/);

    const { rows } = await pool.query<{ market_hash_name: string; n: number }>(
      `SELECT market_hash_name, count(*)::int AS n FROM sales GROUP BY 1 ORDER BY 2 DESC LIMIT 1`,
    );
    const sold = (
      await get(
        `/v1/market-sales/search?market_hash_name=${encodeURIComponent(rows[0]!.market_hash_name)}`,
        k.enterprise,
      )
    ).json();
    expect(sold.data).toHaveLength(rows[0]!.n);
    expect(sold.data[0]).toMatchObject({
      sale_id: expect.any(String),
      price: expect.stringMatching(DEC),
      sold_at: expect.stringMatching(TIME),
    });
    expect(sold.data[0]).toHaveProperty('keychains');

    const zip = await get('/v1/market-sales/export', k.enterprise);
    expect(zip.headers['content-type']).toBe('application/zip');
    expect(zip.rawPayload.subarray(0, 2).toString()).toBe('PK');
  });

  it('status: freshness of every marketplace and data kind', async () => {
    const s = (await get('/v1/status', k.basic)).json();
    const cnA = s.markets.find((m: { market: string; kind: string }) => m.market === 'cn-a' && m.kind === 'LISTINGS');
    expect(cnA).toMatchObject({ last_outcome: 'COMPLETE', stale: false, failed_in_a_row: 0 });
    expect(cnA.last_complete_at).toMatch(TIME);
  });

  it('documentation needs no key: OpenAPI 3.1 lists every endpoint; a docs page', async () => {
    const doc = (await get('/openapi.json')).json();
    expect(doc.openapi).toBe('3.1.0');
    for (const id of ENDPOINT_IDS) {
      const [method, path] = id.split(' ') as [string, string];
      expect(doc.paths[path]?.[method.toLowerCase()], id).toBeDefined();
    }
    expect((await get('/docs')).headers['content-type']).toMatch(/text\/html/);
  });

  /**
   * A clock fixed 100 ms into a second (and far from any minute's end), distinct per call: a
   * burst's requests all fall into one limit window however slowly they are served. The tests used
   * to wait for a wall-clock second boundary and hoped the burst finished within it.
   */
  let fixedSecond = Math.floor(Date.UTC(2031, 0, 1) / 1000) + Math.floor(Math.random() * 1e6) * 60;
  const fixedClock = () => {
    fixedSecond += 60;
    const t = fixedSecond * 1000 + 100;
    return () => t;
  };

  /** Fires n requests at once. */
  async function burst(apps: FastifyInstance[], key: string, n: number): Promise<number[]> {
    const res = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        apps[i % apps.length]!.inject({ method: 'GET', url: '/v1/status', headers: { 'x-api-key': key } }),
      ),
    );
    for (const r of res) if (r.statusCode === 429) expect(r.headers['retry-after']).toBe('1');
    return res.map((r) => r.statusCode);
  }

  it('10 requests per second per key under concurrency (in memory): the 11th gets 429, Retry-After: 1', async () => {
    const { secret } = await keys.create({ customer: 'burst@example.com', plan: 'basic' });
    const fixed = appWith(new MemoryRateLimiter(), fixedClock());
    const codes = await burst([fixed], secret, 25).finally(() => fixed.close());
    expect(codes.filter((c) => c === 200)).toHaveLength(10);
    expect(codes.filter((c) => c === 429)).toHaveLength(15);
  });

  it('the limit is shared across API processes through Redis', async () => {
    const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
    const limiters = [new RedisRateLimiter(url), new RedisRateLimiter(url)];
    const clock = fixedClock();
    const [a, b] = limiters.map((l) => appWith(l, clock)) as [FastifyInstance, FastifyInstance];
    try {
      const { secret } = await keys.create({ customer: 'shared@example.com', plan: 'basic' });
      const codes = await burst([a, b], secret, 24);
      expect(codes.filter((c) => c === 200)).toHaveLength(10);
      const minute = await keys.create({ customer: 'minute@example.com', plan: 'basic', perMinute: 3 });
      const seq = [];
      for (let i = 0; i < 5; i++)
        seq.push(
          (await a.inject({ method: 'GET', url: '/v1/status', headers: { 'x-api-key': minute.secret } })).statusCode,
        );
      expect(seq).toEqual([200, 200, 200, 429, 429]);
    } finally {
      await a.close();
      await b.close();
      for (const l of limiters) await l.close();
    }
  });

  describe('the hot path (search and history over a socket, ahead of the framework)', () => {
    let live: FastifyInstance;
    let base: string;
    const metrics = new ApiMetrics();
    const hotAnswers = async () => (await metrics.hotAnswers.get()).values[0]?.value ?? 0;
    const noTime = (body: string) => body.replace(/"timestamp":"[^"]*"/, '"timestamp":"-"');
    /** Headers that differ by connection or instant only. */
    const comparable = (h: Record<string, unknown>) => {
      const { date: _d, connection: _c, 'keep-alive': _k, ...rest } = h;
      return rest;
    };

    beforeAll(async () => {
      // Failed authentications are many here, by design: the address must not be throttled midway.
      live = buildApp({
        keys,
        limiter: new MemoryRateLimiter(),
        read: new ReadModel(pool),
        version: () => 0,
        logger,
        failedAuth: new FailedAuthLimiter(1_000_000),
        metrics,
      });
      base = await live.listen({ host: '127.0.0.1', port: 0 });
    });
    afterAll(() => live.close());

    const cases = () => {
      const name = encodeURIComponent(item.name);
      return [
        `/v1/prices/search?market_hash_name=${name}`,
        `/v1/prices/search?market_hash_name=${name}&markets=cn-a`,
        `/v1/prices/search?market_hash_name=${name}&unknown=1`,
        `/v1/prices/cn-a/history?market_hash_name=${name}`,
        `/v1/prices/cn-a/history?market_hash_name=${name}&resolution=hourly`,
        `/v1/prices/cn-a/history?market_hash_name=${name}&resolution=weekly`,
        `/v1/prices/cn-a/history?market_hash_name=${name}&phase=Phase%202`,
        `/v1/prices/cn-a/history?market_hash_name=no%20such%20item`,
        `/v1/prices/cn-a/history?market_hash_name=%20`,
        `/v1/prices/nowhere/history?market_hash_name=${name}`,
        `/v1/prices/search?market_hash_name=${name}%00`,
        `/v1/prices/search?market_hash_name=${name}&market_hash_name=x`,
      ];
    };

    it('answers byte for byte as the routes do, whatever the request; answers only what it holds', async () => {
      for (const url of cases())
        for (const key of [k.enterprise, k.basic, k.acl, k.disabled, 'sp_nope_nope', ''])
          for (let round = 0; round < 2; round++) {
            // The second round finds the answer cached and the key verified: the hot path's case.
            const headers = key ? { 'x-api-key': key } : ({} as Record<string, string>);
            const viaSocket = await fetch(`${base}${url}`, { headers });
            const viaRoutes = await live.inject({ method: 'GET', url, headers });
            const what = `${url} ${key.slice(0, 8)} round ${round}`;
            expect(viaSocket.status, what).toBe(viaRoutes.statusCode);
            expect(noTime(await viaSocket.text()), what).toBe(noTime(viaRoutes.body));
            expect(comparable(Object.fromEntries(viaSocket.headers)), what).toEqual(
              comparable(viaRoutes.headers as Record<string, unknown>),
            );
          }
      // Of the cases, these four are the hot path's, each in its second round with a key allowed
      // them (enterprise and basic): the rest went to the routes.
      expect(await hotAnswers()).toBe(4 * 2);
    });

    it('POST /v1/prices/latest: the same answer whatever the body, read by the hot path or not', async () => {
      const before = await hotAnswers();
      const names = [item.name, item.name, 'no such item'];
      const bodies: [string, string][] = [
        ['application/json', JSON.stringify({ items: names })],
        ['application/json; charset=utf-8', JSON.stringify({ items: [item.name] })],
        ['application/json', JSON.stringify({ items: names, markets: 'cn-a,eu-a' })],
        ['application/json', JSON.stringify({ items: Array.from({ length: 101 }, (_, i) => `x${i}`) })],
        ['application/json', JSON.stringify({ items: [''] })],
        ['application/json', JSON.stringify({ items: 'x' })],
        ['application/json', '{"items": ["a"'],
        ['application/json', JSON.stringify({ items: ['a\u0000b'] })],
        ['text/plain', JSON.stringify({ items: names })],
      ];
      for (const [type, payload] of bodies)
        for (const key of [k.enterprise, k.acl, 'sp_nope_nope'])
          for (let round = 0; round < 2; round++) {
            const headers = { 'x-api-key': key, 'content-type': type };
            const viaSocket = await fetch(`${base}/v1/prices/latest`, { method: 'POST', headers, body: payload });
            const viaRoutes = await live.inject({ method: 'POST', url: '/v1/prices/latest', headers, payload });
            const what = `${type} ${payload.slice(0, 40)} ${key.slice(0, 8)} round ${round}`;
            expect(viaSocket.status, what).toBe(viaRoutes.statusCode);
            expect(noTime(await viaSocket.text()), what).toBe(noTime(viaRoutes.body));
            expect(comparable(Object.fromEntries(viaSocket.headers)), what).toEqual(
              comparable(viaRoutes.headers as Record<string, unknown>),
            );
          }
      // The first two bodies with the enterprise key (the ACL key may not POST), once the catalogue
      // was built by an earlier request.
      expect((await hotAnswers()) - before).toBeGreaterThanOrEqual(3);
    });

    it('counts the rate limit once per request, and a refusal is the route 429', async () => {
      const { secret } = await keys.create({
        customer: 'hot@example.com',
        plan: 'basic',
        perSecond: 1_000,
        perMinute: 12,
      });
      const url = `${base}/v1/prices/search?market_hash_name=${encodeURIComponent(item.name)}`;
      // One request to verify the key and cache the answer; then the minute holds 11 more.
      expect((await fetch(url, { headers: { 'x-api-key': secret } })).status).toBe(200);
      const codes: number[] = [];
      const refusals: string[] = [];
      for (let i = 0; i < 14; i++) {
        const r = await fetch(url, { headers: { 'x-api-key': secret } });
        codes.push(r.status);
        if (r.status === 429)
          refusals.push(
            `${r.headers.get('retry-after') === null ? 'no' : 'a'} retry-after ${((await r.json()) as { error: { code: string } }).error.code}`,
          );
        else await r.arrayBuffer();
      }
      expect(codes.filter((c) => c === 200)).toHaveLength(11);
      expect(refusals).toEqual([
        'a retry-after rate_limited',
        'a retry-after rate_limited',
        'a retry-after rate_limited',
      ]);
      // A POST the hot path read is refused as the route refuses it.
      const post = { 'x-api-key': secret, 'content-type': 'application/json' };
      const payload = JSON.stringify({ items: [item.name] });
      const viaSocket = await fetch(`${base}/v1/prices/latest`, { method: 'POST', headers: post, body: payload });
      const viaRoutes = await live.inject({ method: 'POST', url: '/v1/prices/latest', headers: post, payload });
      expect([viaSocket.status, viaRoutes.statusCode]).toEqual([429, 429]);
      expect(await viaSocket.text()).toBe(viaRoutes.body);
      expect(comparable(Object.fromEntries(viaSocket.headers))).toEqual(
        comparable(viaRoutes.headers as Record<string, unknown>),
      );
    });
  });
});

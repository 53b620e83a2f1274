import { type MarketSlug } from '@skinprices/domain';
import { createLogger } from '@skinprices/runtime';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { generateCatalogue } from './catalogue.js';
import { SimClock } from './clock.js';
import { Extras } from './extras.js';
import { FaultBoard } from './faults.js';
import { PHASE_TAG_IDS } from './formats/goods-pages.js';
import { MarketModel } from './model.js';
import { Simulator, type RunningSimulator } from './server.js';

const SEED = 2;
/** Not on a second boundary, so the Date header's truncation to seconds shows. */
const START = Date.UTC(2025, 0, 6, 12, 0, 0) + 61_234;

const catalogue = generateCatalogue({ seed: SEED, size: 300 });
const model = new MarketModel(catalogue, SEED);
const clock = new SimClock(START, 0);
const faults = new FaultBoard();
const simulator = new Simulator({
  model,
  extras: new Extras(model),
  clock,
  faults,
  logger: createLogger('sim', 'silent'),
});
let sim: RunningSimulator;

beforeAll(async () => {
  sim = await simulator.start({ host: '127.0.0.1', controlPort: 0, basePort: 0 });
});
afterAll(async () => {
  await sim.stop();
});
afterEach(() => {
  faults.clear();
  model.clearOverrides();
});

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

type Json = Record<string, unknown>;

interface Answer {
  status: number;
  headers: Headers;
  body: unknown;
}

async function get(market: MarketSlug, pathAndQuery: string): Promise<Answer> {
  const res = await fetch(`${sim.marketUrls[market]}${pathAndQuery}`);
  return { status: res.status, headers: res.headers, body: (await res.json()) as unknown };
}

async function control(method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<Answer> {
  const res = await fetch(`${sim.controlUrl}${path}`, {
    method,
    ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as unknown };
}

const obj = (v: unknown): Json => {
  expect(v).toBeTypeOf('object');
  expect(v).not.toBeNull();
  expect(Array.isArray(v)).toBe(false);
  return v as Json;
};
const arr = (v: unknown): Json[] => {
  expect(Array.isArray(v)).toBe(true);
  return v as Json[];
};

/** Decimal string ("12.5", "3", "0.07") → integer minor units. */
function toMinor(s: unknown): number {
  const m = /^(\d+)(?:\.(\d{1,2}))?$/.exec(String(s));
  if (!m) throw new Error(`not a 2-decimal amount: ${String(s)}`);
  return Number(m[1]) * 100 + Number((m[2] ?? '').padEnd(2, '0'));
}

const key = (name: unknown, phase: unknown): string => `${String(name)}\u0000${String(phase ?? '')}`;

interface TruthRow {
  market_hash_name: string;
  phase: string;
  currency: string;
  price: string | null;
  count: number;
}

async function truthListings(market: MarketSlug): Promise<TruthRow[]> {
  const answer = await control('GET', `/_sim/truth?market=${market}&kind=listings`);
  expect(answer.status).toBe(200);
  return obj(answer.body).records as TruthRow[];
}

/** Truth as key → [price minor or null, count]; `pricedOnly` drops items without a listing. */
async function expectedListings(
  market: MarketSlug,
  pricedOnly: boolean,
): Promise<Map<string, [number | null, number]>> {
  const rows = await truthListings(market);
  expect(rows.length).toBeGreaterThan(50);
  return new Map(
    rows
      .filter((r) => !pricedOnly || r.price !== null)
      .map((r) => [key(r.market_hash_name, r.phase), [r.price === null ? null : toMinor(r.price), r.count]]),
  );
}

/** Adds a row, failing on a second sighting of the same item. */
function addOnce<V>(into: Map<string, V>, k: string, v: V): void {
  expect(into.has(k), `item served twice: ${k}`).toBe(false);
  into.set(k, v);
}

const PHASE_BY_TAG_ID = new Map(Object.entries(PHASE_TAG_IDS).map(([phase, id]) => [id, phase]));
const CN_A_PHASE: Record<string, string> = {
  P1: 'Phase 1',
  P2: 'Phase 2',
  P3: 'Phase 3',
  P4: 'Phase 4',
  ruby: 'Ruby',
  sapphire: 'Sapphire',
  black_pearl: 'Black Pearl',
  emerald: 'Emerald',
};

// ---------------------------------------------------------------------------------------------
// Envelopes
// ---------------------------------------------------------------------------------------------

describe('HTTP: first page of each upstream format', () => {
  it('goods-cursor (cn-a): {code: 0, data: {items, next_cursor}}, integer fen', async () => {
    const { status, body } = await get('cn-a', '/api/market/goods?limit=50');
    expect(status).toBe(200);
    const b = obj(body);
    expect(b.code).toBe(0);
    const data = obj(b.data);
    expect(typeof data.next_cursor).toBe('string');
    const items = arr(data.items);
    expect(items).toHaveLength(50);
    for (const it of items) {
      expect(it).toMatchObject({ template_id: expect.any(Number), market_hash_name: expect.any(String) });
      expect(Number.isSafeInteger(it.sell_min_price_fen)).toBe(true);
      expect(Number.isSafeInteger(it.sell_num)).toBe(true);
    }
  });

  it('goods-pages (cn-b): {code: "OK", data: {items, total_page, …}}, decimal strings', async () => {
    const { status, body } = await get('cn-b', '/market/goods?page_size=40');
    expect(status).toBe(200);
    const b = obj(body);
    expect(b.code).toBe('OK');
    const data = obj(b.data);
    expect(data).toMatchObject({ page_num: 1, page_size: 40, total_count: expect.any(Number) });
    expect(data.total_page).toBe(Math.ceil((data.total_count as number) / 40));
    const items = arr(data.items);
    expect(items).toHaveLength(40);
    for (const it of items) {
      expect(it.sell_min_price).toMatch(/^\d+(\.\d?[1-9])?$/); // no trailing zeros
      expect(it.sell_num).toBeGreaterThan(0);
      expect(obj(it.goods_info).info).toBeDefined();
    }
  });

  it('raw-listings (cn-d): {total, offset, limit, listings}', async () => {
    const { status, body } = await get('cn-d', '/v2/listings?limit=100');
    expect(status).toBe(200);
    const b = obj(body);
    expect(b).toMatchObject({ total: expect.any(Number), offset: 0, limit: 100 });
    const listings = arr(b.listings);
    expect(listings).toHaveLength(100);
    for (const l of listings) {
      expect(l).toMatchObject({ listing_id: expect.any(String), name: expect.any(String), currency: 'CNY' });
      expect(l.price).toMatch(/^\d+\.\d{2}$/);
    }
  });

  it('price-map (eu-a): one document keyed by market_hash_name', async () => {
    const { status, body } = await get('eu-a', '/api/v1/prices');
    expect(status).toBe(200);
    const doc = obj(body);
    expect(Object.keys(doc).length).toBeGreaterThan(50);
    for (const [name, variants] of Object.entries(doc)) {
      expect(catalogue.some((i) => i.marketHashName === name)).toBe(true);
      for (const v of arr(variants)) {
        expect(Object.keys(v).sort()).toEqual(['exterior', 'min_price', 'phase', 'qty']);
        if (v.min_price !== null) expect(v.min_price).toMatch(/^\d+\.\d{2}$/);
      }
    }
  });

  it('usd-catalogue (usd-2): {page, pages, per_page, total, items}, integer cents', async () => {
    const { status, body } = await get('usd-2', '/v1/market/items?per_page=50');
    expect(status).toBe(200);
    const b = obj(body);
    expect(b).toMatchObject({ page: 1, per_page: 50, total: expect.any(Number) });
    expect(b.pages).toBe(Math.ceil((b.total as number) / 50));
    for (const it of arr(b.items)) {
      expect(Number.isSafeInteger(it.price_cents) && (it.price_cents as number) > 0).toBe(true);
      expect(it.quantity).toBeGreaterThan(0);
    }
  });

  it('store: {success, start, pagesize, total_count, results}', async () => {
    const { status, body } = await get('store', '/market/search/render?count=20');
    expect(status).toBe(200);
    const b = obj(body);
    expect(b).toMatchObject({ success: true, start: 0, pagesize: 20, total_count: expect.any(Number) });
    const results = arr(b.results);
    expect(results).toHaveLength(20);
    for (const r of results) {
      expect(r).toMatchObject({ hash_name: expect.any(String), sell_listings: expect.any(Number) });
      expect(Number.isSafeInteger(r.sell_price)).toBe(true);
    }
  });

  it('history (hist-a): {date, page, pages, items} of a closed day', async () => {
    const yesterday = new Date(clock.now() - 86_400_000).toISOString().slice(0, 10);
    const { status, body } = await get('hist-a', `/api/history/daily?date=${yesterday}`);
    expect(status).toBe(200);
    const b = obj(body);
    expect(b).toMatchObject({ date: yesterday, page: 1, pages: 1 });
    const items = arr(b.items);
    expect(items.length).toBeGreaterThan(50);
    for (const it of items) expect(it.close).toMatch(/^\d+\.\d{2}$/);
    // Today is not closed yet.
    const today = new Date(clock.now()).toISOString().slice(0, 10);
    expect(arr(obj((await get('hist-a', `/api/history/daily?date=${today}`)).body).items)).toEqual([]);
  });

  it('hourly history (hist-a): the hours of a closed day, each a candle of decimal strings', async () => {
    const yesterday = new Date(clock.now() - 86_400_000).toISOString().slice(0, 10);
    const { status, body } = await get('hist-a', `/api/history/hourly?date=${yesterday}&per_page=50`);
    expect(status).toBe(200);
    const b = obj(body);
    expect(b).toMatchObject({ date: yesterday, page: 1 });
    const items = arr(b.items);
    expect(items).toHaveLength(50);
    for (const it of items) {
      const hours = arr(it.hours);
      expect(hours.length).toBeGreaterThan(0);
      for (const h of hours) {
        expect(h.time).toMatch(new RegExp(`^${yesterday}T\\d{2}:00:00\\.000Z$`));
        for (const f of ['open', 'high', 'low', 'close']) expect(h[f]).toMatch(/^\d+\.\d{2}$/);
      }
    }
    const today = new Date(clock.now()).toISOString().slice(0, 10);
    expect(arr(obj((await get('hist-a', `/api/history/hourly?date=${today}`)).body).items)).toEqual([]);
    expect((await get('hist-a', '/api/history/hourly?date=nope')).status).toBe(400);
  });

  it('answers 404 for an unknown path and 400 for a bad paging parameter', async () => {
    expect((await get('cn-a', '/nope')).status).toBe(404);
    expect((await get('cn-b', '/market/goods?page_num=x')).status).toBe(400);
    expect((await get('cn-a', '/api/market/goods?cursor=bm9wZQ')).status).toBe(400);
  });
});

// ---------------------------------------------------------------------------------------------
// Paging
// ---------------------------------------------------------------------------------------------

describe('HTTP: paging through a whole list serves every listed item exactly once, as the truth says', () => {
  it('cursor paging (cn-a goods)', async () => {
    const seen = new Map<string, [number | null, number]>();
    let cursor: string | null = null;
    let pages = 0;
    do {
      const q: string = cursor === null ? '' : `&cursor=${cursor}`;
      const data = obj(obj((await get('cn-a', `/api/market/goods?limit=37${q}`)).body).data);
      for (const it of arr(data.items)) {
        const phase = it.phase_tag === null ? '' : CN_A_PHASE[String(it.phase_tag)];
        // Price 0 is the marketplace's way of saying "no listing".
        const fen = it.sell_min_price_fen as number;
        addOnce(seen, key(it.market_hash_name, phase), [fen === 0 ? null : fen, it.sell_num as number]);
      }
      cursor = data.next_cursor as string | null;
      pages++;
    } while (cursor !== null && pages < 100);
    expect(pages).toBeGreaterThan(2);
    expect(seen).toEqual(await expectedListings('cn-a', false));
  });

  it('page_num paging (cn-b goods)', async () => {
    const seen = new Map<string, [number | null, number]>();
    let totalPage = 1;
    for (let p = 1; p <= totalPage; p++) {
      const data = obj(obj((await get('cn-b', `/market/goods?page_num=${p}&page_size=40`)).body).data);
      totalPage = data.total_page as number;
      for (const it of arr(data.items)) {
        const phase = it.tag_id === null ? '' : PHASE_BY_TAG_ID.get(it.tag_id as number);
        addOnce(seen, key(it.market_hash_name, phase), [toMinor(it.sell_min_price), it.sell_num as number]);
      }
    }
    expect(totalPage).toBeGreaterThan(2);
    // Past the last page: an empty list, not an error.
    const past = obj(obj((await get('cn-b', `/market/goods?page_num=${totalPage + 1}&page_size=40`)).body).data);
    expect(past.items).toEqual([]);
    expect(seen).toEqual(await expectedListings('cn-b', true));
  });

  it('offset paging (cn-d raw listings): lowest price and count per item', async () => {
    const ids = new Set<string>();
    const perItem = new Map<string, [number, number]>();
    let total = Infinity;
    for (let offset = 0; offset < total; offset += 150) {
      const b = obj((await get('cn-d', `/v2/listings?offset=${offset}&limit=150`)).body);
      total = b.total as number;
      for (const l of arr(b.listings)) {
        expect(ids.has(String(l.listing_id))).toBe(false);
        ids.add(String(l.listing_id));
        const [low, n] = perItem.get(String(l.name)) ?? [Infinity, 0];
        perItem.set(String(l.name), [Math.min(low, toMinor(l.price)), n + 1]);
      }
    }
    expect(ids.size).toBe(total);
    const expected = new Map(
      (await truthListings('cn-d'))
        .filter((r) => r.price !== null)
        .map((r) => [
          r.phase ? `${r.market_hash_name} - ${r.phase}` : r.market_hash_name,
          [toMinor(r.price), r.count] as [number, number],
        ]),
    );
    expect(perItem).toEqual(expected);
  });

  it('page paging (usd-3 catalogue)', async () => {
    const seen = new Map<string, [number | null, number]>();
    let pages = 1;
    for (let p = 1; p <= pages; p++) {
      const b = obj((await get('usd-3', `/v1/market/items?page=${p}&per_page=45`)).body);
      pages = b.pages as number;
      for (const it of arr(b.items)) {
        addOnce(seen, key(it.market_hash_name, it.phase), [it.price_cents as number, it.quantity as number]);
      }
    }
    expect(pages).toBeGreaterThan(2);
    expect(seen).toEqual(await expectedListings('usd-3', true));
  });

  it('start/count paging (store search)', async () => {
    const seen = new Map<string, [number | null, number]>();
    let total = Infinity;
    for (let start = 0; start < total; start += 60) {
      const b = obj((await get('store', `/market/search/render?start=${start}&count=60`)).body);
      total = b.total_count as number;
      for (const r of arr(b.results)) {
        const cents = r.sell_price as number;
        addOnce(seen, key(r.hash_name, ''), [cents === 0 ? null : cents, r.sell_listings as number]);
      }
    }
    expect(seen).toEqual(await expectedListings('store', false));
  });
});

// ---------------------------------------------------------------------------------------------
// Time
// ---------------------------------------------------------------------------------------------

describe('HTTP: simulated time', () => {
  it('the Date header carries the simulated time, to the second', async () => {
    for (const market of ['cn-a', 'eu-a', 'store'] as const) {
      const { headers } = await get(market, market === 'eu-a' ? '/api/v1/prices' : '/nope');
      expect(Date.parse(headers.get('date') ?? '')).toBe(Math.floor(clock.now() / 1000) * 1000);
    }
  });

  it('GET /_sim/clock reports the clock', async () => {
    expect((await control('GET', '/_sim/clock')).body).toEqual({ now: clock.now(), speed: 0 });
  });

  it("GET /_sim/traffic counts each marketplace's requests from the wall-clock time of its first", async () => {
    const before = (await control('GET', '/_sim/traffic')).body as Record<
      string,
      { requests: number; first_at: number }
    >;
    const t = Date.now();
    await get('cn-d', '/nope');
    await get('cn-d', '/nope');
    const after = (await control('GET', '/_sim/traffic')).body as typeof before;
    expect(after['cn-d']?.requests).toBe((before['cn-d']?.requests ?? 0) + 2);
    if (!before['cn-d']) expect(after['cn-d']?.first_at).toBeGreaterThanOrEqual(t);
    else expect(after['cn-d']?.first_at).toBe(before['cn-d'].first_at);
  });
});

// ---------------------------------------------------------------------------------------------
// Faults through the control API
// ---------------------------------------------------------------------------------------------

describe('HTTP: faults', () => {
  it('error5xx answers 503 on that market only', async () => {
    expect((await control('POST', '/_sim/faults', { market: 'cn-b', kind: 'error5xx' })).status).toBe(200);
    expect((await get('cn-b', '/market/goods')).status).toBe(503);
    expect((await get('cn-b', '/market/goods')).status).toBe(503);
    expect((await get('cn-a', '/api/market/goods')).status).toBe(200);
  });

  it('error5xx with a status answers that status', async () => {
    await control('POST', '/_sim/faults', { market: 'cn-b', kind: 'error5xx', status: 502, times: 1 });
    expect((await get('cn-b', '/market/goods')).status).toBe(502);
    expect((await get('cn-b', '/market/goods')).status).toBe(200);
  });

  it('rateLimit answers 429 with Retry-After', async () => {
    await control('POST', '/_sim/faults', { market: 'cn-b', kind: 'rateLimit', times: 1 });
    const first = await get('cn-b', '/market/goods');
    expect(first.status).toBe(429);
    expect(first.headers.get('retry-after')).toBe('1');
    await control('POST', '/_sim/faults', { market: 'cn-b', kind: 'rateLimit', retryAfterS: 7 });
    const second = await get('cn-b', '/market/goods');
    expect(second.status).toBe(429);
    expect(second.headers.get('retry-after')).toBe('7');
  });

  it('malformed answers 200 with a body that is not JSON', async () => {
    await control('POST', '/_sim/faults', { market: 'cn-b', kind: 'malformed' });
    const res = await fetch(`${sim.marketUrls['cn-b']}/market/goods`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text.length).toBeGreaterThan(10);
    expect(() => JSON.parse(text) as unknown).toThrow();
  });

  it('truncated makes the fetch or the body read fail', async () => {
    await control('POST', '/_sim/faults', { market: 'cn-b', kind: 'truncated' });
    const read = async (): Promise<string> => (await fetch(`${sim.marketUrls['cn-b']}/market/goods`)).text();
    await expect(read()).rejects.toThrow();
  });

  it('zeroPrices zeroes prices but not counts', async () => {
    await control('POST', '/_sim/faults', { market: 'cn-a', kind: 'zeroPrices' });
    const items = arr(obj(obj((await get('cn-a', '/api/market/goods?limit=30')).body).data).items);
    expect(items.every((it) => it.sell_min_price_fen === 0)).toBe(true);
    expect(items.some((it) => (it.sell_num as number) > 0)).toBe(true);
  });

  it('a path filter limits the fault to that endpoint', async () => {
    await control('POST', '/_sim/faults', { market: 'cn-b', kind: 'error5xx', path: '/market/buy_order' });
    expect((await get('cn-b', '/market/goods')).status).toBe(200);
    expect((await get('cn-b', '/market/buy_order/top')).status).toBe(503);
  });

  it('GET lists the faults and DELETE /_sim/faults clears them', async () => {
    await control('POST', '/_sim/faults', { market: 'cn-b', kind: 'error5xx' });
    await control('POST', '/_sim/faults', { market: 'usd-1', kind: 'rateLimit' });
    expect((await control('GET', '/_sim/faults')).body).toEqual({
      'cn-b': [{ kind: 'error5xx' }],
      'usd-1': [{ kind: 'rateLimit' }],
    });
    expect((await get('cn-b', '/market/goods')).status).toBe(503);
    await control('DELETE', '/_sim/faults?market=cn-b');
    expect((await get('cn-b', '/market/goods')).status).toBe(200);
    expect((await get('usd-1', '/v1/market/items')).status).toBe(429);
    expect((await control('DELETE', '/_sim/faults')).body).toEqual({});
    expect((await get('usd-1', '/v1/market/items')).status).toBe(200);
  });

  it('refuses an unknown market or fault kind with 400', async () => {
    expect((await control('POST', '/_sim/faults', { market: 'nope', kind: 'error5xx' })).status).toBe(400);
    expect((await control('POST', '/_sim/faults', { market: 'cn-b', kind: 'explode' })).status).toBe(400);
    expect((await control('GET', '/_sim/faults')).body).toEqual({});
  });
});

// ---------------------------------------------------------------------------------------------
// Overrides and truth
// ---------------------------------------------------------------------------------------------

describe('HTTP: overrides and truth', () => {
  it('POST /_sim/override then GET /_sim/truth (and the upstream) show the override', async () => {
    const before = await truthListings('cn-b');
    const target = before.find((r) => r.price !== null && r.phase === '');
    if (!target) throw new Error('no priced phase-less cn-b row');
    const posted = await control('POST', '/_sim/override', {
      market: 'cn-b',
      market_hash_name: target.market_hash_name,
      phase: '',
      price: '12.34',
      count: 3,
    });
    expect(posted.status).toBe(200);
    expect(obj(posted.body).at).toBe(clock.now());

    const after = await truthListings('cn-b');
    expect(after.find((r) => r.market_hash_name === target.market_hash_name && r.phase === '')).toEqual({
      ...target,
      price: '12.34',
      count: 3,
    });
    expect(after.length).toBe(before.length);

    const { body } = await get('cn-b', '/market/goods?page_size=500');
    const row = arr(obj(obj(body).data).items).find((it) => it.market_hash_name === target.market_hash_name);
    expect(row).toMatchObject({ sell_min_price: '12.34', sell_num: 3 });

    await control('DELETE', '/_sim/override');
    expect(await truthListings('cn-b')).toEqual(before);
  });

  it('an override with price null removes the listing upstream', async () => {
    const target = (await truthListings('usd-2')).find((r) => r.price !== null);
    if (!target) throw new Error('no priced usd-2 row');
    await control('POST', '/_sim/override', {
      market: 'usd-2',
      market_hash_name: target.market_hash_name,
      phase: target.phase,
      price: null,
    });
    const row = (await truthListings('usd-2')).find(
      (r) => r.market_hash_name === target.market_hash_name && r.phase === target.phase,
    );
    expect(row).toMatchObject({ price: null, count: 0 });
    const items = arr(obj((await get('usd-2', '/v1/market/items?per_page=1000')).body).items);
    expect(items.some((it) => key(it.market_hash_name, it.phase) === key(target.market_hash_name, target.phase))).toBe(
      false,
    );
  });

  it('refuses an unknown market (400) or item (404)', async () => {
    const item = catalogue[0]!;
    const base = { market_hash_name: item.marketHashName, phase: item.phase, price: '1.00' };
    expect((await control('POST', '/_sim/override', { ...base, market: 'nope' })).status).toBe(400);
    expect(
      (await control('POST', '/_sim/override', { ...base, market: 'cn-a', market_hash_name: 'Nope' })).status,
    ).toBe(404);
    expect((await control('GET', '/_sim/truth?market=nope&kind=listings')).status).toBe(400);
    expect((await control('GET', '/_sim/truth?market=cn-a&kind=nope')).status).toBe(400);
  });

  it('serves every truth kind for a market', async () => {
    for (const kind of ['buyorders', 'float-ranged', 'float-buyorders', 'sales']) {
      const { status, body } = await control('GET', `/_sim/truth?market=cn-a&kind=${kind}`);
      expect(status).toBe(200);
      expect(obj(body)).toMatchObject({ market: 'cn-a', kind, at: clock.now() });
      expect(arr(obj(body).records).length).toBeGreaterThan(0);
    }
  });
});

// Last: it moves the shared clock.
describe('HTTP: clock control', () => {
  it('POST /_sim/clock {advanceMs} moves the simulated time, and the Date header with it', async () => {
    const before = clock.now();
    const answer = await control('POST', '/_sim/clock', { advanceMs: 3_600_000 });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ now: before + 3_600_000, speed: 0 });
    expect(clock.now()).toBe(before + 3_600_000);
    const { headers } = await get('cn-a', '/api/market/goods?limit=1');
    expect(Date.parse(headers.get('date') ?? '')).toBe(Math.floor((before + 3_600_000) / 1000) * 1000);
  });

  it('refuses to set the clock backwards (400) and leaves it where it was', async () => {
    const now = clock.now();
    expect((await control('POST', '/_sim/clock', { setMs: now - 1 })).status).toBe(400);
    expect(clock.now()).toBe(now);
  });
});

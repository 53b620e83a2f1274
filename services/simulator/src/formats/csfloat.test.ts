import type { MarketSlug } from '@skinprices/domain';
import { createLogger } from '@skinprices/runtime';
import { describe, expect, it } from 'vitest';
import { generateCatalogue } from '../catalogue.js';
import { SimClock } from '../clock.js';
import { Extras } from '../extras.js';
import { FaultBoard } from '../faults.js';
import { MarketModel } from '../model.js';
import { Simulator } from '../server.js';
import { truth } from '../truth.js';
import { csfloatRoutes, csfloatRoutesWith, MAX_LIMIT, type CsfloatRateLimit } from './csfloat.js';
import type { Route, SimContext, UpstreamResponse } from './types.js';

const START = Date.UTC(2026, 10, 20, 12);
const MARKET: MarketSlug = 'usd-3';

function context(size = 60): SimContext {
  const model = new MarketModel(generateCatalogue({ seed: 7, size }), 7);
  return { model, extras: new Extras(model), clock: new SimClock(START, 0), market: MARKET };
}

interface Listing {
  id: string;
  type: string;
  price: number;
  state: string;
  item: Record<string, unknown> & { market_hash_name: string; phase?: string };
}
interface Body {
  data: Listing[];
  cursor?: string;
}

const KEY = { authorization: 'test-key' };
const call = (route: Route, ctx: SimContext, query: Record<string, string> = {}, headers: object = KEY) =>
  route(ctx, new URLSearchParams(query), { headers: headers as Record<string, string> });
const listings = csfloatRoutes['/api/v1/listings']!;
const routeWith = (limit: CsfloatRateLimit): Route => csfloatRoutesWith(limit)['/api/v1/listings']!;

/** Every page of a query, following the cursors. */
function walk(ctx: SimContext, query: Record<string, string>, route: Route = listings): { pages: Body[] } {
  const pages: Body[] = [];
  let cursor: string | undefined;
  for (let n = 0; n < 1000; n++) {
    const res = call(route, ctx, cursor ? { ...query, cursor } : query);
    expect(res.status).toBe(200);
    const body = res.body as Body;
    pages.push(body);
    if (body.cursor === undefined) return { pages };
    cursor = body.cursor;
  }
  throw new Error('cursor never ended');
}

describe('csfloat format', () => {
  it('answers 401 without an Authorization header, and counts no request for it', () => {
    const route = routeWith({ requests: 1, windowMs: 60_000, now: () => START });
    const ctx = context();
    expect(call(route, ctx, {}, {}).status).toBe(401);
    expect(call(route, ctx).status).toBe(200);
  });

  it('is consistent with the truth: lowest buy-now price and count per (name, phase), phases kept apart', () => {
    const ctx = context();
    const all = walk(ctx, { sort_by: 'lowest_price', type: 'buy_now', limit: '50' }).pages.flatMap((p) => p.data);
    const agg = new Map<string, { price: number; count: number }>();
    for (const l of all) {
      expect(l).toMatchObject({ type: 'buy_now', state: 'listed' });
      expect(Number.isSafeInteger(l.price) && l.price > 0).toBe(true);
      const key = `${l.item.market_hash_name}|${l.item.phase ?? ''}`;
      const cur = agg.get(key);
      agg.set(key, { price: Math.min(cur?.price ?? Infinity, l.price), count: (cur?.count ?? 0) + 1 });
    }
    const expected = (truth(ctx, MARKET, 'listings', ctx.clock.now(), 0) as Record<string, unknown>[])
      .filter((r) => (r.count as number) > 0)
      .map((r) => `${String(r.market_hash_name)}|${String(r.phase)}|${String(r.price)}|${String(r.count)}`)
      .sort();
    const got = [...agg].map(([k, v]) => `${k}|${(v.price / 100).toFixed(2)}|${v.count}`).sort();
    expect(got).toEqual(expected);
    // Doppler rows are there, as separate items, with the phase in item.phase and not in the name.
    expect(got.some((g) => /\| Doppler .*\|(Phase \d|Ruby|Sapphire|Black Pearl|Emerald)\|/.test(g))).toBe(true);
    expect(all.every((l) => !/ - (Ruby|Phase)/.test(l.item.market_hash_name))).toBe(true);
    // Every listing once.
    expect(new Set(all.map((l) => l.id)).size).toBe(all.length);
  });

  it('pages by an opaque cursor, at most 50 a page; the last page has no cursor', () => {
    const ctx = context();
    const { pages } = walk(ctx, { limit: '500', type: 'buy_now' });
    expect(pages.length).toBeGreaterThan(2);
    for (const p of pages.slice(0, -1)) expect(p.data).toHaveLength(MAX_LIMIT);
    expect(pages.at(-1)?.cursor).toBeUndefined();
    expect(pages[0]?.cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    // Default page size is the maximum too.
    expect((call(listings, ctx).body as Body).data).toHaveLength(MAX_LIMIT);
    expect((call(listings, ctx, { limit: '7' }).body as Body).data).toHaveLength(7);
  });

  it('sorts by lowest_price', () => {
    const ctx = context();
    const prices = walk(ctx, { sort_by: 'lowest_price' }).pages.flatMap((p) => p.data.map((l) => l.price));
    expect(prices).toEqual([...prices].sort((a, b) => a - b));
  });

  it('has auctions whose price (the current bid) is below every buy-now offer, unless type=buy_now', () => {
    const ctx = context();
    const all = walk(ctx, {}).pages.flatMap((p) => p.data);
    const auctions = all.filter((l) => l.type === 'auction');
    expect(auctions.length).toBeGreaterThan(0);
    for (const a of auctions) {
      const offers = all.filter(
        (l) =>
          l.type === 'buy_now' && l.item.market_hash_name === a.item.market_hash_name && l.item.phase === a.item.phase,
      );
      expect(a.price).toBeLessThan(Math.min(...offers.map((l) => l.price)));
    }
    const buyNow = walk(ctx, { type: 'buy_now' }).pages.flatMap((p) => p.data);
    expect(buyNow.every((l) => l.type === 'buy_now')).toBe(true);
    expect(buyNow.length).toBe(all.length - auctions.length);
  });

  it('filters by market_hash_name and category', () => {
    const ctx = context();
    const name = (walk(ctx, {}).pages[0]?.data[0] as Listing).item.market_hash_name;
    const one = walk(ctx, { market_hash_name: name }).pages.flatMap((p) => p.data);
    expect(one.length).toBeGreaterThan(0);
    expect(one.every((l) => l.item.market_hash_name === name)).toBe(true);
    const st = walk(ctx, { category: '2' }).pages.flatMap((p) => p.data);
    expect(st.length).toBeGreaterThan(0);
    expect(st.every((l) => l.item.is_stattrak === true && l.item.market_hash_name.includes('StatTrak™'))).toBe(true);
  });

  it.each([
    [{ limit: 'ten' }, 'limit'],
    [{ sort_by: 'cheapest' }, 'sort_by'],
    [{ type: 'raffle' }, 'type'],
    [{ category: '9' }, 'category'],
    [{ cursor: '!!not-a-cursor' }, 'cursor'],
  ])('refuses %j with a 400', (query, what) => {
    const res = call(listings, context(10), query);
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).toContain(what);
  });

  describe('rate limit', () => {
    const limit = (now: () => number): CsfloatRateLimit => ({ requests: 3, windowMs: 60_000, now });

    it('every answer says the budget, what remains (decreasing) and when the window resets; past it a 429', () => {
      let t = Date.UTC(2026, 0, 1, 0, 0, 10);
      const route = routeWith(limit(() => t));
      const ctx = context(10);
      const answers: UpstreamResponse[] = [];
      for (let i = 0; i < 4; i++) answers.push(call(route, ctx));
      const reset = String(Date.UTC(2026, 0, 1, 0, 1, 0) / 1000);
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 429]);
      expect(answers.map((a) => a.headers)).toEqual([
        { 'x-ratelimit-limit': '3', 'x-ratelimit-remaining': '2', 'x-ratelimit-reset': reset },
        { 'x-ratelimit-limit': '3', 'x-ratelimit-remaining': '1', 'x-ratelimit-reset': reset },
        { 'x-ratelimit-limit': '3', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset },
        { 'x-ratelimit-limit': '3', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset },
      ]);
      // No Retry-After: the reset header is all a client gets.
      expect(answers[3]?.headers).not.toHaveProperty('retry-after');
      // The next window starts afresh.
      t = Date.UTC(2026, 0, 1, 0, 1, 0);
      expect(call(route, ctx).headers?.['x-ratelimit-remaining']).toBe('2');
    });

    it('counts per key and per simulator', () => {
      const route = routeWith(limit(() => START));
      const ctx = context(10);
      for (let i = 0; i < 3; i++) call(route, ctx);
      expect(call(route, ctx).status).toBe(429);
      expect(call(route, ctx, {}, { authorization: 'other-key' }).status).toBe(200);
      expect(call(route, context(10)).status).toBe(200);
    });
  });

  it('served by the simulator: 401 without a key; with it JSON and the rate-limit headers', async () => {
    const model = new MarketModel(generateCatalogue({ seed: 7, size: 20 }), 7);
    const sim = new Simulator({
      model,
      extras: new Extras(model),
      clock: new SimClock(START, 0),
      faults: new FaultBoard(),
      logger: createLogger('sim', 'silent'),
    });
    const running = await sim.start({
      host: '127.0.0.1',
      controlPort: 0,
      basePort: 0,
      formats: { [MARKET]: 'csfloat' },
    });
    try {
      const url = `${running.marketUrls[MARKET]}/api/v1/listings?limit=5&type=buy_now`;
      expect((await fetch(url)).status).toBe(401);
      const first = await fetch(url, { headers: { Authorization: 'k' } });
      const second = await fetch(url, { headers: { Authorization: 'k' } });
      expect(first.status).toBe(200);
      expect(((await first.json()) as Body).data).toHaveLength(5);
      expect(first.headers.get('x-ratelimit-limit')).toBe('200');
      expect(Number(first.headers.get('x-ratelimit-remaining'))).toBe(
        Number(second.headers.get('x-ratelimit-remaining')) + 1,
      );
      expect(Number(first.headers.get('x-ratelimit-reset')) * 1000).toBeGreaterThan(Date.now());
    } finally {
      await running.stop();
    }
  });
});

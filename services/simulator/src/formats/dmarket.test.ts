import { Dec, type MarketSlug } from '@skinprices/domain';
import { createLogger } from '@skinprices/runtime';
import { describe, expect, it } from 'vitest';
import { generateCatalogue } from '../catalogue.js';
import { SimClock } from '../clock.js';
import { Extras } from '../extras.js';
import { FaultBoard } from '../faults.js';
import { MarketModel } from '../model.js';
import { Simulator } from '../server.js';
import { truth } from '../truth.js';
import { DMARKET_PATH, dmarketRoutes, dmarketRoutesWith, MAX_LIMIT, type DmarketOptions } from './dmarket.js';
import type { Route, SimContext, UpstreamResponse } from './types.js';

const START = Date.UTC(2026, 10, 20, 12);
const MARKET: MarketSlug = 'usd-2';

function context(size = 60): SimContext {
  const model = new MarketModel(generateCatalogue({ seed: 7, size }), 7);
  return { model, extras: new Extras(model), clock: new SimClock(START, 0), market: MARKET };
}

interface Offer {
  itemId: string;
  type: string;
  amount: number;
  title: string;
  price: { DMC: string; USD: string };
  suggestedPrice: { USD: string };
  instantPrice: { USD: string };
  discountPrice: { USD: string };
  extra: Record<string, unknown> & { phase?: string; phaseTitle?: string; exterior?: string };
}
interface Body {
  objects: Offer[];
  total: Record<string, number>;
  cursor: string;
}

/** A route with a budget no test walk reaches, on a fixed wall clock. */
const unlimited = (over: Partial<DmarketOptions> = {}): Route =>
  dmarketRoutesWith({ requests: 1_000_000, now: () => START, ...over })[DMARKET_PATH]!;
const call = (route: Route, ctx: SimContext, query: Record<string, string> = {}) =>
  route(ctx, new URLSearchParams(query), { headers: {} });
const CS2 = { gameId: 'a8db', currency: 'USD' };

/** Every page of a query, following the cursors until the empty one. */
function walk(ctx: SimContext, query: Record<string, string>, route: Route = unlimited()): Body[] {
  const pages: Body[] = [];
  let cursor = '';
  for (let n = 0; n < 1000; n++) {
    const res = call(route, ctx, cursor ? { ...query, cursor } : query);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const body = res.body as Body;
    pages.push(body);
    if (body.cursor === '') return pages;
    cursor = body.cursor;
  }
  throw new Error('cursor never ended');
}

describe('dmarket format', () => {
  it('is consistent with the truth: lowest price.USD and offer count per (title, phase), phases kept apart', () => {
    const ctx = context();
    const all = walk(ctx, { ...CS2, limit: '100', orderBy: 'price', orderDir: 'asc' }).flatMap((p) => p.objects);
    // Cents as BigInt: integer and exact, never a float.
    const agg = new Map<string, { cents: bigint; count: number }>();
    for (const o of all) {
      expect(o.price.USD).toMatch(/^[1-9]\d*$/);
      const key = `${o.title}|${o.extra.phaseTitle ?? ''}`;
      const cur = agg.get(key);
      const cents = BigInt(o.price.USD);
      agg.set(key, {
        cents: cur === undefined || cents < cur.cents ? cents : cur.cents,
        count: (cur?.count ?? 0) + o.amount,
      });
    }
    const expected = (truth(ctx, MARKET, 'listings', ctx.clock.now(), 0) as Record<string, unknown>[])
      .filter((r) => (r.count as number) > 0)
      .map((r) => `${String(r.market_hash_name)}|${String(r.phase)}|${String(r.price)}|${String(r.count)}`)
      .sort();
    const got = [...agg].map(([k, v]) => `${k}|${new Dec(v.cents.toString()).div(100).toFixed(2)}|${v.count}`).sort();
    expect(got).toEqual(expected);
    // Doppler rows are there, as separate items: phase in extra, never in the title.
    expect(got.some((g) => /\| Doppler .*\|(Phase \d|Ruby|Sapphire|Black Pearl|Emerald)\|/.test(g))).toBe(true);
    expect(all.every((o) => !/ - (Ruby|Phase)/.test(o.title))).toBe(true);
    // Every offer once.
    expect(new Set(all.map((o) => o.itemId)).size).toBe(all.length);
  });

  it("spells the attributes DMarket's way: exterior lower case, phase slug plus phaseTitle", () => {
    const ctx = context();
    const all = walk(ctx, { ...CS2, limit: '100' }).flatMap((p) => p.objects);
    const doppler = all.filter((o) => o.extra.phase !== undefined);
    expect(doppler.length).toBeGreaterThan(0);
    for (const o of doppler) {
      expect(o.extra.phase).toMatch(/^(phase-[1-4]|ruby|sapphire|black-pearl|emerald)$/);
      expect(o.extra.phase).toBe(o.extra.phaseTitle!.toLowerCase().replace(/ /g, '-'));
    }
    const exteriors = new Set(all.map((o) => o.extra.exterior).filter((e) => e !== undefined));
    for (const e of exteriors)
      expect(e).toMatch(/^(factory new|minimal wear|field-tested|well-worn|battle-scarred|not painted)$/);
    expect(exteriors.size).toBeGreaterThan(2);
  });

  it('puts every estimate below the cheapest offer: only price.USD is an offer', () => {
    const ctx = context();
    const all = walk(ctx, { ...CS2, limit: '100' }).flatMap((p) => p.objects);
    const cheapest = new Map<string, bigint>();
    for (const o of all) {
      const key = `${o.title}|${o.extra.phase ?? ''}`;
      const cents = BigInt(o.price.USD);
      const cur = cheapest.get(key);
      if (cur === undefined || cents < cur) cheapest.set(key, cents);
    }
    for (const o of all) {
      const min = cheapest.get(`${o.title}|${o.extra.phase ?? ''}`)!;
      for (const estimate of [o.suggestedPrice, o.instantPrice, o.discountPrice])
        expect(BigInt(estimate.USD) <= min, `${estimate.USD} ≤ ${min}`).toBe(true);
      expect(o.price.DMC).not.toBe(o.price.USD);
    }
    expect(all.some((o) => BigInt(o.suggestedPrice.USD) < BigInt(o.price.USD))).toBe(true);
  });

  it('pages by an opaque cursor, at most 100 a page (50 by default); the last cursor is empty', () => {
    const ctx = context();
    const pages = walk(ctx, { ...CS2, limit: '500', orderBy: 'price', orderDir: 'asc' });
    expect(pages.length).toBeGreaterThan(2);
    for (const p of pages.slice(0, -1)) expect(p.objects).toHaveLength(MAX_LIMIT);
    expect(pages.at(-1)?.cursor).toBe('');
    expect(pages[0]?.cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect((call(unlimited(), ctx, CS2).body as Body).objects).toHaveLength(50);
    expect((call(unlimited(), ctx, { ...CS2, limit: '7' }).body as Body).objects).toHaveLength(7);
    const total = pages[0]!.total;
    expect(total).toEqual({
      offers: pages.reduce((n, p) => n + p.objects.length, 0),
      targets: 0,
      items: 0,
      completedOffers: 0,
      closedTargets: 0,
    });
  });

  it('sorts by price ascending, and by title descending by default', () => {
    const ctx = context();
    const prices = walk(ctx, { ...CS2, limit: '100', orderBy: 'price', orderDir: 'asc' }).flatMap((p) =>
      p.objects.map((o) => BigInt(o.price.USD)),
    );
    expect(prices).toEqual([...prices].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    const titles = walk(ctx, { ...CS2, limit: '100' }).flatMap((p) => p.objects.map((o) => o.title));
    expect(titles).toEqual([...titles].sort((a, b) => b.localeCompare(a)));
  });

  it('stops total at 10,000 (here a small cap): it cannot tell where the list ends', () => {
    const ctx = context();
    const route = unlimited({ totalCap: 20 });
    const pages = walk(ctx, { ...CS2, limit: '100' }, route);
    expect(pages[0]?.total.offers).toBe(20);
    expect(pages.flatMap((p) => p.objects).length).toBeGreaterThan(100);
  });

  it('keeps the legacy offset paging for 100 pages, then answers 400', () => {
    const ctx = context();
    const route = unlimited();
    const byOffset = call(route, ctx, { ...CS2, limit: '5', offset: '10', orderBy: 'price', orderDir: 'asc' })
      .body as Body;
    const byCursor = walk(ctx, { ...CS2, limit: '5', orderBy: 'price', orderDir: 'asc' }, route)[2]!;
    expect(byOffset.objects.map((o) => o.itemId)).toEqual(byCursor.objects.map((o) => o.itemId));
    const past = call(route, ctx, { ...CS2, limit: '5', offset: '500' });
    expect(past.status).toBe(400);
    expect(JSON.stringify(past.body)).toContain('cursor');
  });

  it('filters by a part of the title, by price (cents) and by type; other games have no CS2 offers', () => {
    const ctx = context();
    const all = walk(ctx, { ...CS2, limit: '100' }).flatMap((p) => p.objects);
    const some = walk(ctx, { ...CS2, limit: '100', title: 'doppler' }).flatMap((p) => p.objects);
    expect(some.length).toBeGreaterThan(0);
    expect(some.every((o) => o.title.includes('Doppler'))).toBe(true);
    const cheap = walk(ctx, { ...CS2, limit: '100', priceTo: '100' }).flatMap((p) => p.objects);
    expect(cheap.every((o) => BigInt(o.price.USD) <= 100n)).toBe(true);
    expect(cheap.length).toBeLessThan(all.length);
    const p2p = walk(ctx, { ...CS2, limit: '100', types: 'p2p' }).flatMap((p) => p.objects);
    expect(p2p.length).toBeGreaterThan(0);
    expect(p2p.every((o) => o.type === 'p2p')).toBe(true);
    expect(walk(ctx, { ...CS2, gameId: 'tf2' })[0]?.objects).toEqual([]);
  });

  it.each([
    [{ currency: 'USD' }, 'gameId'],
    [{ ...CS2, gameId: 'csgo' }, 'gameId'],
    [{ gameId: 'a8db' }, 'currency'],
    [{ ...CS2, limit: 'ten' }, 'limit'],
    [{ ...CS2, orderBy: 'cheapest' }, 'orderBy'],
    [{ ...CS2, orderDir: 'up' }, 'orderDir'],
    [{ ...CS2, cursor: '!!not-a-cursor' }, 'cursor'],
  ])('refuses %j with a 400', (query, what) => {
    const res = call(unlimited(), context(10), query);
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).toContain(what);
  });

  describe('rate limit', () => {
    it('every answer says the budget and what remains in the second; past it a 429 without Retry-After', () => {
      let t = Date.UTC(2026, 0, 1, 0, 0, 10, 200);
      const route = dmarketRoutesWith({ now: () => t })[DMARKET_PATH]!;
      const ctx = context(10);
      const answers: UpstreamResponse[] = [];
      for (let i = 0; i < 3; i++) answers.push(call(route, ctx, CS2));
      expect(answers.map((a) => a.status)).toEqual([200, 200, 429]);
      const h = (remaining: string) => ({
        'x-ratelimit-limit-second': '2',
        'x-ratelimit-remaining-second': remaining,
        'ratelimit-limit': '2',
        'ratelimit-remaining': remaining,
        'ratelimit-reset': '1',
      });
      expect(answers.map((a) => a.headers)).toEqual([h('1'), h('0'), h('0')]);
      expect(answers[2]?.headers).not.toHaveProperty('retry-after');
      // The next second starts afresh.
      t += 800;
      expect(call(route, ctx, CS2).status).toBe(200);
    });

    it('counts per marketplace and per simulator', () => {
      const route = dmarketRoutesWith({ now: () => START })[DMARKET_PATH]!;
      const ctx = context(10);
      call(route, ctx, CS2);
      call(route, ctx, CS2);
      expect(call(route, ctx, CS2).status).toBe(429);
      expect(call(route, { ...ctx, market: 'usd-4' }, CS2).status).toBe(200);
      expect(call(route, context(10), CS2).status).toBe(200);
    });
  });

  it('served by the simulator: JSON with the rate-limit headers; the third request in a second is a 429', async () => {
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
      formats: { [MARKET]: 'dmarket' },
    });
    try {
      expect(dmarketRoutes[DMARKET_PATH]).toBeDefined();
      const url = `${running.marketUrls[MARKET]}${DMARKET_PATH}?gameId=a8db&currency=USD&limit=5`;
      // Start at the beginning of a wall-clock second so that three requests fall into one.
      await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000)));
      const answers = await Promise.all([fetch(url), fetch(url), fetch(url)]);
      const statuses = answers.map((a) => a.status).sort();
      expect(statuses).toEqual([200, 200, 429]);
      const first = answers.find((a) => a.status === 200)!;
      expect(((await first.json()) as Body).objects).toHaveLength(5);
      expect(first.headers.get('ratelimit-limit')).toBe('2');
      expect(first.headers.get('x-ratelimit-limit-second')).toBe('2');
      for (const a of answers) if (!a.bodyUsed) await a.body?.cancel();
    } finally {
      await running.stop();
    }
  });
});

import { DAY_MS, Dec, type MarketSlug } from '@skinprices/domain';
import { describe, expect, it } from 'vitest';
import { generateCatalogue } from '../catalogue.js';
import { SimClock } from '../clock.js';
import { Extras } from '../extras.js';
import { formatMinor, MarketModel } from '../model.js';
import { truth } from '../truth.js';
import { formatSteamPrice, STEAM_MAX_COUNT, STEAM_RATE_LIMIT, steamMarketRoutes } from './steam-market.js';
import type { SimContext, UpstreamResponse } from './types.js';

const SEED = 5;
const START = Date.UTC(2026, 10, 20, 12);
const catalogue = generateCatalogue({ seed: SEED, size: 300 });

/** A fresh simulator state per test: the rate limit counts per model. */
function sim(market: MarketSlug = 'usd-4'): SimContext {
  const model = new MarketModel(catalogue, SEED);
  return { model, extras: new Extras(model), clock: new SimClock(START, 0), market };
}

const call = (ctx: SimContext, path: string, query: Record<string, string | number>): UpstreamResponse =>
  steamMarketRoutes[path]!(
    ctx,
    new URLSearchParams(Object.entries(query).map(([k, v]): [string, string] => [k, String(v)])),
    {
      headers: {},
    },
  );

/** A decimal string as Steam shows dollars, written independently of the code under test. */
const usd = (price: string): string => {
  const [whole, cents] = price.split('.') as [string, string];
  return `$${whole.replace(/\B(?=(\d{3})+$)/g, ',')}.${cents}`;
};

const SEARCH = '/market/search/render/';
const OVERVIEW = '/market/priceoverview/';
const page = (start: number, count = 100) => ({
  appid: 730,
  norender: 1,
  start,
  count,
  sort_column: 'name',
  sort_dir: 'asc',
  query: '',
  search_descriptions: 0,
});

interface Result {
  hash_name: string;
  sell_listings: number;
  sell_price: number;
  sell_price_text: string;
  asset_description: Record<string, unknown>;
}
interface SearchBody {
  success: boolean;
  start: number;
  pagesize: number;
  total_count: number;
  searchdata: Record<string, unknown>;
  results: Result[];
}

/** Every page of the catalogue, 100 at a time. */
function allPages(ctx: SimContext): Result[] {
  const out: Result[] = [];
  for (let start = 0; ;) {
    const res = call(ctx, SEARCH, page(start));
    expect(res.status).toBe(200);
    const body = res.body as SearchBody;
    out.push(...body.results);
    start += body.results.length;
    if (body.results.length === 0 || start >= body.total_count) return out;
  }
}

/** The truth of a market with phase rows merged per name: lowest price, summed count. */
function truthByName(ctx: SimContext): Map<string, { price: string | null; count: number }> {
  const rows = truth(ctx, ctx.market, 'listings', ctx.clock.now(), 0) as {
    market_hash_name: string;
    price: string | null;
    count: number;
  }[];
  const out = new Map<string, { price: string | null; count: number }>();
  for (const r of rows) {
    const cur = out.get(r.market_hash_name);
    if (!cur) out.set(r.market_hash_name, { price: r.price, count: r.count });
    else {
      cur.count += r.count;
      if (r.price !== null && (cur.price === null || new Dec(r.price).lessThan(cur.price))) cur.price = r.price;
    }
  }
  return out;
}

describe('steam-market simulator format', () => {
  it('formats prices as Steam does: grouping, ",--" for whole euros, "¥ "', () => {
    expect(formatSteamPrice(3, 'USD')).toBe('$0.03');
    expect(formatSteamPrice(1143, 'USD')).toBe('$11.43');
    expect(formatSteamPrice(123_456, 'USD')).toBe('$1,234.56');
    expect(formatSteamPrice(12_345_678, 'USD')).toBe('$123,456.78');
    expect(formatSteamPrice(1143, 'EUR')).toBe('11,43€');
    expect(formatSteamPrice(500, 'EUR')).toBe('5,--€');
    expect(formatSteamPrice(123_456, 'EUR')).toBe('1 234,56€');
    expect(formatSteamPrice(7150, 'CNY')).toBe('¥ 71.50');
    expect(formatSteamPrice(0, 'USD')).toBe('$0.00');
  });

  it('serves the truth aggregated by name: lowest price of the phases, their counts summed', () => {
    const ctx = sim();
    const results = allPages(ctx);
    const want = truthByName(ctx);
    expect(results.map((r) => r.hash_name)).toEqual([...want.keys()].sort());
    for (const r of results) {
      const t = want.get(r.hash_name)!;
      expect(
        { price: r.sell_price === 0 ? null : formatMinor(r.sell_price), count: r.sell_listings },
        r.hash_name,
      ).toEqual(t);
      expect(r.sell_price_text).toBe(usd(formatMinor(r.sell_price)));
      expect(r.asset_description).toMatchObject({
        appid: 730,
        market_hash_name: r.hash_name,
        market_name: r.hash_name,
      });
    }
    // The catalogue holds Doppler knives: several phase rows became one Steam item.
    const rows = truth(ctx, 'usd-4', 'listings', START, 0) as { market_hash_name: string; phase: string }[];
    const phased = rows.filter((r) => r.phase !== '');
    expect(phased.length).toBeGreaterThan(1);
    expect(new Set(phased.map((r) => r.market_hash_name)).size).toBeLessThan(phased.length);
    expect(results.length).toBeLessThan(rows.length);
  });

  it('pages with start and count: count capped at 100, default 10, total_count and searchdata', () => {
    const ctx = sim();
    const capped = call(ctx, SEARCH, page(0, 500)).body as SearchBody;
    expect(STEAM_MAX_COUNT).toBe(100);
    expect(capped.pagesize).toBe(100);
    expect(capped.results).toHaveLength(100);
    expect(capped.total_count).toBeGreaterThan(100);
    expect(capped.searchdata).toEqual({
      query: '',
      search_descriptions: false,
      total_count: capped.total_count,
      pagesize: 100,
      prefix: 'searchResults',
      class_prefix: 'market',
    });
    const { count: _c, ...noCount } = page(0);
    const byDefault = call(ctx, SEARCH, noCount).body as SearchBody;
    expect(byDefault.pagesize).toBe(10);
    expect(byDefault.results.map((r) => r.hash_name)).toEqual(capped.results.slice(0, 10).map((r) => r.hash_name));
    const second = call(ctx, SEARCH, page(100)).body as SearchBody;
    expect(second.start).toBe(100);
    expect(second.results[0]!.hash_name > capped.results[99]!.hash_name).toBe(true);
    const past = call(ctx, SEARCH, page(capped.total_count)).body as SearchBody;
    expect(past.results).toEqual([]);
    const desc = call(ctx, SEARCH, { ...page(0), sort_dir: 'desc' }).body as SearchBody;
    expect(desc.results[0]!.hash_name >= desc.results[1]!.hash_name).toBe(true);
  });

  it('without norender=1 answers HTML in the JSON; without appid 730 a 400', () => {
    const ctx = sim();
    const { norender: _n, ...html } = page(0);
    const body = call(ctx, SEARCH, html).body as Record<string, unknown>;
    expect(body.results).toBeUndefined();
    expect(body.results_html).toEqual(expect.stringContaining('market_listing_row'));
    expect(call(ctx, SEARCH, { ...page(0), appid: 570 }).status).toBe(400);
  });

  it('a EUR marketplace in this format answers in euros', () => {
    const ctx = sim('eu-a');
    const results = (call(ctx, SEARCH, page(0)).body as SearchBody).results;
    for (const r of results) expect(r.sell_price_text).toMatch(/^\d{1,3}( \d{3})*,(\d\d|--)€$/);
  });

  describe('the rate limit', () => {
    it(`answers request ${STEAM_RATE_LIMIT.requests + 1} within the window with a bare 429, per endpoint`, () => {
      const ctx = sim();
      for (let i = 0; i < STEAM_RATE_LIMIT.requests; i++) expect(call(ctx, SEARCH, page(0)).status).toBe(200);
      const refused = call(ctx, SEARCH, page(0));
      expect(refused).toEqual({ status: 429, body: null });
      // No Retry-After, no headers at all.
      expect(refused.headers).toBeUndefined();
      // priceoverview counts on its own.
      expect(call(ctx, OVERVIEW, { appid: 730, currency: 1, market_hash_name: 'x' }).status).toBe(500);
      expect(STEAM_RATE_LIMIT).toEqual({ requests: 20, windowMs: 60_000 });
    });

    it('the window slides on the simulator clock, and knocking during a ban keeps it going', () => {
      const ctx = sim();
      for (let i = 0; i < STEAM_RATE_LIMIT.requests; i++) call(ctx, SEARCH, page(0));
      ctx.clock.advance(50_000);
      for (let i = 0; i < STEAM_RATE_LIMIT.requests; i++) expect(call(ctx, SEARCH, page(0)).status).toBe(429);
      // The first 20 left the window, the 20 knocks did not.
      ctx.clock.advance(11_000);
      expect(call(ctx, SEARCH, page(0)).status).toBe(429);
      ctx.clock.advance(STEAM_RATE_LIMIT.windowMs);
      expect(call(ctx, SEARCH, page(0)).status).toBe(200);
    });

    it('a quiet minute ends the ban', () => {
      const ctx = sim();
      for (let i = 0; i <= STEAM_RATE_LIMIT.requests; i++) call(ctx, SEARCH, page(0));
      expect(call(ctx, SEARCH, page(0)).status).toBe(429);
      ctx.clock.advance(STEAM_RATE_LIMIT.windowMs);
      expect(call(ctx, SEARCH, page(0)).status).toBe(200);
    });
  });

  describe('priceoverview', () => {
    it('the lowest price of the name, the 24-hour volume and median of its sales, as formatted strings', () => {
      const ctx = sim();
      const now = ctx.clock.now();
      const sold = new Map<string, number[]>();
      for (const s of ctx.extras.sales('usd-4', now - DAY_MS, now))
        sold.set(s.item.marketHashName, [...(sold.get(s.item.marketHashName) ?? []), s.priceMinor]);
      const want = truthByName(ctx);
      const [name, prices] = [...sold.entries()].find(([n, p]) => p.length >= 3 && want.get(n)?.price)!;
      const res = call(ctx, OVERVIEW, { appid: 730, currency: 1, market_hash_name: name });
      expect(res.status).toBe(200);
      expect(res.headers).toEqual({ 'cache-control': 'public,max-age=15' });
      const sorted = [...prices].sort((a, b) => a - b);
      expect(res.body).toEqual({
        success: true,
        lowest_price: usd(want.get(name)!.price!),
        volume: String(prices.length),
        median_price: formatSteamPrice(sorted[Math.floor((sorted.length - 1) / 2)]!, 'USD'),
      });
    });

    it('leaves out volume and median without sales; HTTP 500 {success:false} for an unknown name or currency', () => {
      const ctx = sim();
      const now = ctx.clock.now();
      const soldNames = new Set(ctx.extras.sales('usd-4', now - DAY_MS, now).map((s) => s.item.marketHashName));
      const [name, t] = [...truthByName(ctx)].find(([n, x]) => !soldNames.has(n) && x.price !== null)!;
      expect(call(ctx, OVERVIEW, { appid: 730, currency: 1, market_hash_name: name }).body).toEqual({
        success: true,
        lowest_price: usd(t.price!),
      });
      const unknown = { status: 500, body: { success: false } };
      expect(call(ctx, OVERVIEW, { appid: 730, currency: 1, market_hash_name: 'No Such Item' })).toEqual(unknown);
      expect(call(ctx, OVERVIEW, { appid: 730, currency: 3, market_hash_name: name })).toEqual(unknown);
    });
  });
});

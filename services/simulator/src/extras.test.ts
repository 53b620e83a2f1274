import { DAY_MS, type MarketSlug } from '@skinprices/domain';
import { describe, expect, it } from 'vitest';
import { generateCatalogue, type CatalogueItem } from './catalogue.js';
import { Extras, TIERS, type BuyOrderTruth, type SaleTruth } from './extras.js';
import { BUCKET_MS, MarketModel, marketIndex } from './model.js';
import { PURPOSE, unit } from './noise.js';

const SEED = 5;
/** Large enough for Case Hardened / Fade rows on cn-b; still fast. */
const SIZE = 600;
const T0 = Date.UTC(2025, 0, 6);
const HOUR = 3_600_000;
const at = T0 + 2 * DAY_MS + 5 * HOUR + 12_345;

const catalogue = generateCatalogue({ seed: SEED, size: SIZE });
const model = new MarketModel(catalogue, SEED);
const extras = new Extras(model);

const TIER_FINISH = /\| (Case Hardened|Fade|Marble Fade|Crimson Web|Heat Treated)\b/;

/**
 * The bid of the orders that name this row (its phase or none), as extras.ts draws it: a share of
 * the price level, none for some rows. Restated here so the general (phase-less) order can be
 * checked against what the phase rows show.
 */
function ownBid(item: CatalogueItem, market: MarketSlug, t: number): number | null {
  const u = unit(SEED, PURPOSE.bid, item.index, marketIndex(market), Math.floor(Math.floor(t / BUCKET_MS) / 3));
  if (u < 0.08) return null;
  return Math.max(1, Math.round(model.priceLevelMinor(item, market, t) * (0.72 + 0.2 * u)));
}

const saleKey = (s: SaleTruth) => `${s.saleId}@${s.soldAt}:${s.priceMinor}`;

describe('Extras: buy orders', () => {
  it('bids below the listing price of the same item (bids below asks)', () => {
    for (const market of ['cn-a', 'cn-b'] as const) {
      const asks = new Map(model.listings(market, at).map((l) => [l.item.index, l.priceMinor]));
      let compared = 0;
      let below = 0;
      for (const b of extras.buyOrders(market, at)) {
        const ask = asks.get(b.item.index);
        if (b.tier !== null || b.priceMinor === null || ask === null || ask === undefined) continue;
        compared++;
        if (b.priceMinor < ask) below++;
      }
      expect(compared).toBeGreaterThan(100);
      expect(below / compared).toBeGreaterThan(0.95);
    }
  });

  it('gives only listed items a buy order, every price a positive integer', () => {
    for (const b of extras.buyOrders('cn-a', at)) {
      expect(model.listed(b.item, 'cn-a')).toBe(true);
      if (b.priceMinor !== null) {
        expect(Number.isSafeInteger(b.priceMinor) && b.priceMinor > 0).toBe(true);
      }
      if (b.blueMinor !== null) expect(b.blueMinor).toBeGreaterThanOrEqual(b.priceMinor ?? Infinity);
    }
  });

  it('has tier rows T1..T3 on cn-b only for phase-less Case Hardened / Fade / … items', () => {
    const orders = extras.buyOrders('cn-b', at);
    const tierRows = orders.filter((b) => b.tier !== null);
    expect(tierRows.length).toBeGreaterThan(0);
    const byItem = new Map<number, BuyOrderTruth[]>();
    for (const b of tierRows) byItem.set(b.item.index, [...(byItem.get(b.item.index) ?? []), b]);
    for (const rows of byItem.values()) {
      const item = (rows[0] as BuyOrderTruth).item;
      expect(item.marketHashName).toMatch(TIER_FINISH);
      expect(item.phase).toBe('');
      expect(rows.map((r) => r.tier)).toEqual([...TIERS]);
      // The item's own (general) row is there as well and has a bid.
      const general = orders.find((b) => b.item.index === item.index && b.tier === null);
      expect(general?.priceMinor).not.toBeNull();
    }
    // Pattern tiers are a cn-b feature.
    expect(extras.buyOrders('cn-a', at).filter((b) => b.tier !== null)).toEqual([]);
  });

  it("gives a phase row a bid at least the name's general bid", () => {
    const all = extras.buyOrders('cn-a', at);
    // The restated draw matches what a phase-less row shows, so the general bid below is sound.
    for (const b of all.filter((x) => x.item.phase === '').slice(0, 50)) {
      expect(b.priceMinor).toBe(ownBid(b.item, 'cn-a', at));
    }
    const orders = all.filter((b) => b.tier === null && b.item.phase !== '');
    expect(orders.length).toBeGreaterThan(0);
    const names = new Set(orders.map((b) => b.item.marketHashName));
    let checked = 0;
    for (const name of names) {
      const rows = orders.filter((b) => b.item.marketHashName === name);
      const own = rows.map((b) => ownBid(b.item, 'cn-a', at)).filter((x): x is number => x !== null);
      if (own.length === 0) continue;
      const general = Math.max(1, Math.round(Math.min(...own) * 0.85));
      for (const b of rows) {
        // A phase without an order of its own is still bought by the general order.
        expect(b.priceMinor).not.toBeNull();
        expect(b.priceMinor).toBeGreaterThanOrEqual(general);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(0);
  });
});

describe('Extras: float ranges', () => {
  it('prices a lower float range at least as high as a higher one', () => {
    const rows = extras.floatRanges('cn-a', at);
    expect(rows.length).toBeGreaterThan(0);
    const byItem = new Map<number, typeof rows>();
    for (const r of rows) byItem.set(r.item.index, [...(byItem.get(r.item.index) ?? []), r]);
    for (const ranges of byItem.values()) {
      const priced = ranges
        .filter((r) => r.firstMinor !== null)
        .sort((a, b) => Number(a.floatMin) - Number(b.floatMin));
      for (let i = 1; i < priced.length; i++) {
        expect((priced[i - 1] as (typeof priced)[number]).firstMinor).toBeGreaterThanOrEqual(
          (priced[i] as (typeof priced)[number]).firstMinor as number,
        );
      }
    }
  });

  it('splits exactly the listing count over the ranges, ranges inside their wear', () => {
    for (const market of ['cn-a', 'cn-b', 'cn-c'] as const) {
      const listings = new Map(model.listings(market, at).map((l) => [l.item.index, l]));
      const sums = new Map<number, number>();
      for (const r of extras.floatRanges(market, at)) {
        expect(r.count).toBeGreaterThanOrEqual(0);
        expect(Number(r.floatMin)).toBeLessThan(Number(r.floatMax));
        if (r.count === 0) expect(r.firstMinor).toBeNull();
        if (r.fifthMinor !== null) expect(r.count).toBeGreaterThanOrEqual(5);
        sums.set(r.item.index, (sums.get(r.item.index) ?? 0) + r.count);
      }
      expect(sums.size).toBeGreaterThan(0);
      for (const [index, sum] of sums) expect(sum).toBe(listings.get(index)?.count);
    }
  });
});

describe('Extras: sales', () => {
  const from = T0 + DAY_MS + 123_457; // not on a bucket nor a second boundary
  const to = from + 3 * HOUR + 789;

  it('only returns sales sold in [from, to), at whole seconds, in time order', () => {
    const sales = extras.sales('cn-a', from, to);
    expect(sales.length).toBeGreaterThan(10);
    for (const s of sales) {
      expect(s.soldAt).toBeGreaterThanOrEqual(from);
      expect(s.soldAt).toBeLessThan(to);
      expect(s.soldAt % 1000).toBe(0);
      expect(Number.isSafeInteger(s.priceMinor) && s.priceMinor > 0).toBe(true);
    }
    const times = sales.map((s) => s.soldAt);
    expect(times).toEqual([...times].sort((a, b) => a - b));
    expect(new Set(sales.map((s) => s.saleId)).size).toBe(sales.length);
  });

  it('is deterministic: twice and on another model instance', () => {
    const again = new Extras(new MarketModel(generateCatalogue({ seed: SEED, size: SIZE }), SEED));
    const a = extras.sales('cn-b', from, to);
    expect(extras.sales('cn-b', from, to)).toEqual(a);
    expect(again.sales('cn-b', from, to)).toEqual(a);
  });

  it('splitting a window in two gives the same union', () => {
    const whole = extras.sales('usd-1', from, to);
    for (const mid of [from + 1, from + 61 * 60_000 + 500, from + 2 * HOUR, to - 1]) {
      const parts = [...extras.sales('usd-1', from, mid), ...extras.sales('usd-1', mid, to)];
      expect(parts.map(saleKey)).toEqual(whole.map(saleKey));
    }
  });

  it('returns nothing for an empty window', () => {
    expect(extras.sales('cn-a', from, from)).toEqual([]);
  });
});

describe('Extras: history', () => {
  it('closes equal the listing price at the end of that day', () => {
    const day = Math.floor(at / DAY_MS) - 1;
    const end = (day + 1) * DAY_MS - 1;
    const rows = extras.history('hist-a', day);
    expect(rows.length).toBeGreaterThan(100);
    for (const h of rows) {
      expect(h.day).toBe(day);
      const l = model.listing(h.item, 'hist-a', end);
      expect(l?.priceMinor).toBe(h.closeMinor);
      expect(l?.count).toBe(h.volume);
    }
    // Every priced listing at the day's end has its close.
    const priced = model.listings('hist-a', end).filter((l) => l.priceMinor !== null);
    expect(rows.length).toBe(priced.length);
  });
});

describe('Extras: hourly history', () => {
  const day = Math.floor(at / DAY_MS) - 1;

  it('candles of every closed hour: close = the listing at the hour end, open/high/low over the priced samples', () => {
    const rows = extras.hourly('cn-a', day, at);
    expect(rows.length).toBeGreaterThan(100);
    let hours = 0;
    for (const r of rows) {
      for (const h of r.hours) {
        hours++;
        expect(h.hour % HOUR).toBe(0);
        expect(Math.floor(h.hour / DAY_MS)).toBe(day);
        const end = model.listing(r.item, 'cn-a', h.hour + HOUR - 1);
        expect(end?.priceMinor).toBe(h.closeMinor);
        expect(end?.count).toBe(h.volume);
        const open = model.listing(r.item, 'cn-a', h.hour)?.priceMinor;
        if (open !== null && open !== undefined) expect(h.openMinor).toBe(open);
        expect(h.lowMinor).toBeLessThanOrEqual(Math.min(h.openMinor, h.closeMinor));
        expect(h.highMinor).toBeGreaterThanOrEqual(Math.max(h.openMinor, h.closeMinor));
      }
      expect(r.hours.map((h) => h.hour)).toEqual([...r.hours.map((h) => h.hour)].sort((a, b) => a - b));
    }
    // Most items are priced most hours: 24 per item but for the hours their listing vanished.
    expect(hours / rows.length).toBeGreaterThan(20);
    // The last hour's close is the day's close (the daily endpoint's).
    const closes = new Map(extras.history('cn-a', day).map((h) => [h.item.index, h.closeMinor]));
    for (const r of rows) {
      const last = r.hours.at(-1)!;
      if (last.hour === day * DAY_MS + 23 * HOUR) expect(closes.get(r.item.index)).toBe(last.closeMinor);
    }
  });

  it('only hours that ended before `before`', () => {
    const today = Math.floor(at / DAY_MS);
    const rows = extras.hourly('cn-a', today, at);
    const latest = Math.max(...rows.flatMap((r) => r.hours.map((h) => h.hour)));
    expect(latest + HOUR).toBeLessThanOrEqual(at);
    expect(latest + 2 * HOUR).toBeGreaterThan(at);
  });
});

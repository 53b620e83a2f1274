import { MARKET_SLUGS, type MarketSlug } from '@skinprices/domain';
import { describe, expect, it } from 'vitest';
import { generateCatalogue, type CatalogueItem } from './catalogue.js';
import { BUCKET_MS, MarketModel, formatMinor, type ListingTruth } from './model.js';

const SEED = 11;
const SIZE = 300;
/** Monday 2025-01-06 00:00 UTC: aligned to a day and to a 10-minute bucket. */
const T0 = Date.UTC(2025, 0, 6);
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

const catalogue = generateCatalogue({ seed: SEED, size: SIZE });
const newModel = (): MarketModel => new MarketModel(catalogue, SEED);

/** A listing as plain data, so two snapshots compare by value and not by row identity. */
const plain = (ls: readonly ListingTruth[]) =>
  ls.map((l) => ({ name: l.item.marketHashName, phase: l.item.phase, price: l.priceMinor, count: l.count }));

const byIndex = (ls: readonly ListingTruth[]): Map<number, ListingTruth> => new Map(ls.map((l) => [l.item.index, l]));

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const geoMean = (xs: readonly number[]): number => Math.exp(xs.reduce((s, x) => s + Math.log(x), 0) / xs.length);

describe('MarketModel: determinism', () => {
  it('gives identical listings for the same seed at the same time', () => {
    const a = new MarketModel(generateCatalogue({ seed: SEED, size: SIZE }), SEED);
    const b = new MarketModel(generateCatalogue({ seed: SEED, size: SIZE }), SEED);
    for (const market of ['cn-a', 'eu-b', 'usd-3', 'store'] as const) {
      expect(plain(a.listings(market, T0 + 5 * HOUR))).toEqual(plain(b.listings(market, T0 + 5 * HOUR)));
    }
  });

  it('gives different listings for a different seed', () => {
    const other = new MarketModel(generateCatalogue({ seed: SEED + 1, size: SIZE }), SEED + 1);
    expect(plain(other.listings('cn-a', T0))).not.toEqual(plain(newModel().listings('cn-a', T0)));
    // Even over the very same catalogue the model seed alone changes prices.
    const sameRows = new MarketModel(catalogue, SEED + 1);
    expect(plain(sameRows.listings('cn-a', T0))).not.toEqual(plain(newModel().listings('cn-a', T0)));
  });

  it('returns equal listings when called twice (cache) and across two model instances', () => {
    const model = newModel();
    const t = T0 + 3 * DAY + 17 * 60_000;
    const first = plain(model.listings('cn-b', t));
    expect(plain(model.listings('cn-b', t))).toEqual(first);
    expect(plain(newModel().listings('cn-b', t))).toEqual(first);
    // listing() of each row agrees with the snapshot listings() returns.
    for (const l of model.listings('cn-b', t)) expect(model.listing(l.item, 'cn-b', t)).toEqual(l);
  });

  it('computes any moment directly: a model that never saw earlier times agrees with one that did', () => {
    const walked = newModel();
    for (let t = T0; t < T0 + 2 * DAY; t += 6 * HOUR) walked.listings('usd-1', t);
    expect(plain(newModel().listings('usd-1', T0 + 2 * DAY))).toEqual(plain(walked.listings('usd-1', T0 + 2 * DAY)));
  });
});

describe('MarketModel: prices are integer minor units', () => {
  it('lists positive integer prices with a positive count, or null with count 0', () => {
    const model = newModel();
    for (const market of MARKET_SLUGS) {
      for (const l of model.listings(market, T0 + 7 * HOUR)) {
        if (l.priceMinor === null) {
          expect(l.count).toBe(0);
        } else {
          expect(Number.isSafeInteger(l.priceMinor)).toBe(true);
          expect(l.priceMinor).toBeGreaterThan(0);
          expect(Number.isSafeInteger(l.count)).toBe(true);
          expect(l.count).toBeGreaterThanOrEqual(1);
        }
      }
    }
  });

  it('formatMinor prints exactly two decimals', () => {
    expect(formatMinor(1)).toBe('0.01');
    expect(formatMinor(0)).toBe('0.00');
    expect(formatMinor(10)).toBe('0.10');
    expect(formatMinor(100)).toBe('1.00');
    expect(formatMinor(12345)).toBe('123.45');
    expect(formatMinor(900_719_925_474_099)).toBe('9007199254740.99');
  });

  it('formatMinor refuses negatives and non-integers', () => {
    for (const bad of [-1, 1.5, 0.1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
      expect(() => formatMinor(bad)).toThrow();
    }
  });
});

describe('MarketModel: prices move', () => {
  it('changes most listed items at least once over 7 days sampled hourly', () => {
    const model = newModel();
    const items = model.listings('cn-a', T0).map((l) => l.item);
    let changed = 0;
    for (const item of items) {
      const prices = new Set<number>();
      for (let t = T0; t < T0 + 7 * DAY; t += HOUR) {
        const p = model.priceLevelMinor(item, 'cn-a', t);
        prices.add(p);
      }
      if (prices.size > 1) changed++;
    }
    expect(changed / items.length).toBeGreaterThan(0.8);
  });

  it('does not change every item in every bucket', () => {
    const model = newModel();
    const items = model.listings('usd-1', T0).map((l) => l.item);
    let transitions = 0;
    let changes = 0;
    for (const item of items) {
      let prev = model.priceLevelMinor(item, 'usd-1', T0);
      for (let b = 1; b <= 144; b++) {
        const p = model.priceLevelMinor(item, 'usd-1', T0 + b * BUCKET_MS);
        transitions++;
        if (p !== prev) changes++;
        prev = p;
      }
    }
    expect(changes).toBeGreaterThan(0);
    // Item-specific change probability is at most 27 % a bucket; far from "always".
    expect(changes / transitions).toBeLessThan(0.5);
  });

  it('is piecewise constant within a 10-minute bucket', () => {
    const model = newModel();
    for (const bucketStart of [T0, T0 + 13 * BUCKET_MS, T0 + 2 * DAY + 77 * BUCKET_MS]) {
      const early = model.listings('cn-b', bucketStart);
      const late = newModel().listings('cn-b', bucketStart + BUCKET_MS - 1);
      expect(plain(late)).toEqual(plain(early));
      for (const item of catalogue.slice(0, 40)) {
        expect(model.listing(item, 'eu-a', bucketStart + BUCKET_MS - 1)).toEqual(
          model.listing(item, 'eu-a', bucketStart),
        );
      }
    }
  });
});

describe('MarketModel: coverage and currencies', () => {
  it('lists more items on cn-a than on eu-b', () => {
    const model = newModel();
    const cnA = model.listings('cn-a', T0).length;
    const euB = model.listings('eu-b', T0).length;
    expect(cnA).toBeGreaterThan(euB);
    expect(cnA).toBeGreaterThan(catalogue.length * 0.85);
    expect(euB).toBeLessThan(catalogue.length * 0.75);
  });

  it('lists no phase rows on the store', () => {
    const model = newModel();
    expect(catalogue.some((i) => i.phase !== '')).toBe(true);
    for (let t = T0; t < T0 + DAY; t += 6 * HOUR) {
      expect(model.listings('store', t).filter((l) => l.item.phase !== '')).toEqual([]);
    }
    for (const item of catalogue.filter((i) => i.phase !== '')) expect(model.listed(item, 'store')).toBe(false);
  });

  /** Price ratio market a / market b per item listed with a price on both, at a few times. */
  function ratios(model: MarketModel, a: MarketSlug, b: MarketSlug): number[] {
    const out: number[] = [];
    for (let t = T0; t < T0 + 3 * DAY; t += DAY) {
      const onB = byIndex(model.listings(b, t));
      for (const la of model.listings(a, t)) {
        const lb = onB.get(la.item.index);
        if (la.priceMinor !== null && lb?.priceMinor != null) out.push(la.priceMinor / lb.priceMinor);
      }
    }
    return out;
  }

  it('prices a CN market several times the USD market (CNY at about 7.1 per USD)', () => {
    const r = ratios(newModel(), 'cn-a', 'usd-1');
    expect(r.length).toBeGreaterThan(100);
    expect(geoMean(r)).toBeGreaterThan(6);
    expect(geoMean(r)).toBeLessThan(8.5);
    expect(median(r)).toBeGreaterThan(5);
  });

  it('prices an EUR market below the USD market (EUR at about 0.93 per USD)', () => {
    const r = ratios(newModel(), 'eu-a', 'usd-1');
    expect(r.length).toBeGreaterThan(100);
    expect(geoMean(r)).toBeLessThan(1);
    expect(geoMean(r)).toBeGreaterThan(0.8);
  });
});

describe('MarketModel: listings vanish and return', () => {
  it('has items with no listing at some hours and a price at others', () => {
    const model = newModel();
    const states = new Map<number, { none: number; priced: number }>();
    for (let t = T0; t < T0 + 7 * DAY; t += HOUR) {
      for (const l of model.listings('cn-b', t)) {
        const s = states.get(l.item.index) ?? { none: 0, priced: 0 };
        if (l.priceMinor === null) {
          expect(l.count).toBe(0);
          s.none++;
        } else {
          s.priced++;
        }
        states.set(l.item.index, s);
      }
    }
    const flickering = [...states.values()].filter((s) => s.none > 0 && s.priced > 0);
    expect(flickering.length).toBeGreaterThan(0);
    // Vanishing is the exception: most hours most items are listed.
    const none = [...states.values()].reduce((n, s) => n + s.none, 0);
    const priced = [...states.values()].reduce((n, s) => n + s.priced, 0);
    expect(none / (none + priced)).toBeLessThan(0.15);
  });
});

describe('MarketModel: overrides', () => {
  const at = T0 + DAY + 25 * 60_000 + 1_234; // inside a bucket, not at its start

  function listedItem(model: MarketModel, market: MarketSlug): CatalogueItem {
    const l = model.listings(market, at).find((x) => x.priceMinor !== null);
    if (!l) throw new Error(`no priced listing on ${market}`);
    return l.item;
  }

  it('returns the override from its `from` time on, and the model before it', () => {
    const model = newModel();
    const item = listedItem(model, 'cn-b');
    const before = model.listing(item, 'cn-b', at - 1);
    const beforeAll = plain(model.listings('cn-b', at - 1));
    model.setOverride('cn-b', item, { priceMinor: 424_242, count: 9, from: at });

    expect(model.listing(item, 'cn-b', at - 1)).toEqual(before);
    expect(plain(model.listings('cn-b', at - 1))).toEqual(beforeAll);
    for (const t of [at, at + 1, at + DAY]) {
      expect(model.listing(item, 'cn-b', t)).toMatchObject({ priceMinor: 424_242, count: 9 });
      const row = model.listings('cn-b', t).find((l) => l.item.index === item.index);
      expect(row).toMatchObject({ priceMinor: 424_242, count: 9 });
    }
    // Other markets are untouched.
    expect(model.listing(item, 'cn-a', at)).toEqual(newModel().listing(item, 'cn-a', at));
  });

  it('an override to null removes the listing (count 0)', () => {
    const model = newModel();
    const item = listedItem(model, 'usd-2');
    model.setOverride('usd-2', item, { priceMinor: null, count: 5, from: at });
    expect(model.listing(item, 'usd-2', at)).toMatchObject({ priceMinor: null, count: 0 });
    expect(model.listings('usd-2', at).find((l) => l.item.index === item.index)).toMatchObject({
      priceMinor: null,
      count: 0,
    });
  });

  it('makes an item the market does not list appear, in catalogue order', () => {
    const model = newModel();
    const item = catalogue.find((i) => !model.listed(i, 'eu-b'));
    if (!item) throw new Error('eu-b lists the whole catalogue');
    expect(model.listing(item, 'eu-b', at)).toBeUndefined();
    expect(model.listings('eu-b', at).some((l) => l.item.index === item.index)).toBe(false);

    model.setOverride('eu-b', item, { priceMinor: 777, count: 2, from: at });
    expect(model.listing(item, 'eu-b', at - 1)).toBeUndefined();
    expect(model.listing(item, 'eu-b', at)).toMatchObject({ priceMinor: 777, count: 2 });
    const rows = model.listings('eu-b', at);
    expect(rows.find((l) => l.item.index === item.index)).toMatchObject({ priceMinor: 777, count: 2 });
    const indexes = rows.map((l) => l.item.index);
    expect(indexes).toEqual([...indexes].sort((a, b) => a - b));
    expect(rows.length).toBe(newModel().listings('eu-b', at).length + 1);
  });

  it('clearOverrides restores the model', () => {
    const model = newModel();
    const expected = plain(newModel().listings('cn-b', at));
    const item = listedItem(model, 'cn-b');
    model.setOverride('cn-b', item, { priceMinor: 1, count: 1, from: at - HOUR });
    expect(plain(model.listings('cn-b', at))).not.toEqual(expected);
    model.clearOverrides();
    expect(plain(model.listings('cn-b', at))).toEqual(expected);
    expect(model.listing(item, 'cn-b', at)).toEqual(newModel().listing(item, 'cn-b', at));
  });
});

describe('MarketModel: caches while overrides exist', () => {
  it('memo and listings follow an override that comes in force inside a bucket, and cache otherwise', () => {
    const model = newModel();
    const item = catalogue[0] as CatalogueItem;
    let computed = 0;
    const compute = () => ++computed;
    model.setOverride('cn-a', item, { priceMinor: 4_242, count: 1, from: T0 + 60_000 });
    // Before the override holds: one computation for every page of the bucket.
    expect(model.memo('cn-a', 'all', T0, compute)).toBe(1);
    expect(model.memo('cn-a', 'all', T0 + 30_000, compute)).toBe(1);
    // In force from T0 + 1 min, the same bucket: computed again, then cached again.
    expect(model.memo('cn-a', 'all', T0 + 90_000, compute)).toBe(2);
    expect(model.memo('cn-a', 'all', T0 + 120_000, compute)).toBe(2);
    const before = model.listings('cn-a', T0 + 30_000).find((l) => l.item.index === item.index);
    const after = model.listings('cn-a', T0 + 90_000);
    expect(before?.priceMinor).not.toBe(4_242);
    expect(after.find((l) => l.item.index === item.index)?.priceMinor).toBe(4_242);
    expect(model.listings('cn-a', T0 + 95_000)).toBe(after); // the merged list is cached
    // A new override (a new set) is seen at once.
    model.setOverride('cn-a', item, { priceMinor: 5_353, count: 1, from: T0 + 60_000 });
    expect(model.listings('cn-a', T0 + 95_000).find((l) => l.item.index === item.index)?.priceMinor).toBe(5_353);
    expect(model.memo('cn-a', 'all', T0 + 120_000, compute)).toBe(3);
  });

  it("one marketplace's overrides leave another's collections cached", () => {
    const model = newModel();
    const item = catalogue[0] as CatalogueItem;
    let computed = 0;
    const compute = () => ++computed;
    expect(model.memo('cn-b', 'all', T0, compute)).toBe(1);
    expect(model.memo('cn-a', 'all', T0, compute)).toBe(2);
    model.setOverride('cn-a', item, { priceMinor: 4_242, count: 1, from: T0 });
    expect(model.memo('cn-b', 'all', T0 + 1_000, compute)).toBe(1);
    expect(model.memo('cn-a', 'all', T0 + 1_000, compute)).toBe(3);
    model.clearOverrides();
    expect(model.memo('cn-b', 'all', T0 + 2_000, compute)).toBe(1);
    expect(model.memo('cn-a', 'all', T0 + 2_000, compute)).toBe(4);
    // A collection that reads no listings (buy orders) stays cached through overrides.
    expect(model.memo('cn-a', 'bids', T0 + 2_000, compute, false)).toBe(5);
    model.setOverride('cn-a', item, { priceMinor: 5_353, count: 1, from: T0 });
    expect(model.memo('cn-a', 'bids', T0 + 3_000, compute, false)).toBe(5);
  });
});

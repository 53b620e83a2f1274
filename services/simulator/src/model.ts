/**
 * The simulated marketplaces' true state, as a pure function of (catalogue, market, time) plus
 * explicit overrides. Prices are integer minor units (cents, fen) here; they become decimal
 * strings only through `formatMinor`, so no price is ever a fractional JS number.
 *
 * Price model: an item's price changes at random moments (per 10-minute bucket with an
 * item-specific probability, and at least once a day); at each change it takes the value of a
 * multi-scale noise "walk" (hours to months, plus a market-wide factor shared by all items), so
 * it wanders like a random walk yet is computable for any moment in O(1).
 */
import type { Currency, MarketSlug, PhaseOrNone } from '@skinprices/domain';
import { getMarket, identityKey, marketItemKey, MARKETS } from '@skinprices/domain';
import type { CatalogueItem } from './catalogue.js';
import { PURPOSE, unit, valueNoise } from './noise.js';

export const BUCKET_MS = 10 * 60_000;
/** A change point at least this often, so looking back for the last one is bounded. */
const FORCED_CHANGE_BUCKETS = 144;

/** Native units per US dollar: CNY and EUR markets price the same item in their own currency. */
const FX: Record<Currency, number> = { USD: 1, CNY: 7.1, EUR: 0.93 };

interface Profile {
  /** Share of the catalogue listed on this marketplace. */
  coverage: number;
  /** Scales listing counts (a big marketplace has more listings per item). */
  depth: number;
}

/** A marketplace the descriptor gains by configuration, without a profile of its own here. */
const DEFAULT_PROFILE: Profile = { coverage: 0.6, depth: 0.5 };

const PROFILES: Partial<Record<MarketSlug, Profile>> = {
  'cn-a': { coverage: 0.97, depth: 1.6 },
  'cn-b': { coverage: 0.93, depth: 1.3 },
  'cn-c': { coverage: 0.75, depth: 0.6 },
  'cn-d': { coverage: 0.6, depth: 0.4 },
  'eu-a': { coverage: 0.85, depth: 0.7 },
  'eu-b': { coverage: 0.55, depth: 0.3 },
  'usd-1': { coverage: 0.8, depth: 0.8 },
  'usd-2': { coverage: 0.7, depth: 0.5 },
  'usd-3': { coverage: 0.65, depth: 0.4 },
  'usd-4': { coverage: 0.6, depth: 0.3 },
  'usd-5': { coverage: 0.5, depth: 0.3 },
  'usd-6': { coverage: 0.45, depth: 0.2 },
  store: { coverage: 1, depth: 2 },
  'hist-a': { coverage: 0.9, depth: 1 },
};

/** Walk octaves: [period in buckets, amplitude of log-price]. */
const OCTAVES: readonly (readonly [number, number])[] = [
  [6, 0.015],
  [36, 0.03],
  [144, 0.05],
  [1008, 0.07],
  [4320, 0.12],
];

export interface Override {
  /** Integer minor units, or null for "no listing". */
  priceMinor: number | null;
  count: number;
  /** Simulated time from which the override holds. */
  from: number;
}

export interface ListingTruth {
  item: CatalogueItem;
  /** Integer minor units; null when there is no active listing. */
  priceMinor: number | null;
  count: number;
}

export const marketIndex = (slug: MarketSlug): number => MARKETS.findIndex((m) => m.slug === slug);

function overrideKey(market: string, name: string, phase: PhaseOrNone | string): string {
  return marketItemKey(market, name, phase);
}

/** Integer minor units → fixed-point string with 2 decimals ("12345" → "123.45"). */
export function formatMinor(minor: number): string {
  if (!Number.isSafeInteger(minor) || minor < 0) throw new Error(`not a minor-unit amount: ${minor}`);
  const s = String(minor).padStart(3, '0');
  return `${s.slice(0, -2)}.${s.slice(-2)}`;
}

export class MarketModel {
  private readonly overrides = new Map<string, Override & { market: MarketSlug; item: CatalogueItem }>();
  private readonly byIdentity: ReadonlyMap<string, CatalogueItem>;
  private readonly memos = new Map<string, unknown>();
  /**
   * Per marketplace, moved by every change to its overrides: a marketplace's collections depend
   * on its own overrides only, so a price change set on one must not make every other one
   * recompute (one global version did: the benchmark's overrides, each invalidating every
   * marketplace's buy orders, float ranges and order books, made the simulator the busiest
   * process of the run, 130 CPU-s of a freshness phase).
   */
  private readonly versions = new Map<MarketSlug, number>();
  /** Row index of the first row of each name: phase rows of one name share the upstream ids. */
  readonly nameIndex: ReadonlyMap<string, number>;
  /** Snapshot cache per (market, bucket): pages of one poll cycle read the same state. */
  private readonly cache = new Map<string, ListingTruth[]>();
  /** The same with the overrides in force merged in, per (market, bucket, version, in force). */
  private readonly merged = new Map<string, ListingTruth[]>();

  constructor(
    readonly catalogue: readonly CatalogueItem[],
    readonly seed: number,
  ) {
    this.byIdentity = new Map(catalogue.map((i) => [identityKey(i), i]));
    const names = new Map<string, number>();
    for (const i of catalogue) if (!names.has(i.marketHashName)) names.set(i.marketHashName, i.index);
    this.nameIndex = names;
  }

  /** How liquid an item is, 0..1: cheap items trade constantly, a Black Pearl rarely. */
  liquidity(item: CatalogueItem): number {
    const usd = item.basePriceCents / 100;
    return Math.min(1, Math.max(0.02, 1 / Math.sqrt(1 + usd / 5)));
  }

  listed(item: CatalogueItem, market: MarketSlug): boolean {
    // The first-party store does not tell phases apart, so it cannot list a phase row.
    if (market === 'store' && item.phase !== '') return false;
    return (
      unit(this.seed, PURPOSE.coverage, item.index, marketIndex(market)) <
      (PROFILES[market] ?? DEFAULT_PROFILE).coverage
    );
  }

  /** The bucket of the last price change at or before bucket `b`. */
  lastChange(item: CatalogueItem, m: number, b: number): number {
    const p = 0.02 + 0.25 * this.liquidity(item);
    for (let c = b; c > b - FORCED_CHANGE_BUCKETS; c--) {
      if (c % FORCED_CHANGE_BUCKETS === 0 || unit(this.seed, PURPOSE.change, item.index, m, c) < p) return c;
    }
    return b - (((b % FORCED_CHANGE_BUCKETS) + FORCED_CHANGE_BUCKETS) % FORCED_CHANGE_BUCKETS);
  }

  /** Log-price offset of the walk at change bucket `c`. */
  walk(item: CatalogueItem, m: number, c: number): number {
    let w = 0;
    for (const [period, amp] of OCTAVES)
      w += amp * valueNoise(c / period, this.seed, PURPOSE.walk, item.index, m, period);
    // The whole market moves a little together (what a market-cap index should show).
    w += 0.04 * valueNoise(c / 288, this.seed, PURPOSE.market, m);
    return w;
  }

  /** The price level of an item on a market at time t, ignoring whether it is listed. */
  priceLevelMinor(item: CatalogueItem, market: MarketSlug, t: number): number {
    const m = marketIndex(market);
    const c = this.lastChange(item, m, Math.floor(t / BUCKET_MS));
    const spread = 1 + 0.08 * (unit(this.seed, PURPOSE.spread, item.index, m) - 0.5);
    const fx = FX[getMarket(market).currency];
    return Math.max(1, Math.round(item.basePriceCents * fx * spread * Math.exp(this.walk(item, m, c))));
  }

  /** Lowest listing and active listing count of one item, or undefined when not on that market. */
  listing(item: CatalogueItem, market: MarketSlug, t: number): ListingTruth | undefined {
    const o = this.overrides.get(overrideKey(market, item.marketHashName, item.phase));
    if (o && t >= o.from) return { item, priceMinor: o.priceMinor, count: o.priceMinor === null ? 0 : o.count };
    return this.baseListing(item, market, t);
  }

  private baseListing(item: CatalogueItem, market: MarketSlug, t: number): ListingTruth | undefined {
    if (!this.listed(item, market)) return undefined;
    const m = marketIndex(market);
    const c = this.lastChange(item, m, Math.floor(t / BUCKET_MS));
    // Listings appear and vanish: some change points leave an item with none for a while.
    if (unit(this.seed, PURPOSE.vanish, item.index, m, c) < 0.04) return { item, priceMinor: null, count: 0 };
    const mean = 1 + 40 * this.liquidity(item) * (PROFILES[market] ?? DEFAULT_PROFILE).depth;
    const count = Math.max(1, Math.floor(mean * (0.3 + 1.4 * unit(this.seed, PURPOSE.count, item.index, m, c))));
    return { item, priceMinor: this.priceLevelMinor(item, market, t), count };
  }

  /** Every listed item of a market at time t (plus overridden ones), in catalogue order. */
  listings(market: MarketSlug, t: number): ListingTruth[] {
    const key = `${market}:${Math.floor(t / BUCKET_MS)}`;
    let snap = this.cache.get(key);
    if (!snap) {
      snap = [];
      for (const item of this.catalogue) {
        const l = this.baseListing(item, market, t);
        if (l) snap.push(l);
      }
      if (this.cache.size > 64) this.cache.clear();
      this.cache.set(key, snap);
    }
    const active = [...this.overrides.values()].filter((o) => o.market === market && t >= o.from);
    if (active.length === 0) return snap;
    // Merged once per (bucket, overrides set, overrides in force): every page of a cycle asks,
    // and a merge is a map and a sort of the whole market (a benchmark's overrides made the
    // simulator the busiest process of the machine it measures).
    const mergedKey = `${key}:${this.versionOf(market)}:${active.length}`;
    const cached = this.merged.get(mergedKey);
    if (cached) return cached;
    const byIndex = new Map(snap.map((l) => [l.item.index, l]));
    for (const o of active) {
      byIndex.set(o.item.index, { item: o.item, priceMinor: o.priceMinor, count: o.priceMinor === null ? 0 : o.count });
    }
    const merged = [...byIndex.values()].sort((a, b) => a.item.index - b.item.index);
    if (this.merged.size > 64) this.merged.clear();
    this.merged.set(mergedKey, merged);
    return merged;
  }

  private versionOf(market: MarketSlug): number {
    return this.versions.get(market) ?? 0;
  }

  /**
   * How many of `market`'s overrides are in force at `t`: an override holds from its `from` on,
   * so for one set of overrides (one version) this count names exactly which are in force.
   */
  private inForce(market: MarketSlug, t: number): number {
    let n = 0;
    for (const o of this.overrides.values()) if (o.market === market && t >= o.from) n++;
    return n;
  }

  /** Whether `item` has an override on `market` (whose state may then change at any moment). */
  hasOverride(market: MarketSlug, item: CatalogueItem): boolean {
    return this.overrides.has(overrideKey(market, item.marketHashName, item.phase));
  }

  /** Sets one item's state from `from` on (tests: "a price change upstream"). */
  setOverride(market: MarketSlug, item: CatalogueItem, override: Override): void {
    this.overrides.set(overrideKey(market, item.marketHashName, item.phase), { ...override, market, item });
    this.versions.set(market, this.versionOf(market) + 1);
  }

  clearOverrides(): void {
    for (const { market } of this.overrides.values()) this.versions.set(market, this.versionOf(market) + 1);
    this.overrides.clear();
  }

  /**
   * Caches a derived collection of `market` (all buy orders, all raw listings …) per 10-minute
   * bucket: the pages of one poll cycle then cost one computation instead of one per page. An
   * override may come in force inside a bucket, so the key also names how many of the
   * marketplace's are in force (which, for one set of its overrides, says which); not caching at
   * all while overrides existed made every page recompute its whole collection. `readsListings`
   * false: the collection does not read listings (buy orders: bids follow the price level, not
   * the lowest listing), so overrides never make it stale.
   */
  memo<T>(market: MarketSlug, name: string, t: number, compute: () => T, readsListings = true): T {
    const overrides = readsListings ? `${this.versionOf(market)}:${this.inForce(market, t)}` : '-';
    const key = `${market}:${name}:${Math.floor(t / BUCKET_MS)}:${overrides}`;
    let v = this.memos.get(key) as T | undefined;
    if (v === undefined) {
      v = compute();
      if (this.memos.size > 256) this.memos.clear();
      this.memos.set(key, v);
    }
    return v;
  }

  /** Finds a catalogue row by identity. */
  find(marketHashName: string, phase: string): CatalogueItem | undefined {
    return this.byIdentity.get(identityKey({ marketHashName, phase: phase as PhaseOrNone }));
  }
}

/**
 * Buy orders, float buckets, float-limited buy orders, completed sales, the store's order book
 * and daily and hourly history: all derived from the listing model, so they move with it and stay
 * plausible (bids below asks, low floats dearer, sales near the listing price).
 */
import type { Exterior, MarketSlug } from '@skinprices/domain';
import { DAY_MS, getMarket } from '@skinprices/domain';
import type { CatalogueItem } from './catalogue.js';
import { BUCKET_MS, marketIndex, type MarketModel } from './model.js';
import { PURPOSE, unit } from './noise.js';

export interface BuyOrderTruth {
  item: CatalogueItem;
  /** Pattern tier ('T1'…) for tier rows, else null. */
  tier: string | null;
  priceMinor: number | null;
  /** CN-A only: the separate "blue" buy-order price some items have. */
  blueMinor: number | null;
  count: number;
}

export interface FloatRangeTruth {
  item: CatalogueItem;
  floatMin: string;
  floatMax: string;
  firstMinor: number | null;
  fifthMinor: number | null;
  count: number;
}

export interface FloatBuyOrderTruth {
  item: CatalogueItem;
  orderId: string;
  priceMinor: number;
  quantity: number;
  floatMin: string | null;
  floatMax: string | null;
  condition: string | null;
}

export interface SaleTruth {
  item: CatalogueItem;
  saleId: string;
  priceMinor: number;
  soldAt: number;
  floatValue: string | null;
  paintSeed: number | null;
  stickers: { slot: number; name: string; wear: string | null }[];
  charms: { slot: number; name: string; pattern: number | null }[];
}

export interface OrderBookTruth {
  item: CatalogueItem;
  asks: { priceMinor: number; count: number }[];
  bids: { priceMinor: number; count: number }[];
}

export interface HistoryTruth {
  item: CatalogueItem;
  day: number;
  closeMinor: number;
  volume: number;
}

/** One closed UTC hour of one item: the listing price sampled through the hour. */
interface HourTruth {
  /** Start of the hour (ms since epoch). */
  hour: number;
  openMinor: number;
  highMinor: number;
  lowMinor: number;
  closeMinor: number;
  /** Listings at the hour's end (the close's count). */
  volume: number;
}

export interface HourlyHistoryTruth {
  item: CatalogueItem;
  hours: HourTruth[];
}

const HOUR_MS = 3_600_000;

/** Float ranges per wear tier, as marketplaces bucket them (low floats are worth more). */
const FLOAT_RANGES: Record<Exterior, readonly (readonly [string, string])[]> = {
  'Factory New': [
    ['0.00', '0.01'],
    ['0.01', '0.02'],
    ['0.02', '0.03'],
    ['0.03', '0.07'],
  ],
  'Minimal Wear': [
    ['0.07', '0.08'],
    ['0.08', '0.09'],
    ['0.09', '0.10'],
    ['0.10', '0.15'],
  ],
  'Field-Tested': [
    ['0.15', '0.18'],
    ['0.18', '0.21'],
    ['0.21', '0.24'],
    ['0.24', '0.27'],
    ['0.27', '0.38'],
  ],
  'Well-Worn': [
    ['0.38', '0.39'],
    ['0.39', '0.45'],
  ],
  'Battle-Scarred': [
    ['0.45', '0.50'],
    ['0.50', '0.63'],
    ['0.63', '0.76'],
    ['0.76', '1.00'],
  ],
};

const TIER_FINISHES = /\| (Case Hardened|Fade|Marble Fade|Crimson Web|Heat Treated)\b/;
export const TIERS = ['T1', 'T2', 'T3'] as const;
const TIER_FACTOR = [3, 2, 1.4];

const scale = (minor: number, f: number): number => Math.max(1, Math.round(minor * f));

/** Float value with 10 digits inside [min, max), as a decimal string. */
function floatIn(min: string, max: string, u: number): string {
  const lo = Math.round(Number(min) * 1e10);
  const hi = Math.round(Number(max) * 1e10);
  const v = lo + Math.floor(u * (hi - lo));
  return (v / 1e10).toFixed(10);
}

export class Extras {
  constructor(private readonly model: MarketModel) {}

  private get seed(): number {
    return this.model.seed;
  }

  /** Highest bid for a catalogue row, from orders that name its phase (or none). */
  private specificBid(item: CatalogueItem, market: MarketSlug, t: number): { minor: number | null; count: number } {
    const m = marketIndex(market);
    const b = Math.floor(t / BUCKET_MS);
    const u = unit(this.seed, PURPOSE.bid, item.index, m, Math.floor(b / 3));
    if (u < 0.08) return { minor: null, count: 0 };
    const level = this.model.priceLevelMinor(item, market, t);
    const count =
      1 +
      Math.floor(unit(this.seed, PURPOSE.bidCount, item.index, m, Math.floor(b / 3)) * 60 * this.model.liquidity(item));
    return { minor: scale(level, 0.72 + 0.2 * u), count };
  }

  buyOrders(market: MarketSlug, t: number): BuyOrderTruth[] {
    return this.model.memo(market, 'buyOrders', t, () => this.buyOrdersNow(market, t), false);
  }

  private buyOrdersNow(market: MarketSlug, t: number): BuyOrderTruth[] {
    const out: BuyOrderTruth[] = [];
    // General orders (no phase condition) per name: they also buy every phase of it.
    const general = new Map<string, number>();
    for (const item of this.model.catalogue) {
      if (!this.model.listed(item, market) || item.phase === '') continue;
      const bid = this.specificBid(item, market, t).minor;
      if (bid === null) continue;
      const g = scale(bid, 0.85);
      general.set(item.marketHashName, Math.min(general.get(item.marketHashName) ?? g, g));
    }
    const m = marketIndex(market);
    for (const item of this.model.catalogue) {
      if (!this.model.listed(item, market)) continue;
      const own = this.specificBid(item, market, t);
      const g = item.phase === '' ? null : (general.get(item.marketHashName) ?? null);
      const priceMinor = own.minor === null ? g : g === null ? own.minor : Math.max(own.minor, g);
      const blue =
        getMarket(market).blueBuyorderPrice === true &&
        priceMinor !== null &&
        unit(this.seed, PURPOSE.blue, item.index) < 0.2
          ? scale(priceMinor, 1.03)
          : null;
      out.push({ item, tier: null, priceMinor, blueMinor: blue, count: own.count });
      // The goods-pages format quotes pattern tiers as rows of their own.
      if (
        getMarket(market).upstreamFormat === 'goods-pages' &&
        item.phase === '' &&
        TIER_FINISHES.test(item.marketHashName) &&
        own.minor !== null
      ) {
        TIERS.forEach((tier, i) => {
          const u = unit(this.seed, PURPOSE.bid, item.index, m, 100 + i);
          out.push({
            item,
            tier,
            priceMinor: scale(own.minor as number, (TIER_FACTOR[i] as number) * (0.9 + 0.2 * u)),
            blueMinor: null,
            count: 1 + Math.floor(u * 4),
          });
        });
      }
    }
    return out;
  }

  floatRanges(market: MarketSlug, t: number): FloatRangeTruth[] {
    return this.model.memo(market, 'floatRanges', t, () => this.floatRangesNow(market, t));
  }

  private floatRangesNow(market: MarketSlug, t: number): FloatRangeTruth[] {
    const out: FloatRangeTruth[] = [];
    const m = marketIndex(market);
    for (const l of this.model.listings(market, t)) {
      const { item } = l;
      if (!item.exterior || l.priceMinor === null) continue;
      const ranges = FLOAT_RANGES[item.exterior];
      // Split the listings over the ranges; the cheapest listing sits in the most worn range.
      let left = l.count;
      ranges.forEach(([min, max], i) => {
        const last = i === ranges.length - 1;
        const share = last ? left : Math.floor(left * unit(this.seed, PURPOSE.range, item.index, m, i) * 0.6);
        left -= share;
        const premium = 1 + 0.25 * ((ranges.length - 1 - i) / Math.max(1, ranges.length - 1));
        const first = share > 0 ? scale(l.priceMinor as number, premium) : null;
        out.push({
          item,
          floatMin: min,
          floatMax: max,
          firstMinor: first,
          fifthMinor: first !== null && share >= 5 ? scale(first, 1.04) : null,
          count: share,
        });
      });
    }
    return out;
  }

  floatBuyOrders(market: MarketSlug, t: number): FloatBuyOrderTruth[] {
    return this.model.memo(market, 'floatBuyOrders', t, () => this.floatBuyOrdersNow(market, t), false);
  }

  private floatBuyOrdersNow(market: MarketSlug, t: number): FloatBuyOrderTruth[] {
    const out: FloatBuyOrderTruth[] = [];
    const m = marketIndex(market);
    for (const item of this.model.catalogue) {
      if (!item.exterior || !this.model.listed(item, market)) continue;
      if (unit(this.seed, PURPOSE.floatOrder, item.index, m) > 0.15) continue;
      const bid = this.specificBid(item, market, t).minor;
      if (bid === null) continue;
      const ranges = FLOAT_RANGES[item.exterior];
      const n = 1 + Math.floor(unit(this.seed, PURPOSE.floatOrder, item.index, m, 1) * 3);
      for (let k = 0; k < n; k++) {
        const [min, max] = ranges[k % ranges.length] as readonly [string, string];
        const fade = /\| Fade\b/.test(item.marketHashName) ? `${90 + k * 3}%+ fade` : null;
        out.push({
          item,
          orderId: `${market}-fbo-${item.index}-${k}`,
          priceMinor: scale(bid, 1.1 + 0.15 * (n - k)),
          quantity: 1 + (k % 2),
          // goods-cursor orders name any float window; goods-pages orders are per marketplace range.
          floatMin: min,
          floatMax: getMarket(market).upstreamFormat === 'goods-cursor' ? floatIn(min, max, 0.5) : max,
          condition: fade,
        });
      }
    }
    return out;
  }

  /** Completed sales with sold_at in [from, to). */
  sales(market: MarketSlug, from: number, to: number): SaleTruth[] {
    return this.model.memo(market, `sales:${from}:${to}`, to, () => this.salesNow(market, from, to));
  }

  private salesNow(market: MarketSlug, from: number, to: number): SaleTruth[] {
    const out: SaleTruth[] = [];
    const m = marketIndex(market);
    const stickers = this.model.catalogue.filter((i) => i.category === 'sticker');
    const charms = this.model.catalogue.filter((i) => i.category === 'charm');
    const first = Math.floor(from / BUCKET_MS);
    const last = Math.floor((to - 1) / BUCKET_MS);
    for (const item of this.model.catalogue) {
      const liq = this.model.liquidity(item);
      if (liq < 0.15 || !this.model.listed(item, market)) continue;
      const p = 0.3 * liq;
      for (let b = first; b <= last; b++) {
        if (unit(this.seed, PURPOSE.sale, item.index, m, b) >= p) continue;
        // Whole seconds: upstream APIs report sale times in seconds.
        const soldAt =
          b * BUCKET_MS + 1000 * Math.floor(unit(this.seed, PURPOSE.saleDetail, item.index, m, b) * (BUCKET_MS / 1000));
        if (soldAt < from || soldAt >= to) continue;
        const d = (k: number): number => unit(this.seed, PURPOSE.saleDetail, item.index, m, b, k);
        const ranges = item.exterior ? FLOAT_RANGES[item.exterior] : null;
        const range = ranges ? (ranges[Math.floor(d(1) * ranges.length)] as readonly [string, string]) : null;
        const nStickers = item.category === 'weapon' && stickers.length > 0 ? Math.floor(d(2) * 5) : 0;
        const hasCharm = item.category === 'weapon' && charms.length > 0 && d(3) < 0.15;
        out.push({
          item,
          saleId: `${market}-${item.index}-${b}`,
          priceMinor: scale(this.model.priceLevelMinor(item, market, soldAt), 0.95 + 0.05 * d(4)),
          soldAt,
          floatValue: range ? floatIn(range[0], range[1], d(5)) : null,
          paintSeed: item.paintIndex === null ? null : Math.floor(d(6) * 1001),
          stickers: Array.from({ length: nStickers }, (_, slot) => ({
            slot,
            name: (stickers[Math.floor(d(10 + slot) * stickers.length)] as CatalogueItem).marketHashName,
            wear: d(20 + slot) < 0.5 ? null : (Math.floor(d(30 + slot) * 100) / 100).toFixed(2),
          })),
          charms: hasCharm
            ? [
                {
                  slot: 0,
                  name: (charms[Math.floor(d(7) * charms.length)] as CatalogueItem).marketHashName,
                  pattern: Math.floor(d(8) * 100000),
                },
              ]
            : [],
        });
      }
    }
    return out.sort((a, b) => a.soldAt - b.soldAt || a.saleId.localeCompare(b.saleId));
  }

  orderBooks(market: MarketSlug, t: number): OrderBookTruth[] {
    return this.model.memo(market, 'orderBooks', t, () => this.orderBooksNow(market, t));
  }

  private orderBooksNow(market: MarketSlug, t: number): OrderBookTruth[] {
    return this.model.listings(market, t).map((l) => {
      const asks =
        l.priceMinor === null
          ? []
          : [0, 1, 2, 3, 4].map((k) => ({
              priceMinor: scale(l.priceMinor as number, 1 + 0.012 * k),
              count: Math.max(1, Math.floor((l.count / 5) * (1 + k))),
            }));
      const bid = this.specificBid(l.item, market, t);
      const bids =
        bid.minor === null
          ? []
          : [0, 1, 2].map((k) => ({
              priceMinor: scale(bid.minor as number, 1 - 0.02 * k),
              count: bid.count * (k + 1),
            }));
      return { item: l.item, asks, bids };
    });
  }

  /** Daily closes of one UTC day (days since epoch): the listing price at the end of that day. */
  history(market: MarketSlug, day: number): HistoryTruth[] {
    const end = (day + 1) * DAY_MS - 1;
    const out: HistoryTruth[] = [];
    for (const l of this.model.listings(market, end)) {
      if (l.priceMinor === null) continue;
      out.push({ item: l.item, day, closeMinor: l.priceMinor, volume: l.count });
    }
    return out;
  }

  /**
   * The closed hours of one UTC day per item, as a history endpoint that keeps hourly points for
   * recent weeks (Steam's price history does) would answer, before time `before`. A listing
   * only changes at a model bucket's start, so each hour is its six buckets' states: open the
   * first priced one, close the last one (the state at the hour's end), high and low over the
   * priced ones. An hour that ends without a listing has no point (an upstream reports prices,
   * not their absence); items in catalogue order, hours ascending.
   */
  hourly(market: MarketSlug, day: number, before: number): HourlyHistoryTruth[] {
    const m = marketIndex(market);
    const hours: number[] = [];
    for (let h = day * DAY_MS; h < (day + 1) * DAY_MS && h + HOUR_MS <= before; h += HOUR_MS) hours.push(h);
    if (hours.length === 0) return [];
    const out: HourlyHistoryTruth[] = [];
    for (const first of this.model.listings(market, hours[0]!)) {
      const item = first.item;
      // A state is fixed between change points: computed once per change point of the day
      // (a handful), not per bucket (144), unless its override may change it anywhere.
      const states = new Map<number, ListingState>();
      const overridden = this.model.hasOverride(market, item);
      const state = (t: number): ListingState => {
        if (overridden) return this.model.listing(item, market, t);
        const c = this.model.lastChange(item, m, Math.floor(t / BUCKET_MS));
        let s = states.get(c);
        if (s === undefined) states.set(c, (s = this.model.listing(item, market, t)));
        return s;
      };
      const row: HourlyHistoryTruth = { item, hours: [] };
      for (const hour of hours) {
        const prices: number[] = [];
        let last: ListingState;
        for (let t = hour; t < hour + HOUR_MS; t += BUCKET_MS) {
          last = state(t);
          if (last?.priceMinor != null) prices.push(last.priceMinor);
        }
        const close = last!;
        if (close?.priceMinor == null || prices.length === 0) continue;
        row.hours.push({
          hour,
          openMinor: prices[0]!,
          highMinor: Math.max(...prices),
          lowMinor: Math.min(...prices),
          closeMinor: close.priceMinor,
          volume: close.count,
        });
      }
      if (row.hours.length > 0) out.push(row);
    }
    return out;
  }
}

type ListingState = ReturnType<MarketModel['listing']>;

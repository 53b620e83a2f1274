/**
 * What the simulated marketplaces really hold, in our normalised shapes (decimal strings, the
 * English phase names): the yardstick end-to-end tests compare the pipeline against.
 */
import { DAY_MS, getMarket, type MarketSlug } from '@skinprices/domain';
import type { Extras } from './extras.js';
import { formatMinor, type MarketModel } from './model.js';

export const TRUTH_KINDS = [
  'listings',
  'buyorders',
  'float-ranged',
  'float-buyorders',
  'sales',
  'order-book',
  'history',
] as const;
export type TruthKind = (typeof TRUTH_KINDS)[number];

const money = (minor: number | null): string | null => (minor === null ? null : formatMinor(minor));

/**
 * Records of `kind` at simulated time `at`. Sales are those sold in [from, at); history is the
 * close of the UTC day before `at`.
 */
export function truth(
  deps: { model: MarketModel; extras: Extras },
  market: MarketSlug,
  kind: TruthKind,
  at: number,
  from: number,
): unknown[] {
  const { model, extras } = deps;
  const currency = getMarket(market).currency;
  const id = (i: { marketHashName: string; phase: string }) => ({
    market_hash_name: i.marketHashName,
    phase: i.phase,
    currency,
  });
  switch (kind) {
    case 'listings':
      return model.listings(market, at).map((l) => ({ ...id(l.item), price: money(l.priceMinor), count: l.count }));
    case 'buyorders':
      return extras.buyOrders(market, at).map((b) => ({
        ...id(b.item),
        tier: b.tier,
        price: money(b.priceMinor),
        blue_price: money(b.blueMinor),
        count: b.count,
      }));
    case 'float-ranged':
      return extras.floatRanges(market, at).map((r) => ({
        ...id(r.item),
        float_min: r.floatMin,
        float_max: r.floatMax,
        first_price: money(r.firstMinor),
        fifth_price: money(r.fifthMinor),
        count: r.count,
      }));
    case 'float-buyorders':
      return extras.floatBuyOrders(market, at).map((o) => ({
        ...id(o.item),
        order_id: o.orderId,
        price: formatMinor(o.priceMinor),
        quantity: o.quantity,
        float_min: o.floatMin,
        float_max: o.floatMax,
        condition: o.condition,
      }));
    case 'sales':
      return extras.sales(market, from, at).map((s) => ({
        ...id(s.item),
        sale_id: s.saleId,
        price: formatMinor(s.priceMinor),
        sold_at: s.soldAt,
        float_value: s.floatValue,
        paint_index: s.item.paintIndex,
        paint_seed: s.paintSeed,
        stickers: s.stickers,
        charms: s.charms,
      }));
    case 'order-book':
      return extras.orderBooks(market, at).map((b) => ({
        ...id(b.item),
        asks: b.asks.map((a) => ({ price: formatMinor(a.priceMinor), count: a.count })),
        bids: b.bids.map((a) => ({ price: formatMinor(a.priceMinor), count: a.count })),
      }));
    case 'history': {
      const day = Math.floor(at / DAY_MS) - 1;
      return extras
        .history(market, day)
        .map((h) => ({ ...id(h.item), day, price: formatMinor(h.closeMinor), count: h.volume }));
    }
  }
}

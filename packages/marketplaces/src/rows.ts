/**
 * Normalised rows, one type per data kind: what every adapter yields whatever its upstream looks
 * like. Prices are fixed-point decimal strings > 0 (null only where "none" is meaningful),
 * phases the 8 English names or '', exteriors canonical. The poller adds market, currency,
 * observation time and cycle id to make events of them.
 */
import type { DataKind, Exterior, PhaseOrNone } from '@skinprices/domain';

export interface ListingRow {
  market_hash_name: string;
  phase: PhaseOrNone;
  /** Lowest listing; null when the upstream says the item has no listing. */
  price: string | null;
  count: number;
  exterior: Exterior | null;
  stattrak: boolean;
  souvenir: boolean;
  template_id: number | null;
  item_page_url: string | null;
}

export interface BuyOrderRow {
  market_hash_name: string;
  phase: PhaseOrNone;
  tier: string | null;
  price: string | null;
  blue_price: string | null;
  count: number;
  template_id: number | null;
  type_id: number | null;
}

export interface FloatRangedRow {
  market_hash_name: string;
  phase: PhaseOrNone;
  float_min: string;
  float_max: string;
  first_price: string | null;
  fifth_price: string | null;
  count: number;
  phase_labels: Record<string, string>;
}

export interface FloatBuyOrderRow {
  market_hash_name: string;
  phase: PhaseOrNone;
  order_id: string;
  price: string;
  quantity: number;
  float_min: string | null;
  float_max: string | null;
  condition: string | null;
}

export interface SaleRow {
  sale_id: string;
  market_hash_name: string;
  phase: PhaseOrNone;
  price: string;
  sold_at: number;
  float_value: string | null;
  paint_index: number | null;
  paint_seed: number | null;
  stickers: { slot: number; name: string; wear: string | null }[];
  charms: { slot: number; name: string; pattern: number | null }[];
}

export interface OrderBookRow {
  market_hash_name: string;
  phase: PhaseOrNone;
  asks: { price: string; count: number }[];
  bids: { price: string; count: number }[];
}

export interface HistoryRow {
  market_hash_name: string;
  phase: PhaseOrNone;
  /** UTC day, days since 1970-01-01. */
  day: number;
  /** The day's close; null for an item listed during the day but not at its end (`hours` then has its hours). */
  price: string | null;
  count: number | null;
  /** The day's hourly candles (ascending) when they were asked for and the upstream keeps them; else null. */
  hours: HistoryHourRow[] | null;
}

export interface HistoryHourRow {
  /** Start of the UTC hour, ms since epoch. */
  hour: number;
  open: string;
  high: string;
  low: string;
  close: string;
  count: number | null;
}

export interface RowMap {
  LISTINGS: ListingRow;
  BUYORDERS: BuyOrderRow;
  FLOAT_RANGED: FloatRangedRow;
  FLOAT_BUYORDERS: FloatBuyOrderRow;
  SALES: SaleRow;
  ORDER_BOOK: OrderBookRow;
  HISTORY: HistoryRow;
}
/** The data kinds of the domain's descriptor (packages/domain kinds.ts): one row shape each. */
export type Kind = DataKind;
type Unshaped = Exclude<DataKind, keyof RowMap> | Exclude<keyof RowMap, DataKind>;
const everyKindHasARowShape: [Unshaped] extends [never] ? true : Unshaped = true;
void everyKindHasARowShape;

/** A row the upstream sent that we refuse (zero price, unknown phase …), kept for logs/metrics. */
export interface Rejected {
  reason: string;
  raw: unknown;
}

/** One upstream page, normalised. */
export interface Page<K extends Kind> {
  rows: RowMap[K][];
  rejected: Rejected[];
}

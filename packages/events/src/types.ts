/**
 * TypeScript shapes of the Avro records in ../schemas. Field names are the Avro names
 * (snake_case), so an event decodes straight into these types. Prices are decimal strings;
 * times are epoch milliseconds (Avro timestamp-millis).
 */
import type { DataEventKind, DataKind } from '@skinprices/domain';

export type DecimalString = string;
export type EpochMs = number;

interface ItemEvent {
  market: string;
  market_hash_name: string;
  /** '' when none. */
  phase: string;
  currency: string;
}

export interface ListingEvent extends ItemEvent {
  price: DecimalString | null;
  count: number;
  exterior: string | null;
  stattrak: boolean;
  souvenir: boolean;
  template_id: number | null;
  item_page_url: string | null;
  observed_at: EpochMs;
  cycle_id: string;
  /** The cycle sends its removals as records (poll-cycles.v1 `removals_sent`). Absent: false. */
  removals_sent?: boolean;
}

export interface BuyOrderEvent extends ItemEvent {
  tier: string | null;
  price: DecimalString | null;
  blue_price: DecimalString | null;
  count: number;
  template_id: number | null;
  type_id: number | null;
  observed_at: EpochMs;
  cycle_id: string;
}

export interface FloatRangedEvent extends ItemEvent {
  float_min: DecimalString;
  float_max: DecimalString;
  first_price: DecimalString | null;
  fifth_price: DecimalString | null;
  count: number;
  phase_labels: Record<string, string>;
  observed_at: EpochMs;
  cycle_id: string;
  /** A removal: the row this record names is gone (the other fields repeat its last state). Absent: false. */
  removed?: boolean;
}

export interface FloatBuyOrderEvent extends ItemEvent {
  order_id: string;
  price: DecimalString;
  quantity: number;
  float_min: DecimalString | null;
  float_max: DecimalString | null;
  condition: string | null;
  observed_at: EpochMs;
  cycle_id: string;
  /** A removal: the row this record names is gone (the other fields repeat its last state). Absent: false. */
  removed?: boolean;
}

export interface SaleEvent extends ItemEvent {
  sale_id: string;
  price: DecimalString;
  sold_at: EpochMs;
  float_value: DecimalString | null;
  paint_index: number | null;
  paint_seed: number | null;
  stickers: { slot: number; name: string; wear: DecimalString | null }[];
  charms: { slot: number; name: string; pattern: number | null }[];
  observed_at: EpochMs;
}

export interface OrderBookEvent extends ItemEvent {
  asks: { price: DecimalString; count: number }[];
  bids: { price: DecimalString; count: number }[];
  observed_at: EpochMs;
  cycle_id: string;
  /** A removal: the row this record names is gone (the other fields repeat its last state). Absent: false. */
  removed?: boolean;
}

/** One closed UTC hour of a history point's day: a candle of the lowest listing price. */
export interface HistoryHour {
  /** Start of the UTC hour. */
  hour: EpochMs;
  open: DecimalString;
  high: DecimalString;
  low: DecimalString;
  close: DecimalString;
  count: number | null;
}

export interface HistoryPointEvent extends ItemEvent {
  /** UTC day as days since 1970-01-01 (Avro `date`). */
  day: number;
  /**
   * The day's close. Written always; null only in records written with the withdrawn version 2,
   * which carried a day's hours without its close (their `hours` have them).
   */
  price: DecimalString | null;
  count: number | null;
  observed_at: EpochMs;
  /** Only in records written with the withdrawn version 2: the day's hours (now on history-hours.v1). */
  hours?: HistoryHour[] | null;
}

/** The hourly candles of one item's day (history-hours.v1). */
export interface HistoryHoursEvent extends ItemEvent {
  /** UTC day as days since 1970-01-01 (Avro `date`). */
  day: number;
  /** Ascending, never empty. */
  hours: HistoryHour[];
  observed_at: EpochMs;
}

/** The data kinds come from the domain's descriptor (packages/domain kinds.ts). */
export type { DataKind };

export interface PollCycleEvent {
  market: string;
  kind: DataKind;
  cycle_id: string;
  mode: 'FULL' | 'DELTA';
  started_at: EpochMs;
  finished_at: EpochMs;
  items_seen: number;
  events_emitted: number;
  outcome: 'COMPLETE' | 'PARTIAL' | 'FAILED';
  error: string | null;
  data_topic: string;
  end_offsets: { partition: number; offset: number }[];
  /** Every item the cycle no longer saw was sent as a removal record: the marker removes nothing else. Absent: false. */
  removals_sent?: boolean;
}

/** Where a poller job resumes (poller-cursors.v1, internal to the pollers). */
export interface PollerCursorEvent {
  market: string;
  kind: string;
  history: { closes_next: number | null; hours_next: number | null; hours_end: number | null } | null;
  sales_from: EpochMs | null;
  sales_seen: string[];
  updated_at: EpochMs;
}

export interface PriceChangeEvent extends ItemEvent {
  old_price: DecimalString | null;
  new_price: DecimalString | null;
  old_count: number | null;
  new_count: number | null;
  observed_at: EpochMs;
  changed_at: EpochMs;
}

export interface CurrentPriceEvent extends ItemEvent {
  price: DecimalString | null;
  count: number;
  updated_at: EpochMs;
  /** The outlier guard's verdict (null: no price, or a record from before the guard). */
  is_outlier?: boolean | null;
  /** 0..1, two decimals (null likewise). */
  confidence?: DecimalString | null;
}

/** Event kind → its TypeScript shape; the kinds are the `event` names of infra/kafka/topics.json. */
export interface EventMap {
  listing: ListingEvent;
  buyorder: BuyOrderEvent;
  floatRanged: FloatRangedEvent;
  floatBuyorder: FloatBuyOrderEvent;
  sale: SaleEvent;
  orderBook: OrderBookEvent;
  historyPoint: HistoryPointEvent;
  historyHours: HistoryHoursEvent;
  pollCycle: PollCycleEvent;
  pollerCursor: PollerCursorEvent;
  priceChange: PriceChangeEvent;
  currentPrice: CurrentPriceEvent;
}
export type EventKind = keyof EventMap;

// The descriptor's event of every data kind is an event of this map, with its shape: a kind added
// there without its event here (or renamed on one side) fails to compile.
type Missing = Exclude<DataEventKind, EventKind>;
const everyDataEventHasAShape: [Missing] extends [never] ? true : Missing = true;
void everyDataEventHasAShape;

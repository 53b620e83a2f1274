/**
 * The other data kinds:
 * - buy orders: states sent as deltas like listings (a removal is price NULL, count 0);
 * - float-ranged buckets, float buy orders and the store's book: whole snapshots each cycle,
 *   upserted here and pruned when the cycle's COMPLETE marker is applied (markers.ts);
 * - sales: immutable happenings, inserted once;
 * - history points (the history-only marketplace): daily closes in listing_daily.
 * Every upsert is guarded by observed_at, so redelivery and replays change nothing.
 */
import type {
  BuyOrderEvent,
  DecodedMessage,
  FloatBuyOrderEvent,
  FloatRangedEvent,
  HistoryPointEvent,
  OrderBookEvent,
  SaleEvent,
} from '@skinprices/events';
import { DAY_MS } from '@skinprices/domain';
import type { CopyValue, PoolClient } from '@skinprices/store';
import { setExcluded, stage } from './stage.js';

interface Spec<E> {
  table: string;
  columns: readonly string[];
  key: readonly string[];
  row: (e: E) => CopyValue[];
}

/** Stages the batch and merges the latest state per key, guarded by observed_at. */
async function upsertLatest<E extends { observed_at: number }>(
  client: PoolClient,
  spec: Spec<E>,
  messages: readonly { value: unknown; offset: string }[],
): Promise<void> {
  if (messages.length === 0) return;
  const staged = await stage(
    client,
    spec.table,
    spec.columns,
    messages.map((m) => [...spec.row(m.value as E), m.offset]),
  );
  const key = spec.key.join(', ');
  const rest = spec.columns.filter((c) => !spec.key.includes(c));
  await client.query(`
    INSERT INTO ${spec.table} (${spec.columns.join(', ')})
    SELECT DISTINCT ON (${key}) ${spec.columns.join(', ')}
    FROM ${staged}
    ORDER BY ${key}, observed_at DESC, kafka_offset DESC
    ON CONFLICT (${key}) DO UPDATE SET ${setExcluded(rest)}
    WHERE excluded.observed_at > ${spec.table}.observed_at`);
}

const json = (v: unknown): string => JSON.stringify(v);
const at = (ms: number): Date => new Date(ms);

const BUYORDERS: Spec<BuyOrderEvent> = {
  table: 'buyorders_current',
  columns: [
    'market',
    'market_hash_name',
    'phase',
    'tier',
    'currency',
    'price',
    'blue_price',
    'count',
    'template_id',
    'type_id',
    'observed_at',
    'cycle_id',
  ],
  key: ['market', 'market_hash_name', 'phase', 'tier'],
  row: (e) => [
    e.market,
    e.market_hash_name,
    e.phase,
    e.tier ?? '',
    e.currency,
    e.price,
    e.blue_price,
    e.count,
    e.template_id,
    e.type_id,
    at(e.observed_at),
    e.cycle_id,
  ],
};

const FLOAT_RANGED: Spec<FloatRangedEvent> = {
  table: 'float_ranged_current',
  columns: [
    'market',
    'market_hash_name',
    'phase',
    'float_min',
    'float_max',
    'currency',
    'first_price',
    'fifth_price',
    'count',
    'phase_labels',
    'observed_at',
    'cycle_id',
  ],
  key: ['market', 'market_hash_name', 'phase', 'float_min'],
  row: (e) => [
    e.market,
    e.market_hash_name,
    e.phase,
    e.float_min,
    e.float_max,
    e.currency,
    e.first_price,
    e.fifth_price,
    e.count,
    json(e.phase_labels),
    at(e.observed_at),
    e.cycle_id,
  ],
};

const FLOAT_BUYORDERS: Spec<FloatBuyOrderEvent> = {
  table: 'float_buyorders_current',
  columns: [
    'market',
    'order_id',
    'market_hash_name',
    'phase',
    'currency',
    'price',
    'quantity',
    'float_min',
    'float_max',
    'condition',
    'observed_at',
    'cycle_id',
  ],
  key: ['market', 'order_id'],
  row: (e) => [
    e.market,
    e.order_id,
    e.market_hash_name,
    e.phase,
    e.currency,
    e.price,
    e.quantity,
    e.float_min,
    e.float_max,
    e.condition,
    at(e.observed_at),
    e.cycle_id,
  ],
};

const ORDER_BOOK: Spec<OrderBookEvent> = {
  table: 'order_book_current',
  columns: ['market', 'market_hash_name', 'phase', 'currency', 'asks', 'bids', 'observed_at', 'cycle_id'],
  key: ['market', 'market_hash_name', 'phase'],
  row: (e) => [
    e.market,
    e.market_hash_name,
    e.phase,
    e.currency,
    json(e.asks),
    json(e.bids),
    at(e.observed_at),
    e.cycle_id,
  ],
};

const HISTORY: Spec<HistoryPointEvent> = {
  table: 'listing_daily',
  columns: ['market', 'market_hash_name', 'phase', 'day', 'close', 'count', 'observed_at'],
  key: ['market', 'market_hash_name', 'phase', 'day'],
  row: (e) => [
    e.market,
    e.market_hash_name,
    e.phase,
    new Date(e.day * DAY_MS).toISOString().slice(0, 10),
    e.price,
    e.count,
    at(e.observed_at),
  ],
};

const SALE_COLUMNS = [
  'market',
  'sale_id',
  'market_hash_name',
  'phase',
  'currency',
  'price',
  'sold_at',
  'float_value',
  'paint_index',
  'paint_seed',
  'stickers',
  'charms',
  'observed_at',
] as const;

/** Sales never change: the first copy of a sale stays (a redelivered one changes nothing). */
async function insertSales(client: PoolClient, messages: readonly DecodedMessage<'sale'>[]): Promise<void> {
  if (messages.length === 0) return;
  const staged = await stage(
    client,
    'sales',
    SALE_COLUMNS,
    messages.map((m) => {
      const e = m.value as SaleEvent;
      return [
        e.market,
        e.sale_id,
        e.market_hash_name,
        e.phase,
        e.currency,
        e.price,
        at(e.sold_at),
        e.float_value,
        e.paint_index,
        e.paint_seed,
        json(e.stickers),
        json(e.charms),
        at(e.observed_at),
        m.offset,
      ];
    }),
  );
  await client.query(`
    INSERT INTO sales (${SALE_COLUMNS.join(', ')})
    SELECT DISTINCT ON (market, sale_id) ${SALE_COLUMNS.join(', ')} FROM ${staged}
    ORDER BY market, sale_id, kafka_offset
    ON CONFLICT (market, sale_id) DO NOTHING`);
}

export type BookKind = 'buyorder' | 'floatRanged' | 'floatBuyorder' | 'orderBook' | 'sale' | 'historyPoint';

export async function applyBooks(
  client: PoolClient,
  kind: BookKind,
  messages: readonly DecodedMessage<BookKind>[],
): Promise<void> {
  switch (kind) {
    case 'buyorder':
      return upsertLatest(client, BUYORDERS, messages);
    case 'floatRanged':
      return upsertLatest(client, FLOAT_RANGED, messages);
    case 'floatBuyorder':
      return upsertLatest(client, FLOAT_BUYORDERS, messages);
    case 'orderBook':
      return upsertLatest(client, ORDER_BOOK, messages);
    case 'historyPoint':
      return upsertLatest(client, HISTORY, messages);
    case 'sale':
      return insertSales(client, messages as DecodedMessage<'sale'>[]);
  }
}

/** Snapshot tables per data kind: what a COMPLETE cycle did not see is gone. */
export const SNAPSHOT_TABLES: Readonly<Record<string, string>> = {
  FLOAT_RANGED: 'float_ranged_current',
  FLOAT_BUYORDERS: 'float_buyorders_current',
  ORDER_BOOK: 'order_book_current',
};

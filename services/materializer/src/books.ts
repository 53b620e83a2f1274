/**
 * The other data kinds:
 * - buy orders: states sent as deltas like listings (a removal is price NULL, count 0);
 * - float-ranged buckets, float buy orders and the store's book: deltas too, but a removal
 *   (`removed: true`) deletes its row, and a FULL cycle that did not send its removals deletes
 *   what it did not see when its COMPLETE marker is applied (markers.ts);
 * - sales: immutable happenings, inserted once;
 * - history points (the history-only marketplace; the warm demo's every marketplace): daily
 *   closes in listing_daily, without a candle (see HISTORY) unless the point carried its day's
 *   hours (listings.ts writes those first).
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
import { DATA_KINDS, DAY_MS, marketItemKey, type DataEventKind } from '@skinprices/domain';
import type { CopyValue, PoolClient } from '@skinprices/store';
import { refreshStats } from './derived.js';
import { setExcluded, stage } from './stage.js';

interface Spec<E> {
  table: string;
  columns: readonly string[];
  key: readonly string[];
  /** The event as a COPY row of `columns`. @default the event's fields of the same names */
  row?: (e: E) => CopyValue[];
  /**
   * Each row also keeps its prior observation (`prior_price`, `prior_at`: the last one before the
   * start of its observed UTC day; migration 0020), which the day's liquidity reads as the price
   * held when the day began. @default false
   */
  keepsPrior?: boolean;
  /** Events may be removals (`removed: true`, DataKindInfo.deletes): the row is deleted. @default false */
  deletes?: boolean;
}

/** The start of a timestamp's UTC day, in SQL. */
const dayStart = (t: string): string => `date_trunc('day', ${t}, 'UTC')`;

/**
 * Stages the batch and merges the latest state per key, guarded by observed_at. With
 * `keepsPrior`, the prior observation comes from the batch's own earlier records, the stored row
 * or the stored row's prior, whichever is latest before the new observation's day began, so one
 * batch of a key's records and one batch per record leave the same row.
 */
async function upsertLatest<E extends { observed_at: number }>(
  client: PoolClient,
  spec: Spec<E>,
  messages: readonly { value: unknown; offset: string }[],
): Promise<void> {
  if (messages.length === 0) return;
  const toRow = spec.row ?? byColumns<E>(spec.columns);
  const removed = (m: { value: unknown }): CopyValue[] =>
    spec.deletes ? [(m.value as { removed?: boolean }).removed === true] : [];
  const staged = await stage(
    client,
    spec.table,
    spec.deletes ? [...spec.columns, 'removed'] : spec.columns,
    messages.map((m) => [...toRow(m.value as E), ...removed(m), m.offset]),
    spec.deletes ? 'removed boolean NOT NULL' : '',
  );
  const t = spec.table;
  const key = spec.key.join(', ');
  const rest = spec.columns.filter((c) => !spec.key.includes(c));
  const newest = `ORDER BY ${key}, observed_at DESC, kafka_offset DESC`;
  if (spec.deletes) {
    // The batch's last word per key decides: a state is upserted, a removal deletes the row;
    // either only over an older observation, as redelivery and replays require.
    const on = spec.key.map((k) => `${t}.${k} = l.${k}`).join(' AND ');
    await client.query(`
      WITH latest AS (SELECT DISTINCT ON (${key}) * FROM ${staged} ${newest}),
      gone AS (
        DELETE FROM ${t} USING latest l WHERE l.removed AND ${on} AND ${t}.observed_at < l.observed_at
      )
      INSERT INTO ${t} (${spec.columns.join(', ')})
      SELECT ${spec.columns.join(', ')} FROM latest WHERE NOT removed
      ON CONFLICT (${key}) DO UPDATE SET ${setExcluded(rest)}
      WHERE excluded.observed_at > ${t}.observed_at`);
    return;
  }
  if (!spec.keepsPrior) {
    await client.query(`
      INSERT INTO ${t} (${spec.columns.join(', ')})
      SELECT DISTINCT ON (${key}) ${spec.columns.join(', ')} FROM ${staged} ${newest}
      ON CONFLICT (${key}) DO UPDATE SET ${setExcluded(rest)}
      WHERE excluded.observed_at > ${t}.observed_at`);
    return;
  }
  const before = `greatest(CASE WHEN ${t}.observed_at < ${dayStart('excluded.observed_at')} THEN ${t}.observed_at END,
                           ${t}.prior_at, excluded.prior_at)`;
  await client.query(`
    WITH latest AS (SELECT DISTINCT ON (${key}) * FROM ${staged} ${newest}),
    prior AS (
      SELECT DISTINCT ON (${key}) s.${spec.key.join(', s.')}, s.price, s.observed_at
      FROM ${staged} s JOIN latest l USING (${key})
      WHERE s.observed_at < ${dayStart('l.observed_at')}
      ORDER BY ${key}, s.observed_at DESC, s.kafka_offset DESC
    )
    INSERT INTO ${t} (${spec.columns.join(', ')}, prior_price, prior_at)
    SELECT ${spec.columns.map((c) => `l.${c}`).join(', ')}, p.price, p.observed_at
    FROM latest l LEFT JOIN prior p USING (${key})
    ON CONFLICT (${key}) DO UPDATE SET ${setExcluded(rest)},
      prior_price = CASE ${before}
                      WHEN ${t}.observed_at THEN ${t}.price
                      WHEN excluded.prior_at THEN excluded.prior_price
                      ELSE ${t}.prior_price END,
      prior_at = ${before}
    WHERE excluded.observed_at > ${t}.observed_at`);
}

/**
 * What a marker clearing vanished rows of `table` at `$2` (its cycle's end) sets besides the
 * kind's cleared values: for a table that keeps priors, a row last observed before that day's
 * start keeps that observation as its prior (upsertLatest).
 */
export function clearTerms(table: string): string {
  if (!PRIOR_TABLES.has(table)) return '';
  const before = `observed_at < ${dayStart('$2::timestamptz')}`;
  return `, prior_price = CASE WHEN ${before} THEN price ELSE prior_price END,
    prior_at = CASE WHEN ${before} THEN observed_at ELSE prior_at END`;
}

const at = (ms: number): Date => new Date(ms);

/** An event's fields in column order: times become timestamps, objects and arrays jsonb text. */
const byColumns =
  <E>(columns: readonly string[]) =>
  (e: E): CopyValue[] =>
    columns.map((c) => {
      const v = (e as Record<string, unknown>)[c];
      if (c === 'observed_at' || c === 'sold_at') return at(v as number);
      return v !== null && typeof v === 'object' ? JSON.stringify(v) : (v as CopyValue);
    });

const BUYORDERS_COLUMNS = [
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
] as const;

const BUYORDERS: Spec<BuyOrderEvent> = {
  table: DATA_KINDS.BUYORDERS.table,
  columns: BUYORDERS_COLUMNS,
  key: ['market', 'market_hash_name', 'phase', 'tier'],
  // A plain row has no tier: '' (the key column cannot be NULL).
  row: (e) => byColumns<BuyOrderEvent>(BUYORDERS_COLUMNS)({ ...e, tier: e.tier ?? '' }),
  // The day's liquidity reads the bid held when the day began (derived.ts).
  keepsPrior: true,
};

const FLOAT_RANGED: Spec<FloatRangedEvent> = {
  table: DATA_KINDS.FLOAT_RANGED.table,
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
  deletes: DATA_KINDS.FLOAT_RANGED.deletes,
};

const FLOAT_BUYORDERS: Spec<FloatBuyOrderEvent> = {
  table: DATA_KINDS.FLOAT_BUYORDERS.table,
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
  deletes: DATA_KINDS.FLOAT_BUYORDERS.deletes,
};

const ORDER_BOOK: Spec<OrderBookEvent> = {
  table: DATA_KINDS.ORDER_BOOK.table,
  columns: ['market', 'market_hash_name', 'phase', 'currency', 'asks', 'bids', 'observed_at', 'cycle_id'],
  key: ['market', 'market_hash_name', 'phase'],
  deletes: DATA_KINDS.ORDER_BOOK.deletes,
};

/**
 * The history-only marketplace publishes one close per day and nothing of the day's course: its
 * rows leave open, high, low and open_at NULL (migration 0005) rather than invent them from the
 * close. Updates touch only the columns below, so they stay NULL.
 */
const HISTORY: Spec<HistoryPointEvent> = {
  table: DATA_KINDS.HISTORY.table,
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
    messages.map((m) => [...byColumns<SaleEvent>(SALE_COLUMNS)(m.value as SaleEvent), m.offset]),
  );
  await client.query(`
    INSERT INTO ${DATA_KINDS.SALES.table} (${SALE_COLUMNS.join(', ')})
    SELECT DISTINCT ON (market, sale_id) ${SALE_COLUMNS.join(', ')} FROM ${staged}
    ORDER BY market, sale_id, kafka_offset
    ON CONFLICT (market, sale_id) DO NOTHING`);
}

/**
 * Closes imported for days a listing row's statistics already covered (a marketplace's daily
 * history arriving after its first prices: the warm demo) change its bases and averages: those
 * rows are computed again, as a late listing close does (listings.ts). Only closes within the
 * 90 days the statistics read can matter; the history-only marketplace has no listing rows.
 */
async function restateStats(client: PoolClient, messages: readonly DecodedMessage<'historyPoint'>[]): Promise<void> {
  const first = new Map<string, { market: string; name: string; phase: string; day: number }>();
  for (const m of messages) {
    const e = m.value as HistoryPointEvent;
    const k = marketItemKey(e.market, e.market_hash_name, e.phase);
    const cur = first.get(k);
    if (!cur || e.day < cur.day)
      first.set(k, { market: e.market, name: e.market_hash_name, phase: e.phase, day: e.day });
  }
  const rows = [...first.values()];
  if (rows.length === 0) return;
  await refreshStats(
    client,
    `SELECT c.market, c.market_hash_name, c.phase, c.stats_day AS d
     FROM listings_current c
     JOIN unnest($1::text[], $2::text[], $3::text[], $4::int[]) AS h(market, market_hash_name, phase, first_day)
       USING (market, market_hash_name, phase)
     WHERE c.stats_day IS NOT NULL
       AND DATE '1970-01-01' + h.first_day < c.stats_day
       AND DATE '1970-01-01' + h.first_day >= c.stats_day - 90`,
    [rows.map((r) => r.market), rows.map((r) => r.name), rows.map((r) => r.phase), rows.map((r) => r.day)],
  );
}

/** The tables whose rows keep their prior observation (Spec.keepsPrior). */
const PRIOR_TABLES: ReadonlySet<string> = new Set(
  [BUYORDERS, FLOAT_RANGED, FLOAT_BUYORDERS, ORDER_BOOK].filter((x) => x.keepsPrior === true).map((x) => x.table),
);

/** The data kinds' events other than listings (listings.ts): each written by its own function below. */
export type BookKind = Exclude<DataEventKind, 'listing'>;

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
    case 'historyPoint': {
      // A point without a close (nothing listed at the day's end) only carried hours (listings.ts).
      const closes = (messages as DecodedMessage<'historyPoint'>[]).filter(
        (m) => (m.value as HistoryPointEvent).price !== null,
      );
      await upsertLatest(client, HISTORY, closes);
      return restateStats(client, closes);
    }
    case 'sale':
      return insertSales(client, messages as DecodedMessage<'sale'>[]);
  }
}

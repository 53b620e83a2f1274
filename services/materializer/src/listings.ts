/**
 * listings.v1 → listings_current (with derived values), listing_hourly, listing_daily,
 * item_markets and the change outbox; and history.v1's imported hourly candles into the same
 * candle tables.
 */
import { DAY_MS, marketItemKey, startOfUtcDay } from '@skinprices/domain';
import type { DecodedMessage, HistoryHoursEvent, HistoryPointEvent, ListingEvent } from '@skinprices/events';
import type { CopyValue, PoolClient } from '@skinprices/store';
import { setExcluded, stage } from './stage.js';
import { lastCloseBefore, refreshStats, statsAggregates, statsBases } from './derived.js';
import { ensureHourPartitions } from './partitions.js';
import type { BatchView, RepeatClass, ServedListings } from './served.js';

/** The staged columns of a listing event, in COPY order (the benchmark's raw COPY uses them too). */
export const LISTING_COLUMNS = [
  'market',
  'market_hash_name',
  'phase',
  'currency',
  'price',
  'count',
  'exterior',
  'stattrak',
  'souvenir',
  'template_id',
  'item_page_url',
  'observed_at',
  'cycle_id',
] as const;

/** A listing event as a COPY row of LISTING_COLUMNS. */
export function listingRow(e: ListingEvent): CopyValue[] {
  return [
    e.market,
    e.market_hash_name,
    e.phase,
    e.currency,
    e.price,
    e.count,
    e.exterior,
    e.stattrak,
    e.souvenir,
    e.template_id,
    e.item_page_url,
    new Date(e.observed_at),
    e.cycle_id,
  ];
}

export interface ListingOptions {
  /** Write outbox rows for committed changes (off while replaying: see replay.ts). */
  outbox: boolean;
  /** Hourly snapshots older than this many days (before the read model's clock) are not kept. */
  hourlyRetentionDays: number;
}

/**
 * Applies listing records: those `served` classes as repeats (served.ts) write nothing, or only
 * their candles; the rest go through the ingest path. Returns the batch's view (to commit after
 * the transaction), or undefined when the partition's rows are not held.
 */
export async function applyListings(
  client: PoolClient,
  messages: readonly DecodedMessage<'listing'>[],
  options: ListingOptions,
  served?: { rows: ServedListings; storedNext: bigint },
): Promise<BatchView | undefined> {
  if (messages.length === 0) return undefined;
  const events = messages.map((m) => m.value as ListingEvent);
  const partition = (messages[0] as DecodedMessage<'listing'>).partition;
  const view = served ? await served.rows.view(client, partition, events, served.storedNext) : undefined;
  const classed = (c: RepeatClass) => (view ? messages.filter((_, i) => view.classes[i] === c) : []);
  const write = view ? classed('write') : messages;
  if (write.length > 0) await writeListings(client, write, options);
  const candles = classed('candle');
  if (candles.length > 0) await writeCandles(client, candles, options);
  return view;
}

/** The ingest path: the rows, their statistics and outlier verdicts, candles and the outbox. */
async function writeListings(
  client: PoolClient,
  messages: readonly DecodedMessage<'listing'>[],
  options: ListingOptions,
): Promise<void> {
  // History first: the closes of this batch's earlier days are then visible to the statistics.
  const events = await stageWithHistory(client, messages, options);
  const late = await lateCheck(client, events);
  // The rows the merge inserts are noted for the change journal by the merge itself, in one set
  // (migration 0019: the per-row trigger stands aside while this is on); changed rows it updates
  // are noted by their trigger.
  await client.query(`SELECT read_changes_ready(), set_config('skinprices.listings_noted', 'on', true)`);
  await client.query(MERGE, [options.outbox]);
  await client.query(`SELECT set_config('skinprices.listings_noted', 'off', true)`);
  await late();
}

/**
 * Repeats in a quarter hour their row was not observed in: their hourly and daily candles only
 * (the row, its statistics and verdicts stay as they are; the marker rolls statistics into a new day).
 */
async function writeCandles(
  client: PoolClient,
  messages: readonly DecodedMessage<'listing'>[],
  options: ListingOptions,
): Promise<void> {
  const late = await lateCheck(client, await stageWithHistory(client, messages, options));
  await late();
}

/** Stages the records and writes their hourly and daily candles; returns their events. */
async function stageWithHistory(
  client: PoolClient,
  messages: readonly DecodedMessage<'listing'>[],
  options: ListingOptions,
): Promise<ListingEvent[]> {
  const events = messages.map((m) => m.value as ListingEvent);
  await stage(
    client,
    'listings_current',
    LISTING_COLUMNS,
    messages.map((m, i) => [...listingRow(events[i] as ListingEvent), m.offset]),
  );
  await writeHistory(client, events, options.hourlyRetentionDays, eachKeyOnce(events));
  return events;
}

/**
 * Whether the staged batch holds a priced close of a day before some row's statistics day (a
 * late event); returns what recomputes those rows' statistics (a no-op otherwise), to run once
 * the staged rows are merged.
 */
async function lateCheck(client: PoolClient, events: readonly ListingEvent[]): Promise<() => Promise<void>> {
  let firstPricedDay = Infinity;
  for (const e of events)
    if (e.price !== null) firstPricedDay = Math.min(firstPricedDay, Math.floor(e.observed_at / DAY_MS));
  // The latest stats day of each marketplace of the batch, one index step each: `max(stats_day)
  // WHERE market = ANY($1)` would read every row of those marketplaces by the same index instead
  // (a scalar-array condition gets no min/max shortcut), hundreds of times slower at full size.
  const { rows: maxDay } = await client.query<{ d: number | null }>(
    `SELECT (max(m.d) - DATE '1970-01-01') AS d
     FROM unnest($1::text[]) AS u(market),
          LATERAL (SELECT max(stats_day) AS d FROM listings_current c WHERE c.market = u.market) m`,
    [[...new Set(events.map((e) => e.market))]],
  );
  // A close of a day before a row's stats day changed (a late event): recompute those rows. Never
  // in order-preserving operation; the cheap check above keeps the join off the hot path.
  const late = maxDay[0]?.d;
  if (late === null || late === undefined || firstPricedDay >= late) return async () => undefined;
  return async () => {
    await refreshStats(
      client,
      `SELECT c.market, c.market_hash_name, c.phase, c.stats_day AS d
       FROM listings_current c
       JOIN (SELECT market, market_hash_name, phase, min((observed_at AT TIME ZONE 'UTC')::date) AS first_day
             FROM stage_listings_current WHERE price IS NOT NULL GROUP BY 1, 2, 3) s USING (market, market_hash_name, phase)
       WHERE s.first_day < c.stats_day`,
    );
  };
}

const STATS = ['base_1d', 'base_7d', 'base_30d', 'base_90d', 'avg_7d', 'avg_30d', 'avg_90d', 'median_7d'] as const;
/** The base or average after the merge: recomputed (excluded.stats_day set) or kept. */
const kept = (c: string) => `CASE WHEN excluded.stats_day IS NULL THEN listings_current.${c} ELSE excluded.${c} END`;

/**
 * One statement: the latest staged state per item; the state before it (all parts of a statement
 * see the same snapshot, so `old` is pre-update); statistics for rows entering a new day (or new),
 * from closes of earlier days (the lateral is skipped for the rest: a one-time filter); the
 * upsert guarded by observed_at, computing changes against the bases in force; and outbox rows
 * for what really changed ($1: write the outbox). Statistics are written in the same row
 * version as the price: computing them afterwards in a second UPDATE doubled the write cost.
 */
const MERGE = `
  WITH s AS (
    SELECT DISTINCT ON (market, market_hash_name, phase) *
    FROM stage_listings_current
    ORDER BY market, market_hash_name, phase, observed_at DESC, kafka_offset DESC
  ),
  old AS (
    SELECT c.market, c.market_hash_name, c.phase, c.price, c.count, c.stats_day, c.median_7d
    FROM listings_current c JOIN s USING (market, market_hash_name, phase)
  ),
  st AS (
    SELECT s.*, (s.observed_at AT TIME ZONE 'UTC')::date AS d, old.median_7d AS old_median_7d,
           (old.stats_day IS NULL OR old.stats_day < (s.observed_at AT TIME ZONE 'UTC')::date) AS new_day
    FROM s LEFT JOIN old USING (market, market_hash_name, phase)
  ),
  -- The outlier guard's peer reference (migrations/0007, 0008): the median of the item's current
  -- prices on the other marketplaces of its currency, one aggregate over the batch's items.
  peers AS (
    SELECT s.market, s.market_hash_name, s.phase, percentile_disc(0.5) WITHIN GROUP (ORDER BY c.price) AS peer
    FROM s JOIN listings_current c
      ON c.market_hash_name = s.market_hash_name AND c.phase = s.phase AND c.currency = s.currency
     AND c.market <> s.market AND c.price IS NOT NULL
    GROUP BY s.market, s.market_hash_name, s.phase
  ),
  -- MATERIALIZED: own and peer are plain columns for the guard below; pasted in as expressions
  -- they would make listing_confidence (which reads each more than once) too costly to inline.
  calc AS MATERIALIZED (
    SELECT st.*, a.*, ${statsBases('a', 'o')}, peers.peer,
           CASE WHEN st.new_day THEN a.m7 ELSE st.old_median_7d END AS own
    FROM st LEFT JOIN peers USING (market, market_hash_name, phase) LEFT JOIN LATERAL (
      SELECT ${statsAggregates('l', 'st.d')}
      FROM listing_daily l
      WHERE st.new_day AND l.market = st.market AND l.market_hash_name = st.market_hash_name
        AND l.phase = st.phase AND l.day >= st.d - 90 AND l.day < st.d
    ) a ON true
    LEFT JOIN LATERAL (${lastCloseBefore('st', 'st.d', 'a', 'st.new_day')}) o ON true
  ),
  up AS (
    INSERT INTO listings_current (${LISTING_COLUMNS.join(', ')}, changed_at, stats_day, ${STATS.join(', ')},
                                  change_24h, change_7d, change_30d, change_90d, is_outlier, confidence)
    SELECT ${LISTING_COLUMNS.join(', ')}, observed_at, CASE WHEN new_day THEN d END, b1, b7, b30, b90, a7, a30, a90, m7,
           pct_change(price, b1), pct_change(price, b7), pct_change(price, b30), pct_change(price, b90),
           -- The outlier guard against the own median in force and the peers as they stand; the
           -- listings marker judges the item's other rows again once this cycle is in.
           listing_outlier(price, own, peer), listing_confidence(price, count, own, peer)
    FROM calc
    ON CONFLICT (market, market_hash_name, phase) DO UPDATE SET ${setExcluded(LISTING_COLUMNS.slice(3))},
      -- updated_at as served: when the price or count last changed, not when it was last seen.
      changed_at = CASE WHEN (excluded.price, excluded.count) IS DISTINCT FROM (listings_current.price, listings_current.count)
                        THEN excluded.observed_at
                        ELSE coalesce(listings_current.changed_at, listings_current.observed_at) END,
      stats_day = coalesce(excluded.stats_day, listings_current.stats_day),
      ${STATS.map((c) => `${c} = ${kept(c)}`).join(', ')},
      change_24h = pct_change(excluded.price, ${kept('base_1d')}),
      change_7d = pct_change(excluded.price, ${kept('base_7d')}),
      change_30d = pct_change(excluded.price, ${kept('base_30d')}),
      change_90d = pct_change(excluded.price, ${kept('base_90d')}),
      is_outlier = excluded.is_outlier, confidence = excluded.confidence
    WHERE excluded.observed_at > listings_current.observed_at
    RETURNING market, market_hash_name, phase, currency, price, count, observed_at, is_outlier, confidence
  ),
  -- The inserted rows' keys for the change journal, and its entry queued for the commit.
  noted AS (
    INSERT INTO pg_temp.read_change_keys (tag, name, phase)
    SELECT 'listing:' || up.market, up.market_hash_name, up.phase
    FROM up LEFT JOIN old USING (market, market_hash_name, phase)
    WHERE old.market IS NULL
    RETURNING 1
  ),
  due AS (
    INSERT INTO pg_temp.read_change_due SELECT true WHERE EXISTS (SELECT 1 FROM noted) ON CONFLICT DO NOTHING
  ),
  -- Where each item is listed (the catalogue is what at least two marketplaces list): written for
  -- keys new or listed again, with the batch's first priced observation; known pairs cost nothing.
  im AS (
    INSERT INTO item_markets (market_hash_name, phase, market, first_seen_at)
    SELECT g.market_hash_name, g.phase, g.market, g.first
    FROM (SELECT market, market_hash_name, phase, min(observed_at) AS first
          FROM stage_listings_current WHERE price IS NOT NULL GROUP BY 1, 2, 3) g
    LEFT JOIN old USING (market, market_hash_name, phase)
    WHERE old.market IS NULL OR old.price IS NULL
    ON CONFLICT (market_hash_name, phase, market) DO NOTHING
  )
  INSERT INTO price_change_outbox (market, market_hash_name, phase, currency, old_price, new_price,
                                   old_count, new_count, observed_at, is_outlier, confidence)
  SELECT up.market, up.market_hash_name, up.phase, up.currency, old.price, up.price, old.count, up.count, up.observed_at,
         up.is_outlier, up.confidence
  FROM up LEFT JOIN old USING (market, market_hash_name, phase)
  WHERE $1::boolean
    AND (old.market IS NULL OR old.price IS DISTINCT FROM up.price OR old.count IS DISTINCT FROM up.count)`;

/**
 * One history table's upsert of the staged batch: per bucket the close (the last observation:
 * price, count, observed_at, ordered by observed_at then Kafka offset as the current state is),
 * the open (the first priced observation, with when it was observed), the high and the low.
 *
 * The merge with the stored row is a join of two candles of the same bucket, so any batch split,
 * order or redelivery of the same events gives the same row: the close from the later observed_at
 * (strictly later: on a tie the stored one stays), the open from the strictly earlier open_at
 * (likewise), high the greater, low the lesser. An event older than the stored close therefore
 * still lowers the low, raises the high or moves the open earlier. The WHERE only skips updates
 * that change nothing (a redelivery writes no new row versions). open_at = '-infinity' marks a
 * row written before candles were recorded (migration 0005): its open, high and low are unknown
 * and stay NULL rather than becoming a candle of part of the bucket.
 *
 * The source rows are candles themselves (an observation is a candle of one price: see
 * OBSERVATIONS), so imported hourly candles (writeImportedHours) merge by the same rules as
 * observations, with each other and with what the live pipeline saw of the same hour.
 */
function candleUpsert(t: {
  table: 'listing_hourly' | 'listing_daily';
  /** The bucket's key column. */
  bucket: string;
  /** The bucket of an observation, as an expression over the staged row. */
  of: string;
  /** The close's column. */
  close: string;
  /** Which source rows count. */
  where: string;
  /**
   * The candles merged: a relation of market, market_hash_name, phase, price (the close), count,
   * observed_at (the close's time), open, open_at, high, low and kafka_offset.
   */
  source: string;
  /**
   * The caller knows the source has one row per bucket: merged with the stored rows as they are,
   * without the aggregate (the same result; the aggregate's sort costs a third of the insert).
   */
  unique?: boolean;
}): string {
  const last = (c: string) => `(array_agg(${c} ORDER BY observed_at DESC, kafka_offset DESC))[1]`;
  const later = `excluded.observed_at > ${t.table}.observed_at`;
  const unknown = `${t.table}.open_at = '-infinity'`;
  const select = t.unique
    ? `SELECT market, market_hash_name, phase, ${t.of}, price, count, observed_at, open, high, low, open_at
       FROM ${t.source}
       WHERE ${t.where}`
    : `SELECT market, market_hash_name, phase, ${t.of}, ${last('price')}, ${last('count')}, max(observed_at),
           (array_agg(open ORDER BY open_at, kafka_offset) FILTER (WHERE open IS NOT NULL))[1],
           max(high), min(low), min(open_at) FILTER (WHERE open IS NOT NULL)
       FROM ${t.source}
       WHERE ${t.where}
       GROUP BY market, market_hash_name, phase, ${t.of}`;
  return `
    INSERT INTO ${t.table} (market, market_hash_name, phase, ${t.bucket}, ${t.close}, count, observed_at,
                            open, high, low, open_at)
    ${select}
    ON CONFLICT (market, market_hash_name, phase, ${t.bucket}) DO UPDATE SET
      ${t.close} = CASE WHEN ${later} THEN excluded.${t.close} ELSE ${t.table}.${t.close} END,
      count = CASE WHEN ${later} THEN excluded.count ELSE ${t.table}.count END,
      observed_at = greatest(${t.table}.observed_at, excluded.observed_at),
      open = CASE WHEN ${t.table}.open_at IS NULL OR excluded.open_at < ${t.table}.open_at
                  THEN excluded.open ELSE ${t.table}.open END,
      open_at = least(${t.table}.open_at, excluded.open_at),
      high = CASE WHEN ${unknown} THEN NULL ELSE greatest(${t.table}.high, excluded.high) END,
      low = CASE WHEN ${unknown} THEN NULL ELSE least(${t.table}.low, excluded.low) END
    WHERE ${later}
       OR excluded.open_at < ${t.table}.open_at OR (${t.table}.open_at IS NULL AND excluded.open_at IS NOT NULL)
       OR excluded.high > ${t.table}.high OR excluded.low < ${t.table}.low`;
}

/** The staged listing observations, each a candle of its one price (none without a price). */
const OBSERVATIONS = `(SELECT market, market_hash_name, phase, price, count, observed_at, kafka_offset,
                              price AS open, CASE WHEN price IS NOT NULL THEN observed_at END AS open_at,
                              price AS high, price AS low
                       FROM stage_listings_current) o`;

/** The two candle tables: their bucket of an observation time, and their close's column. */
const HOURLY_TABLE = {
  table: 'listing_hourly',
  bucket: 'hour',
  of: `date_trunc('hour', observed_at)`,
  close: 'price',
} as const;
const DAILY_TABLE = {
  table: 'listing_daily',
  bucket: 'day',
  of: `(observed_at AT TIME ZONE 'UTC')::date`,
  close: 'close',
} as const;

/** A candle table's columns in COPY order (the benchmark's raw COPY of the write set uses them too). */
export const candleColumns = (t: { bucket: string; close: string }): string[] => [
  'market',
  'market_hash_name',
  'phase',
  t.bucket,
  t.close,
  'count',
  'observed_at',
  'open',
  'high',
  'low',
  'open_at',
];

/** Hourly candles of every observation (an hour without a price keeps NULL open/high/low). */
const HOURLY = candleUpsert({ ...HOURLY_TABLE, where: 'observed_at >= $1', source: OBSERVATIONS });

/** Daily candles of the priced observations (a day without a price has no row). */
const DAILY = candleUpsert({ ...DAILY_TABLE, where: 'price IS NOT NULL', source: OBSERVATIONS });

/**
 * The same two for a batch that holds each item of a marketplace at most once (eachKeyOnce), so
 * at most once per hour and day: a FULL cycle's pages, a cold start's, a burst's. The aggregate
 * over a bucket of one observation is that observation, so the rows written are the same without
 * its sort and grouping, about a third of each candle insert (as for imported hours below).
 */
const HOURLY_ONCE = candleUpsert({ ...HOURLY_TABLE, where: 'observed_at >= $1', source: OBSERVATIONS, unique: true });
const DAILY_ONCE = candleUpsert({ ...DAILY_TABLE, where: 'price IS NOT NULL', source: OBSERVATIONS, unique: true });

/**
 * Whether no (market, item, phase) occurs twice among the events. Checked on the key alone, not
 * on its hour or day: a bucket is PostgreSQL's (date_trunc follows the session's time zone), and
 * a key that occurs once is in one bucket whatever the zone.
 */
export function eachKeyOnce(events: readonly ListingEvent[]): boolean {
  const seen = new Set<string>();
  for (const e of events) {
    const key = marketItemKey(e.market, e.market_hash_name, e.phase);
    if (seen.has(key)) return false;
    seen.add(key);
  }
  return true;
}

/** The staged imported hours (writeImportedHours): already candles. */
const IMPORTED_HOURS = 'stage_listing_hourly';
const IMPORTED_HOURLY = candleUpsert({ ...HOURLY_TABLE, where: 'observed_at >= $1', source: IMPORTED_HOURS });
/** The common case: no hour twice in the batch (a day imported twice lands in one batch rarely). */
const IMPORTED_HOURLY_UNIQUE = candleUpsert({
  ...HOURLY_TABLE,
  where: 'observed_at >= $1',
  source: IMPORTED_HOURS,
  unique: true,
});
/** A day's candle from its imported hours, merged with the day's observations (if any). */
const IMPORTED_DAILY = candleUpsert({ ...DAILY_TABLE, where: 'true', source: IMPORTED_HOURS });

const HOUR_MS = 3_600_000;

/**
 * The hourly candles a history import carries (history-hours.v1, and the `hours` of history.v1
 * records written with its withdrawn version 2: the warm demo's ~100 days) into listing_hourly,
 * and the day's candle they make into listing_daily (its open, high and low; the close is the
 * imported close, books.ts, whichever comes first: its observation is the later). Each hour is a candle
 * opened at the hour's start and closed at its last millisecond, so it merges with what the live
 * pipeline observed of the same hour by the rules of candleUpsert: the imported open and close
 * win (they are the hour's ends), high and low take the extremes of both. Hours older than the
 * retention are not written, as for observations.
 */
export async function writeImportedHours(
  client: PoolClient,
  messages: readonly DecodedMessage<'historyPoint' | 'historyHours'>[],
  retentionDays: number,
): Promise<void> {
  const rows: CopyValue[][] = [];
  const buckets = new Set<string>();
  let repeated = false;
  for (const m of messages) {
    const e = m.value as HistoryPointEvent | HistoryHoursEvent;
    for (const h of e.hours ?? []) {
      const bucket = `${marketItemKey(e.market, e.market_hash_name, e.phase)}\u0000${h.hour}`;
      if (buckets.has(bucket)) repeated = true;
      else buckets.add(bucket);
      const open = new Date(h.hour);
      const close = new Date(h.hour + HOUR_MS - 1);
      // In candleColumns order, then the offset.
      rows.push([
        e.market,
        e.market_hash_name,
        e.phase,
        open,
        h.close,
        h.count,
        close,
        h.open,
        h.high,
        h.low,
        open,
        m.offset,
      ]);
    }
  }
  if (rows.length === 0) return;
  const { rows: clock } = await client.query<{ now: Date | null }>('SELECT max(now) AS now FROM read_model_clock');
  const now = clock[0]?.now?.getTime();
  const oldest = now === undefined ? 0 : startOfUtcDay(now) - retentionDays * DAY_MS;
  await ensureHourPartitions(
    client,
    rows.map((r) => (r[3] as Date).getTime()).filter((t) => t >= oldest),
  );
  await stage(client, 'listing_hourly', candleColumns(HOURLY_TABLE), rows);
  await client.query(repeated ? IMPORTED_HOURLY : IMPORTED_HOURLY_UNIQUE, [new Date(oldest)]);
  await client.query(IMPORTED_DAILY);
}

/**
 * History: hourly and daily candles (open, high, low, close and the close's count). `once`: no
 * key occurs twice in the staged batch (eachKeyOnce).
 */
async function writeHistory(
  client: PoolClient,
  events: readonly ListingEvent[],
  retentionDays: number,
  once: boolean,
): Promise<void> {
  const { rows } = await client.query<{ now: Date | null }>('SELECT max(now) AS now FROM read_model_clock');
  const clock = rows[0]?.now?.getTime();
  // Hours older than the retention are not written: their partition is (or is about to be) dropped.
  const oldest = clock === undefined ? 0 : startOfUtcDay(clock) - retentionDays * DAY_MS;
  await ensureHourPartitions(
    client,
    events.map((e) => e.observed_at).filter((t) => t >= oldest),
  );
  await client.query(once ? HOURLY_ONCE : HOURLY, [new Date(oldest)]);
  await client.query(once ? DAILY_ONCE : DAILY);
}

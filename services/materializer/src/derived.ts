/**
 * Derived values, computed in PostgreSQL `numeric` (exact decimal arithmetic like decimal.js, next
 * to the data, so 90 days of closes per item never travel to Node). Each function is a pure
 * function of the tables and its explicit `now`: no wall clock, so replays agree.
 *
 * Definitions (design.md "Materialisation rules"; D = the row's stats day, a UTC date):
 *   base_Nd   = the last close at or before day D − N (N = 1, 7, 30, 90; change_24h uses base_1d):
 *               an item not listed on that very day is compared with its last price before it
 *   change_Nd = (price − base_Nd) / base_Nd × 100     rounded to 2 decimals, half away from zero
 *   avg_Nd    = mean of the closes of days D−N … D−1  rounded likewise (days without close skipped)
 *   median_7d = the median close of days D−7 … D−1 (percentile_disc: an actual close; at least 3
 *               closes): the outlier guard's own reference (migrations/0007)
 * Each is NULL without its inputs (a base: no close that old at all). Statistics only read closed days, so they change once a day
 * (or when a late close arrives), while changes follow every price update.
 */
import { DAY_MS, MARKET_CAP_MARKET, MARKETS, startOfUtcDay } from '@skinprices/domain';
import type { PoolClient } from '@skinprices/store';
import { hourPartitionName } from './partitions.js';
import { snapshotXminAgeSql, usableSnapshotAge } from './snapshot-age.js';

/**
 * The statistics of one item as aggregates over its daily closes `l` (already restricted to the
 * 90 days before the stats day `d`): the bases found within those days (b1w b7w b30w b90w: the
 * close of the latest day at or before d − N; NULL when the window has none, see lastCloseBefore)
 * and averages a7 a30 a90. A base is the max of [day − d, close] pairs: arrays compare element by
 * element, so the latest day wins, in one pass without sorting the closes.
 */
export function statsAggregates(l: string, d: string): string {
  const latest = (n: number) =>
    `(max(ARRAY[(${l}.day - ${d})::numeric, ${l}.close]) FILTER (WHERE ${l}.day <= ${d} - ${n}))[2]`;
  return `${latest(1)} AS b1w,
          ${latest(7)} AS b7w,
          ${latest(30)} AS b30w,
          max(${l}.close) FILTER (WHERE ${l}.day = ${d} - 90) AS b90w,
          round(avg(${l}.close) FILTER (WHERE ${l}.day >= ${d} - 7), 2) AS a7,
          round(avg(${l}.close) FILTER (WHERE ${l}.day >= ${d} - 30), 2) AS a30,
          round(avg(${l}.close), 2) AS a90,
          CASE WHEN count(${l}.close) FILTER (WHERE ${l}.day >= ${d} - 7) >= 3
               THEN percentile_disc(0.5) WITHIN GROUP (ORDER BY ${l}.close) FILTER (WHERE ${l}.day >= ${d} - 7) END AS m7`;
}

/**
 * The bases of a row whose statistics `a` (statsAggregates) found in the 90-day window, completed
 * with the last close before the window (`o`, lastCloseBefore): b1 b7 b30 b90.
 */
export const statsBases = (a: string, o: string): string =>
  [1, 7, 30, 90].map((n) => `coalesce(${a}.b${n}w, ${o}.close) AS b${n}`).join(', ');

/**
 * A lateral probe for the last close before the 90-day window of the stats day `d` of the item
 * `k` (market, market_hash_name, phase): one index step back, taken only when the window holds no
 * close for day d − 90 (`a.b90w`), so only for items not listed every day.
 */
export const lastCloseBefore = (k: string, d: string, a: string, when = 'true'): string =>
  `SELECT o.close FROM listing_daily o
   WHERE ${when} AND ${a}.b90w IS NULL AND o.market = ${k}.market AND o.market_hash_name = ${k}.market_hash_name
     AND o.phase = ${k}.phase AND o.day < ${d} - 90
   ORDER BY o.day DESC LIMIT 1`;

/**
 * Recomputes the statistics of the listings rows selected by `targets`, a query returning
 * (market, market_hash_name, phase, d) with d the stats day to compute for. Returns the rows
 * whose values changed (only those are written).
 */
export async function refreshStats(client: PoolClient, targets: string, params: unknown[] = []): Promise<number> {
  const res = await client.query(
    `WITH t AS (${targets}),
     a AS (
       SELECT t.market, t.market_hash_name, t.phase, t.d,
              ${statsAggregates('l', 't.d')}
       FROM t LEFT JOIN listing_daily l
         ON l.market = t.market AND l.market_hash_name = t.market_hash_name AND l.phase = t.phase
        AND l.day >= t.d - 90 AND l.day < t.d
       GROUP BY t.market, t.market_hash_name, t.phase, t.d
     ),
     b AS (
       SELECT a.market, a.market_hash_name, a.phase, a.d, a.a7, a.a30, a.a90, a.m7, ${statsBases('a', 'o')}
       FROM a LEFT JOIN LATERAL (${lastCloseBefore('a', 'a.d', 'a')}) o ON true
     ),
     -- The outlier guard's peer reference of each target (see the listings merge).
     peers AS (
       SELECT t.market, t.market_hash_name, t.phase, percentile_disc(0.5) WITHIN GROUP (ORDER BY p.price) AS peer
       FROM t JOIN listings_current c USING (market, market_hash_name, phase)
       JOIN listings_current p
         ON p.market_hash_name = c.market_hash_name AND p.phase = c.phase AND p.currency = c.currency
        AND p.market <> c.market AND p.price IS NOT NULL
       GROUP BY t.market, t.market_hash_name, t.phase
     )
     UPDATE listings_current c SET
       stats_day = a.d, base_1d = a.b1, base_7d = a.b7, base_30d = a.b30, base_90d = a.b90,
       avg_7d = a.a7, avg_30d = a.a30, avg_90d = a.a90, median_7d = a.m7,
       change_24h = pct_change(c.price, a.b1), change_7d = pct_change(c.price, a.b7),
       change_30d = pct_change(c.price, a.b30), change_90d = pct_change(c.price, a.b90),
       -- A new own reference: judge the price against it (and the peers as they stand) again.
       is_outlier = listing_outlier(c.price, a.m7, a.peer),
       confidence = listing_confidence(c.price, c.count, a.m7, a.peer)
     FROM (SELECT b.*, peers.peer FROM b LEFT JOIN peers USING (market, market_hash_name, phase)) a
     WHERE c.market = a.market AND c.market_hash_name = a.market_hash_name AND c.phase = a.phase
       -- Only rows whose values move are written: a rewrite with equal values is a new row
       -- version all the same, which the API's patched lists read as a change (and autovacuum
       -- must clean up). A complete cycle rolls every row's stats day over once a day, and
       -- history restates rows whose closes it may not change.
       AND (c.stats_day, c.base_1d, c.base_7d, c.base_30d, c.base_90d, c.avg_7d, c.avg_30d, c.avg_90d, c.median_7d,
            c.change_24h, c.change_7d, c.change_30d, c.change_90d, c.is_outlier, c.confidence)
           IS DISTINCT FROM
           (a.d, a.b1, a.b7, a.b30, a.b90, a.a7, a.a30, a.a90, a.m7,
            pct_change(c.price, a.b1), pct_change(c.price, a.b7), pct_change(c.price, a.b30), pct_change(c.price, a.b90),
            listing_outlier(c.price, a.m7, a.peer), listing_confidence(c.price, c.count, a.m7, a.peer))`,
    params,
  );
  return res.rowCount ?? 0;
}

/** A complete listings cycle of `market` vouches for every row of it up to `now`: roll stats over. */
export async function rollStatsForward(client: PoolClient, market: string, now: Date): Promise<number> {
  return refreshStats(
    client,
    `SELECT market, market_hash_name, phase, ($2::timestamptz AT TIME ZONE 'UTC')::date AS d
     FROM listings_current
     WHERE market = $1 AND (stats_day IS NULL OR stats_day < ($2::timestamptz AT TIME ZONE 'UTC')::date)`,
    [market, now],
  );
}

/**
 * Liquidity per item (name + phase) across marketplaces for the clock's UTC day D, from the state
 * at the start of D (migration 0020; formula in migrations/0002, inputs below): it changes when
 * the day rolls over, and within the day only when late data about the days before arrive, so a
 * cycle in which no price changed changes no score. Merged, not replaced: only rows whose values
 * changed are written (`as_of` then says when they last changed), and items that lost every
 * listing drop out.
 *
 * The shown score is kept apart (item_liquidity_score, migration 0013) and written only when it
 * changes; every changed score is a row of every price list that shows the item.
 *
 * Within a day only the items whose inputs may have moved since the last refresh are recomputed
 * (migration 0015): see LIQUIDITY_DIRTY. Every item is recomputed when the day changed since the
 * last refresh, after a history cycle restated closes (`whole`), on a schema's first refresh, or
 * when the last snapshot is too old for the age filter. Returns which it did and how many items
 * it read.
 */
export async function refreshLiquidity(
  client: PoolClient,
  now: Date,
  options: { whole?: boolean } = {},
): Promise<LiquidityRefresh> {
  const { rows: state } = await client.query<{ clock: Date; age: number }>(
    `SELECT clock, ${SNAPSHOT_XMIN_AGE} AS age FROM liquidity_refresh`,
  );
  // Taken before the refresh reads anything: every statement after it sees at least what this
  // snapshot sees, so what it does not see (written later, or by a transaction still running)
  // is recomputed next time, possibly twice, never not at all.
  const { rows: taken } = await client.query<{ snapshot: string }>(`SELECT pg_current_snapshot()::text AS snapshot`);
  const last = state[0];
  // Ages are 32-bit (age(xid)): past a quarter of the id space the pre-filter could wrap.
  const incremental =
    options.whole !== true &&
    last !== undefined &&
    usableSnapshotAge(last.age) &&
    startOfUtcDay(last.clock.getTime()) === startOfUtcDay(now.getTime());
  const res = await client.query<{ items: number }>(liquiditySql(incremental ? 'dirty' : 'all'), [now]);
  await client.query(
    `INSERT INTO liquidity_refresh (id, snapshot, clock) VALUES (true, $1::pg_snapshot, $2)
     ON CONFLICT (id) DO UPDATE SET snapshot = excluded.snapshot, clock = excluded.clock`,
    [(taken[0] as { snapshot: string }).snapshot, now],
  );
  return { scope: incremental ? 'dirty' : 'all', items: res.rows[0]?.items ?? 0 };
}

/** The age (transactions since) of the stored snapshot's xmin. */
const SNAPSHOT_XMIN_AGE = snapshotXminAgeSql('snapshot');

/** What one liquidity refresh did: every item, or the ones whose inputs moved; items computed. */
export interface LiquidityRefresh {
  scope: 'all' | 'dirty';
  items: number;
}

/** The start of the clock's ($1) UTC day: the moment the day's liquidity describes. */
const DAY_START = `date_trunc('day', $1::timestamptz, 'UTC')`;
/** The day before it, whose closes the day's liquidity reads. */
const CLOSE_DAY = `(${DAY_START} AT TIME ZONE 'UTC')::date - 1`;

/**
 * The sales windows, in hours before the day's start: `timestamptz - interval '7 days'` is calendar
 * days in the session's time zone, which across a daylight-saving change is not 168 hours.
 */
const WEEK = `interval '168 hours'`;
const MONTH = `interval '720 hours'`;

/**
 * A row the last refresh may not have seen: written by a transaction not older than its snapshot's
 * xmin, the oldest transaction running when it was taken (`bound`: that xmin's age, read in the
 * same statement, so the two ages share their reference even outside a transaction). A superset
 * of the rows the snapshot did not see (rows of transactions that committed just before it are
 * computed again), because the exact test, pg_visible_in_snapshot, is wrong for subtransactions:
 * the ingest path writes under a savepoint (poison.ts), a subtransaction's id is not among a
 * snapshot's running ones, and behind a transaction with a higher id that has committed, a batch
 * still running would be judged seen and its items never recomputed (liquidity-incremental.test.ts).
 */
const UNSEEN = `age(xmin) <= (SELECT a FROM bound)`;

/**
 * The items whose liquidity may differ from the last refresh's of the same day: a listing row
 * (a listing observed in the days before also writes its close), a buy order or a sale before the
 * day's start written since. Rows of these tables are updated, never deleted (a vanished listing
 * or order is cleared, markers.ts). Closes restated by history points are not listing rows: their
 * cycle makes the next refresh whole (markers.ts). Nothing else is an input, so every other item
 * would compute the values it has: the incremental refresh writes exactly the rows a full one
 * would (the integration test compares the two). Each part is age-filtered: a seq scan of
 * listings_current checking ages is ~1/20 of aggregating it whole.
 */
const LIQUIDITY_DIRTY = `
  SELECT market_hash_name, phase FROM listings_current WHERE ${UNSEEN}
  UNION
  SELECT market_hash_name, phase FROM buyorders_current WHERE ${UNSEEN}
  UNION
  SELECT market_hash_name, phase FROM sales
  WHERE sold_at >= ${DAY_START} - ${MONTH} AND sold_at < ${DAY_START} AND ${UNSEEN}`;

/**
 * The liquidity refresh over every item (`all`) or over the items LIQUIDITY_DIRTY names (`dirty`);
 * one text, so the two cannot drift apart. The inputs, at the start of the clock's day D:
 *   n, ask  each listing marketplace's close of day D−1 (listing_daily; its count, and the lowest
 *           CNY close): a marketplace without a close that day adds nothing
 *   s7      sales in the 168 hours before the start of D (velocity available with a sale in the
 *           720 hours before)
 *   bid     the best CNY bid (tier '') held at the start of D: a buy order's price if observed
 *           before, else its prior observation's (migration 0020) if that was before; else unknown
 * Returns one row: the number of items computed.
 */
function liquiditySql(scope: 'all' | 'dirty'): string {
  const dirty = scope === 'dirty';
  /** Restricts a relation's rows to the dirty items. */
  const only = dirty ? 'JOIN t USING (market_hash_name, phase)' : '';
  /** Which items' rows may be deleted: the dirty ones no longer listed, or any no longer listed. */
  const gone = (table: string) =>
    dirty
      ? `DELETE FROM ${table} i USING t
         WHERE i.market_hash_name = t.market_hash_name AND i.phase = t.phase
           AND NOT EXISTS (SELECT 1 FROM fresh f WHERE f.market_hash_name = i.market_hash_name AND f.phase = i.phase)`
      : `DELETE FROM ${table} i
         WHERE NOT EXISTS (SELECT 1 FROM fresh f WHERE f.market_hash_name = i.market_hash_name AND f.phase = i.phase)`;
  return `WITH ${dirty ? `bound AS (SELECT ${SNAPSHOT_XMIN_AGE} AS a FROM liquidity_refresh), t AS (${LIQUIDITY_DIRTY}),` : ''}
     l AS (
       SELECT c.market_hash_name, c.phase,
              sum(d.count)::int AS n,
              min(d.close) FILTER (WHERE c.currency = 'CNY') AS ask
       FROM listings_current c ${only}
       JOIN listing_daily d
         ON d.market = c.market AND d.market_hash_name = c.market_hash_name AND d.phase = c.phase
        AND d.day = ${CLOSE_DAY}
       GROUP BY 1, 2
     ),
     s AS (
       SELECT market_hash_name, phase, count(*) FILTER (WHERE sold_at >= ${DAY_START} - ${WEEK})::int AS s7
       FROM sales ${only} WHERE sold_at >= ${DAY_START} - ${MONTH} AND sold_at < ${DAY_START}
       GROUP BY 1, 2
     ),
     b AS (
       SELECT market_hash_name, phase,
              max(CASE WHEN observed_at < ${DAY_START} THEN price
                       WHEN prior_at < ${DAY_START} THEN prior_price END) AS bid
       FROM buyorders_current ${only} WHERE currency = 'CNY' AND tier = '' GROUP BY 1, 2
     ),
     -- (least() skips NULLs, so the spread must be NULL explicitly without a bid or an ask)
     parts AS (
       SELECT l.market_hash_name, l.phase, l.n, s.s7, b.bid, l.ask,
              l.n::numeric / (l.n + 20) AS depth,
              s.s7::numeric / (s.s7 + 10) AS velocity,
              CASE WHEN b.bid IS NOT NULL AND l.ask IS NOT NULL THEN least(1, b.bid / l.ask) END AS spread
       FROM l LEFT JOIN s USING (market_hash_name, phase) LEFT JOIN b USING (market_hash_name, phase)
       WHERE l.n > 0
     ),
     fresh AS (
       SELECT market_hash_name, phase, n, s7, bid, ask,
              CASE WHEN velocity IS NULL AND spread IS NULL THEN NULL
                   ELSE round(100 * (depth + coalesce(velocity, 0) + coalesce(spread, 0))
                              / (1 + (velocity IS NOT NULL)::int + (spread IS NOT NULL)::int), 2) END AS score
       FROM parts
     ),
     -- Disjoint from the upserts' rows (those are in fresh), so one statement may do all four.
     gone AS (${gone('item_liquidity')}),
     gone_score AS (${gone('item_liquidity_score')}),
     -- Unchanged rows are left out before the upsert: ON CONFLICT DO UPDATE ... WHERE false still
     -- locks (writes) every row it matches, 35k a run.
     scored AS (
       INSERT INTO item_liquidity_score AS i (market_hash_name, phase, score, as_of)
       SELECT f.market_hash_name, f.phase, f.score, $1 FROM fresh f
       LEFT JOIN item_liquidity_score o USING (market_hash_name, phase)
       WHERE o.market_hash_name IS NULL OR o.score IS DISTINCT FROM f.score
       ON CONFLICT (market_hash_name, phase) DO UPDATE SET score = excluded.score, as_of = excluded.as_of
       WHERE i.score IS DISTINCT FROM excluded.score
     ),
     merged AS (
       INSERT INTO item_liquidity AS i (market_hash_name, phase, listings, sales_7d, best_bid, lowest_ask, score, as_of)
       SELECT f.market_hash_name, f.phase, f.n, f.s7, f.bid, f.ask, f.score, $1 FROM fresh f
       LEFT JOIN item_liquidity o USING (market_hash_name, phase)
       WHERE o.market_hash_name IS NULL
          OR (o.listings, o.sales_7d, o.best_bid, o.lowest_ask, o.score) IS DISTINCT FROM (f.n, f.s7, f.bid, f.ask, f.score)
       ON CONFLICT (market_hash_name, phase) DO UPDATE SET
         listings = excluded.listings, sales_7d = excluded.sales_7d, best_bid = excluded.best_bid,
         lowest_ask = excluded.lowest_ask, score = excluded.score, as_of = excluded.as_of
       WHERE (i.listings, i.sales_7d, i.best_bid, i.lowest_ask, i.score)
             IS DISTINCT FROM (excluded.listings, excluded.sales_7d, excluded.best_bid, excluded.lowest_ask, excluded.score)
     )
     SELECT count(*)::int AS items FROM l`;
}

/** The marketplace the market-cap index is computed over (the descriptor's), and its cleaning bounds. */
const MARKET_CAP = {
  market: MARKET_CAP_MARKET.slug,
  maxPrice: '1000000',
  minCount: 2,
  lookbackHours: 6,
} as const;
/** The outlier guard's peers of the market cap: the other marketplaces of its currency. */
const MARKET_CAP_PEERS: readonly string[] = MARKETS.filter(
  (m) =>
    m.currency === MARKET_CAP_MARKET.currency && m.slug !== MARKET_CAP.market && m.capabilities.includes('listings'),
).map((m) => m.slug);

/**
 * Market-cap points for every hour from `from` to `to` (the span of a complete CN-A listings
 * cycle): each catalogue item's last snapshot in the lookback up to the end of the hour, cleaned,
 * summed. Catalogue membership is judged as of that hour (first seen on two marketplaces by then),
 * so a later-listed item never rewrites an old point. The day's point follows its last hour.
 */
export async function refreshMarketCap(client: PoolClient, from: Date, to: Date): Promise<void> {
  const m = MARKET_CAP;
  await client.query(
    `WITH hours AS (
       SELECT generate_series(date_trunc('hour', $1::timestamptz), date_trunc('hour', $2::timestamptz), interval '1 hour') AS hour
     ),
     snap AS (
       SELECT h.hour, x.market_hash_name, x.phase, x.price, x.count
       FROM hours h CROSS JOIN LATERAL (
         SELECT DISTINCT ON (lh.market_hash_name, lh.phase) lh.market_hash_name, lh.phase, lh.price, lh.count
         FROM listing_hourly lh
         WHERE lh.market = $3 AND lh.hour <= h.hour AND lh.hour > h.hour - make_interval(hours => $6)
         ORDER BY lh.market_hash_name, lh.phase, lh.hour DESC
       ) x
     ),
     clean AS (
       SELECT s.hour, s.price * s.count AS value
       FROM snap s
       WHERE s.price > 0 AND s.price < $4::numeric AND s.count >= $5
         AND (SELECT count(*) FROM item_markets im
              WHERE im.market_hash_name = s.market_hash_name AND im.phase = s.phase
                AND im.first_seen_at < s.hour + interval '1 hour') >= 2
         -- The outlier guard (migrations/0007) as of that hour: the own reference from the closes
         -- of the 7 days before, the peers' from their snapshots in the same lookback.
         AND (listing_quality(s.price, s.count,
               (SELECT CASE WHEN count(*) >= 3 THEN percentile_disc(0.5) WITHIN GROUP (ORDER BY l.close) END
                FROM listing_daily l
                WHERE l.market = $3 AND l.market_hash_name = s.market_hash_name AND l.phase = s.phase
                  AND l.day >= (s.hour AT TIME ZONE 'UTC')::date - 7 AND l.day < (s.hour AT TIME ZONE 'UTC')::date),
               (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY p.price)
                FROM (SELECT DISTINCT ON (lh.market) lh.price
                      FROM listing_hourly lh
                      WHERE lh.market = ANY($7) AND lh.market_hash_name = s.market_hash_name AND lh.phase = s.phase
                        AND lh.hour <= s.hour AND lh.hour > s.hour - make_interval(hours => $6)
                      ORDER BY lh.market, lh.hour DESC) p
                WHERE p.price IS NOT NULL))).is_outlier IS NOT TRUE
     )
     INSERT INTO market_cap_hourly (hour, market_cap, items, cleaned)
     SELECT h.hour, coalesce(sum(c.value), 0), count(c.value), true
     FROM hours h LEFT JOIN clean c USING (hour)
     GROUP BY h.hour
     ON CONFLICT (hour) DO UPDATE SET market_cap = excluded.market_cap, items = excluded.items, cleaned = true`,
    [from, to, m.market, m.maxPrice, m.minCount, m.lookbackHours, MARKET_CAP_PEERS],
  );
  await client.query(
    `INSERT INTO market_cap_daily (day, market_cap, items, cleaned)
     SELECT DISTINCT ON ((hour AT TIME ZONE 'UTC')::date) (hour AT TIME ZONE 'UTC')::date, market_cap, items, true
     FROM market_cap_hourly
     WHERE hour >= date_trunc('day', $1::timestamptz) AND hour < date_trunc('day', $2::timestamptz) + interval '1 day'
     ORDER BY (hour AT TIME ZONE 'UTC')::date, hour DESC
     ON CONFLICT (day) DO UPDATE SET market_cap = excluded.market_cap, items = excluded.items, cleaned = true`,
    [from, to],
  );
  // Days of the last week without any cleaned point (the CN-A poller was down all day): the fast
  // fallback from daily closes, without the catalogue filter, marked cleaned = false.
  await client.query(
    `INSERT INTO market_cap_daily (day, market_cap, items, cleaned)
     SELECT day, sum(close * count), count(*), false
     FROM listing_daily
     WHERE market = $1 AND day >= ($2::timestamptz AT TIME ZONE 'UTC')::date - 7
       AND day < ($2::timestamptz AT TIME ZONE 'UTC')::date
       AND close < $3::numeric AND count >= $4
     GROUP BY day
     ON CONFLICT (day) DO NOTHING`,
    [m.market, to, m.maxPrice, m.minCount],
  );
}

/** Drops the day partitions of listing_hourly older than `retentionDays` before `now`. */
export async function dropOldHourPartitions(client: PoolClient, now: Date, retentionDays: number): Promise<string[]> {
  const cutoff = hourPartitionName(startOfUtcDay(now.getTime()) - retentionDays * DAY_MS);
  const { rows } = await client.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_inherits i
     JOIN pg_class c ON c.oid = i.inhrelid
     JOIN pg_class p ON p.oid = i.inhparent
     WHERE p.relname = 'listing_hourly' AND p.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
       AND c.relname < $1
     ORDER BY 1`,
    [cutoff],
  );
  for (const { name } of rows) await client.query(`DROP TABLE ${name}`);
  return rows.map((r) => r.name);
}

/** Moves the read model's clock forward to `at` (never back); returns the clock. */
export async function advanceClock(client: PoolClient, at: Date): Promise<Date> {
  const { rows } = await client.query<{ now: Date }>(
    `INSERT INTO read_model_clock (id, now) VALUES (true, $1)
     ON CONFLICT (id) DO UPDATE SET now = greatest(read_model_clock.now, excluded.now)
     RETURNING now`,
    [at],
  );
  return (rows[0] as { now: Date }).now;
}

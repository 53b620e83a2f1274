/**
 * poll-cycles.v1: markers are stored on arrival and applied once the consumer has read their data
 * topic past the cycle's end offsets (topics are not ordered with each other, so a marker can
 * arrive before the cycle's last records). Applying a marker:
 * - updates the marketplace's freshness (every outcome);
 * - only for a COMPLETE cycle: a FULL listings / buy-order cycle without `removals_sent` nulls what
 *   it did not see (price NULL, count 0: never zero, never stale forever); a FULL float-bucket,
 *   float-order or book cycle deletes what it did not see;
 *   a PARTIAL or FAILED cycle never touches a price;
 * - moves the read model's clock and recomputes what depends on it: statistics roll into the new
 *   day, liquidity, the market-cap points of the cycle's hours (and, after the commit, partition
 *   retention: deriver.ts).
 * Markers are applied by the derive path (deriver.ts) in transactions of their own, never in an
 * ingest batch's.
 *
 * A COMPLETE marker is applied as COMPLETE only if it can vouch for what its removals assume
 * (`vouchedOutcome`): its end offsets, when the cycle emitted records (an empty list reads as
 * "nothing to wait for", so its records could still be in flight and every one of them would be
 * nulled or deleted — a broker outage can produce such markers, cycle-end.ts), and at least
 * one item seen, for a cycle whose COMPLETE removes what it did not see (an empty answer looks
 * exactly like a failing upstream, and a failing upstream never removes anything). Otherwise it
 * is applied as PARTIAL — freshness only, no price touched — and a warning is logged. The
 * decision reads the marker alone, so a replay decides the same.
 */
import {
  cycleRemovesUnseen,
  DATA_KINDS,
  isDataKind,
  readTag,
  type DataKind,
  type DataKindInfo,
} from '@skinprices/domain';
import type { PollCycleEvent } from '@skinprices/events';
import type { Logger } from '@skinprices/runtime';
import type { PoolClient } from '@skinprices/store';
import { clearTerms } from './books.js';
import {
  advanceClock,
  refreshLiquidity,
  refreshMarketCap,
  rollStatsForward,
  type LiquidityRefresh,
} from './derived.js';
import { ensureHourPartitions } from './partitions.js';

/**
 * "Not seen by cycle $3 (finished at $2)": written by another cycle, and before this one ended
 * (a row from a later cycle is newer knowledge and stays). Params: $1 market, $2 finished_at, $3 cycle.
 */
const NOT_SEEN = 'cycle_id <> $3 AND observed_at < $2';

export interface MarkerOptions {
  outbox: boolean;
  /** Hears every COMPLETE marker applied as PARTIAL, and why. @default none */
  logger?: Pick<Logger, 'warn'>;
  /**
   * Collects the read tags (`listing:cn-a`, …: readTag) of the rows a COMPLETE marker removed or
   * cleared: price changes readers must see as soon as this commits, unlike the slower-moving
   * statistics, liquidity and market cap every marker recomputes. @default none
   */
  touched?: Set<string>;
}

export async function storeMarkers(client: PoolClient, markers: readonly PollCycleEvent[]): Promise<void> {
  for (const m of markers) {
    await client.query(
      `INSERT INTO poll_cycles (cycle_id, market, kind, mode, outcome, started_at, finished_at, items_seen,
                                events_emitted, error, data_topic, end_offsets, removals_sent)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
       ON CONFLICT (cycle_id) DO NOTHING`,
      [
        m.cycle_id,
        m.market,
        m.kind,
        m.mode,
        m.outcome,
        new Date(m.started_at),
        new Date(m.finished_at),
        m.items_seen,
        m.events_emitted,
        m.error,
        m.data_topic,
        JSON.stringify(m.end_offsets),
        m.removals_sent ?? false,
      ],
    );
  }
}

interface PollCycleRow {
  cycle_id: string;
  market: string;
  kind: string;
  mode: string;
  outcome: string;
  started_at: Date;
  finished_at: Date;
  /** Records the poller sent in the cycle. */
  events_emitted: number;
  /** The cycle sent what it no longer saw as removal records (migration 0021). */
  removals_sent: boolean;
}

/** What vouchedOutcome reads of a marker. */
export interface MarkerClaims {
  kind: string;
  mode: string;
  outcome: string;
  items_seen: number;
  events_emitted: number;
  /** Entries in end_offsets. */
  end_offsets_count: number;
}

/** Whether applying the marker as COMPLETE removes what the cycle did not see. */
export function completeRemoves(m: Pick<MarkerClaims, 'kind' | 'mode'>): boolean {
  return isDataKind(m.kind) && (m.mode === 'FULL' || m.mode === 'DELTA') && cycleRemovesUnseen(m.kind, m.mode);
}

/**
 * The outcome a marker is applied with, and why it was lowered (see the top of the file). Pure.
 * A cycle that emitted nothing needs no end offsets: none of its records can be in flight (a
 * DELTA cycle without changes). SALES and HISTORY cycles remove nothing, so seeing nothing is a
 * quiet window, not a suspicious answer.
 */
export function vouchedOutcome(m: MarkerClaims): { outcome: string; reason?: string } {
  if (m.outcome !== 'COMPLETE') return { outcome: m.outcome };
  if (m.events_emitted > 0 && m.end_offsets_count === 0)
    return {
      outcome: 'PARTIAL',
      reason: `no end offsets for a cycle that emitted ${m.events_emitted} records: they may still be in flight`,
    };
  if (m.items_seen === 0 && completeRemoves(m))
    return {
      outcome: 'PARTIAL',
      reason:
        'a cycle that saw no items cannot vouch for removing every row (an empty answer looks like a failing upstream)',
    };
  return { outcome: 'COMPLETE' };
}

/** Applies every stored marker whose data has been consumed; returns their cycle ids. */
export async function applyReadyMarkers(
  client: PoolClient,
  groupId: string,
  options: MarkerOptions,
): Promise<string[]> {
  const { rows } = await client.query<{ cycle_id: string }>(
    `SELECT p.cycle_id FROM poll_cycles p
     WHERE p.applied_at IS NULL
       AND NOT EXISTS (
         SELECT 1 FROM jsonb_to_recordset(p.end_offsets) AS e(partition int, "offset" bigint)
         LEFT JOIN consumer_offsets o
           ON o.group_id = $1 AND o.topic = p.data_topic AND o.partition = e.partition
         WHERE coalesce(o.next_offset, 0) <= e."offset")
     ORDER BY p.finished_at, p.cycle_id`,
    [groupId],
  );
  const applied: PollCycleRow[] = [];
  for (const { cycle_id } of rows) {
    // The row lock makes a marker apply once even if two transactions find it ready.
    const claim = await client.query<PollCycleRow & MarkerClaims>(
      `UPDATE poll_cycles SET applied_at = now() WHERE cycle_id = $1 AND applied_at IS NULL
       RETURNING cycle_id, market, kind, mode, outcome, started_at, finished_at, items_seen, events_emitted,
                 removals_sent, jsonb_array_length(end_offsets) AS end_offsets_count`,
      [cycle_id],
    );
    const claimed = claim.rows[0];
    if (!claimed) continue;
    const vouched = vouchedOutcome(claimed);
    if (vouched.reason)
      options.logger?.warn(
        {
          cycle: claimed.cycle_id,
          market: claimed.market,
          kind: claimed.kind,
          mode: claimed.mode,
          reason: vouched.reason,
        },
        'COMPLETE marker applied as PARTIAL: nothing removed, freshness only',
      );
    // From here on the marker is what it could vouch for: freshness, removals and the market cap.
    const m: PollCycleRow = {
      cycle_id: claimed.cycle_id,
      market: claimed.market,
      kind: claimed.kind,
      mode: claimed.mode,
      outcome: vouched.outcome,
      started_at: claimed.started_at,
      finished_at: claimed.finished_at,
      events_emitted: claimed.events_emitted,
      removals_sent: claimed.removals_sent,
    };
    await updateFreshness(client, m);
    if (m.outcome === 'COMPLETE') await applyComplete(client, m, options);
    applied.push(m);
  }
  await queueJudging(
    client,
    applied.filter((m) => m.kind === 'LISTINGS'),
  );
  if (applied.length > 0) await queueDerived(client, applied);
  return applied.map((m) => m.cycle_id);
}

/**
 * The upstream times (last_*_at from the marker) say how fresh the data is in the marketplace's
 * own clock; last_applied_at and last_complete_applied_at are the wall clock (now(): this
 * transaction's start) at which the read model took the marker in, so a stalled pipeline (no
 * poller, no broker, no materializer) shows as staleness against real time even though the
 * read model's own clock stops with it. Wall-clock columns are left out of the replay checksums.
 */
async function updateFreshness(client: PoolClient, m: PollCycleRow): Promise<void> {
  await client.query(
    `INSERT INTO market_freshness AS f (market, kind, last_cycle_id, last_outcome, last_finished_at, last_complete_at, consecutive_failed,
                                  last_complete_started_at, last_applied_at, last_complete_applied_at)
     VALUES ($1, $2, $3, $4, $5, CASE WHEN $4 = 'COMPLETE' THEN $5::timestamptz END, CASE WHEN $4 = 'FAILED' THEN 1 ELSE 0 END,
             CASE WHEN $4 = 'COMPLETE' THEN $6::timestamptz END, now(), CASE WHEN $4 = 'COMPLETE' THEN now() END)
     ON CONFLICT (market, kind) DO UPDATE SET
       last_cycle_id = excluded.last_cycle_id, last_outcome = excluded.last_outcome,
       last_finished_at = excluded.last_finished_at,
       last_complete_at = coalesce(excluded.last_complete_at, f.last_complete_at),
       last_complete_started_at = coalesce(excluded.last_complete_started_at, f.last_complete_started_at),
       last_applied_at = excluded.last_applied_at,
       last_complete_applied_at = coalesce(excluded.last_complete_applied_at, f.last_complete_applied_at),
       consecutive_failed = CASE WHEN excluded.last_outcome = 'FAILED' THEN f.consecutive_failed + 1 ELSE 0 END
     WHERE excluded.last_finished_at >= f.last_finished_at`,
    [m.market, m.kind, m.cycle_id, m.outcome, m.finished_at, m.started_at],
  );
}

async function applyComplete(client: PoolClient, m: PollCycleRow, options: MarkerOptions): Promise<void> {
  if (m.kind === 'LISTINGS') {
    // Listings are more than a table: their removals enter the hourly history and the outbox. A
    // cycle that sent its removals as records has nothing left to remove.
    if (m.mode === 'FULL' && !m.removals_sent && (await nullVanishedListings(client, m, options)) > 0)
      options.touched?.add(readTag(m.kind, m.market));
    // The cycle vouches for every row of the market up to its end: statistics enter its day.
    await rollStatsForward(client, m.market, m.finished_at);
    return;
  }
  if (!isDataKind(m.kind) || !cycleRemovesUnseen(m.kind, m.mode === 'FULL' ? 'FULL' : 'DELTA')) return;
  const { table, cleared, deletes }: DataKindInfo = DATA_KINDS[m.kind];
  // A cycle that sent its removals as records has nothing left to remove, but for the kinds whose
  // rows are deleted: their topics keep 7 days, and a consumer that was away longer (or restored
  // from an older backup) missed removal records for good. Their FULL cycle wrote every row it saw
  // (repeats too), so deleting the rest is exact, and such a consumer is whole again within a day.
  if (m.removals_sent && !deletes) return;
  const touched = (r: { rowCount: number | null }) => {
    if ((r.rowCount ?? 0) > 0) options.touched?.add(readTag(m.kind as DataKind, m.market));
  };
  // A kind whose rows go when gone (DataKindInfo.deletes): what the cycle did not see is deleted.
  if (cleared === undefined) {
    touched(
      await client.query(`DELETE FROM ${table} WHERE market = $1 AND ${NOT_SEEN}`, [
        m.market,
        m.finished_at,
        m.cycle_id,
      ]),
    );
    return;
  }
  // A delta kind's full cycle: what it did not see is gone; its row says so with the `cleared`
  // values (a price is NULL, never zero), stamped by this cycle.
  const fields = Object.entries(cleared);
  const set = fields.map(([f, v]) => `${f} = ${v === null ? 'NULL' : v}`).join(', ') + clearTerms(table);
  const stillSet = fields.map(([f, v]) => (v === null ? `${f} IS NOT NULL` : `${f} <> ${v}`)).join(' OR ');
  touched(
    await client.query(
      `UPDATE ${table} SET ${set}, observed_at = $2, cycle_id = $3 WHERE market = $1 AND ${NOT_SEEN} AND (${stillSet})`,
      [m.market, m.finished_at, m.cycle_id],
    ),
  );
}

/**
 * A complete full cycle saw every listed item of its marketplace; what it did not see (last
 * observed before the cycle started) has no listing any more. The hourly history records the
 * disappearance too, and the change goes to the outbox like any other.
 */
/** Returns how many listings it nulled. */
async function nullVanishedListings(client: PoolClient, m: PollCycleRow, options: MarkerOptions): Promise<number> {
  // First, before any listing row is locked (the ingest path reads it before it writes rows): a
  // materializer holding this marketplace's rows in memory forgets them (served.ts).
  await client.query(
    `INSERT INTO listing_removal_epochs (market, epoch) VALUES ($1, 1)
     ON CONFLICT (market) DO UPDATE SET epoch = listing_removal_epochs.epoch + 1`,
    [m.market],
  );
  const gone = `
    UPDATE listings_current c SET price = NULL, count = 0, observed_at = $2, changed_at = $2, cycle_id = $3,
      change_24h = NULL, change_7d = NULL, change_30d = NULL, change_90d = NULL, is_outlier = NULL, confidence = NULL
    FROM listings_current old
    WHERE c.market = $1 AND c.cycle_id <> $3 AND c.observed_at < $2 AND (c.price IS NOT NULL OR c.count > 0)
      AND old.market = c.market AND old.market_hash_name = c.market_hash_name AND old.phase = c.phase
    RETURNING c.market, c.market_hash_name, c.phase, c.currency, old.price AS old_price, old.count AS old_count`;
  await ensureHourPartitions(client, [m.finished_at.getTime()]);
  const { rows } = await client.query<{ n: number }>(
    `WITH gone AS (${gone}),
     hist AS (
       INSERT INTO listing_hourly (market, market_hash_name, phase, hour, price, count, observed_at)
       SELECT market, market_hash_name, phase, date_trunc('hour', $2::timestamptz), NULL, 0, $2 FROM gone
       ON CONFLICT (market, market_hash_name, phase, hour) DO UPDATE SET
         price = NULL, count = 0, observed_at = excluded.observed_at
       WHERE excluded.observed_at > listing_hourly.observed_at
     ),
     changes AS (
       INSERT INTO price_change_outbox (market, market_hash_name, phase, currency, old_price, new_price, old_count, new_count, observed_at)
       SELECT market, market_hash_name, phase, currency, old_price, NULL, old_count, 0, $2 FROM gone WHERE $4
     )
     SELECT count(*)::int AS n FROM gone`,
    [m.market, m.finished_at, m.cycle_id, options.outbox],
  );
  return rows[0]?.n ?? 0;
}

/**
 * Queues the outlier guard's second look at what these listings cycles wrote (judge_pending,
 * migration 0017): judgePending does it in a transaction of its own, so the markers' transaction
 * (and the status it makes complete) does not wait for a re-judging of the currency's catalogue.
 */
async function queueJudging(client: PoolClient, markers: readonly PollCycleRow[]): Promise<void> {
  if (markers.length === 0) return;
  await client.query(`INSERT INTO judge_pending (market, cycle_id) SELECT * FROM unnest($1::text[], $2::text[])`, [
    markers.map((m) => m.market),
    markers.map((m) => m.cycle_id),
  ]);
}

/**
 * Judges again what queueJudging queued, all of it in one statement (judgeAgain), and deletes it;
 * returns how many cycles it judged (0: nothing queued) and how many verdicts changed. The derive
 * path runs it in a transaction of its own after the markers' (deriver.ts), deferred while
 * listings are still coming in: in a cold start one look at the whole catalogue replaces one per
 * clump of first cycles, each over the currency's catalogue as it stood so far.
 */
export async function judgePending(client: PoolClient): Promise<{ cycles: number; changed: number }> {
  const { rows } = await client.query<{ id: string; market: string; cycle_id: string; events_emitted: number }>(
    `SELECT j.id, j.market, j.cycle_id, coalesce(p.events_emitted, 0) AS events_emitted
     FROM judge_pending j LEFT JOIN poll_cycles p USING (cycle_id) ORDER BY j.id`,
  );
  if (rows.length === 0) return { cycles: 0, changed: 0 };
  const changed = await judgeAgain(client, rows);
  // By id, not all: a row this run did not read must never be deleted unjudged.
  await client.query('DELETE FROM judge_pending WHERE id = ANY($1::bigint[])', [rows.map((r) => r.id)]);
  return { cycles: rows.length, changed };
}

/**
 * What judgeGate reads, in one round trip: how long the oldest queued second look has waited, in
 * ms, and whether a LISTINGS marker is stored and not yet applied (its data still on its way in).
 * Undefined when nothing is queued.
 */
export async function judgeQueue(
  client: PoolClient,
): Promise<{ waitedMs: number; listingsPending: boolean } | undefined> {
  const { rows } = await client.query<{ ms: number | null; pending: boolean }>(
    `SELECT (extract(epoch FROM clock_timestamp() - min(queued_at)) * 1000)::float8 AS ms,
            EXISTS (SELECT 1 FROM poll_cycles WHERE applied_at IS NULL AND kind = 'LISTINGS') AS pending
     FROM judge_pending`,
  );
  const row = rows[0];
  return row?.ms === null || row?.ms === undefined ? undefined : { waitedMs: row.ms, listingsPending: row.pending };
}

/**
 * The outlier guard (migrations/0007, 0008) of every row of the items these listings cycles wrote,
 * on every marketplace of their currency: their peer reference moved. Rows are judged when written
 * against the peers as they stood; this judges them again once the cycles are in, so a
 * market-wide move does not leave the first marketplace polled flagged, and the flags end up a
 * function of the final prices whatever the batching (replays agree: the last look comes after
 * the last marker). One statement for all the cycles a judging transaction takes: each item's
 * prices are gathered once, sorted, and every row's peer reference is read from that array
 * (peer_of). Only rows whose verdict changes are written; returns how many.
 */
async function judgeAgain(
  client: PoolClient,
  markers: readonly Pick<PollCycleRow, 'market' | 'cycle_id' | 'events_emitted'>[],
): Promise<number> {
  if (markers.length === 0) return 0;
  // Never a nested loop over sequential scans: misjudging how many items the cycles touched, the
  // planner may otherwise pick one over listings_current. For cycles that wrote a few thousand
  // rows both joins follow an index (the cycles' rows by marketplace, the items' rows by name):
  // O(touched rows × log n) whatever the estimates. Past JUDGE_SCANS_ABOVE whole scans and hash
  // joins: for the first cycles of a cold start (most of the catalogue, every verdict rewritten)
  // they read the rows in about a third of the index's time. A large marketplace's FULL cycle
  // crosses the threshold too; there, with few verdicts moving, the update's hash join over a
  // whole scan replaces a row-address step per changed row.
  const wrote = markers.reduce((n, m) => n + m.events_emitted, 0);
  const off = wrote > JUDGE_SCANS_ABOVE ? 'enable_nestloop' : 'enable_seqscan';
  await client.query(`SELECT set_config($1, 'off', true)`, [off]);
  const judged = await client.query(
    `WITH cycles AS (SELECT * FROM unnest($1::text[], $2::text[]) AS c(market, cycle_id)),
     touched AS (
       SELECT DISTINCT l.market_hash_name, l.phase, l.currency
       FROM cycles JOIN listings_current l USING (market, cycle_id)
     ),
     rows AS MATERIALIZED (
       SELECT c.ctid AS tid, c.market_hash_name, c.phase, c.currency, c.price, c.count, c.median_7d,
              c.is_outlier, c.confidence
       FROM touched JOIN listings_current c USING (market_hash_name, phase, currency)
     ),
     -- Each row's peer reference from its item's prices sorted once (a window over the group, no
     -- join: planned as a join of two CTEs estimated at one row each, it was a nested loop over
     -- every pair, quadratic in the catalogue). NULL prices sort last and are filtered out.
     peered AS MATERIALIZED (
       SELECT r.*,
              peer_of(array_agg(r.price) FILTER (WHERE r.price IS NOT NULL) OVER (
                        PARTITION BY r.market_hash_name, r.phase, r.currency ORDER BY r.price
                        ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING), r.price) AS peer
       FROM rows r
     ),
     -- Judged once per row, then written by row address: a row an ingest batch rewrote meanwhile
     -- no longer matches and keeps that batch's verdict, which its own marker judges again.
     q AS MATERIALIZED (
       SELECT tid, is_outlier AS was, confidence AS was_confidence,
              listing_outlier(price, median_7d, peer) AS is_outlier,
              listing_confidence(price, count, median_7d, peer) AS confidence
       FROM peered
     )
     UPDATE listings_current c SET is_outlier = q.is_outlier, confidence = q.confidence
     FROM q
     WHERE c.ctid = q.tid
       AND (q.was IS DISTINCT FROM q.is_outlier OR q.was_confidence IS DISTINCT FROM q.confidence)`,
    [markers.map((m) => m.market), markers.map((m) => m.cycle_id)],
  );
  await client.query(`SELECT set_config($1, 'on', true)`, [off]);
  return judged.rowCount ?? 0;
}

/** Rows the cycles of one re-judging wrote beyond which it scans instead of stepping by index. */
const JUDGE_SCANS_ABOVE = 20_000;

/**
 * After markers: the clock moves to the latest finished_at, and the values that depend on it are
 * queued for recomputeDerived, which runs in a transaction of its own (migration 0014: these row
 * locks are not held while it runs).
 */
async function queueDerived(client: PoolClient, applied: readonly PollCycleRow[]): Promise<void> {
  const latest = applied.reduce((a, m) => (m.finished_at > a ? m.finished_at : a), applied[0]!.finished_at);
  await advanceClock(client, latest);
  // The market cap of an hour reads CN-A's snapshots, the other CNY marketplaces' (its cleaning
  // judges against them) and item_markets, which every marketplace's listings write (the
  // catalogue: items on two marketplaces). So every listings cycle, of any marketplace and any
  // outcome (a failed cycle's sent rows are in too), queues the hours it spans: the last one
  // to cover an hour has seen all the data of that hour, in a replay, live, and with the
  // partitions split among several materializers. Recomputing on the CNY marketplaces' complete
  // cycles only left an hour's catalogue to whichever of EU-A's or the store's new items had
  // been ingested by then: two materializers and one disagreed on market_cap_hourly
  // (scale-out.test.ts, on a fresh CI machine).
  const spans = applied.filter((m) => m.kind === 'LISTINGS').map((m) => [m.started_at, m.finished_at]);
  // Liquidity on every applied marker, not only those of its input kinds: the result depends on
  // the clock, and a replay groups markers into transactions differently from the live run.
  // A history cycle restates past closes, which the day's liquidity reads (migration 0020).
  const restated = applied.some((m) => m.kind === 'HISTORY');
  await client.query(
    `INSERT INTO derive_pending (cap_from, cap_to, restated)
     SELECT *, $3::boolean FROM unnest($1::timestamptz[], $2::timestamptz[])
     UNION ALL SELECT NULL, NULL, $3::boolean WHERE cardinality($1::timestamptz[]) = 0`,
    [spans.map((s) => s[0]), spans.map((s) => s[1]), restated],
  );
}

/**
 * Values that depend on the read model's clock, recomputed for what queueDerived queued, in a
 * transaction that writes no table ingest writes. Deterministic for replays: the clock only moves
 * forward (to the latest finished_at), and every data record is followed by its cycle's marker,
 * so the last recomputation of a replay and of the live run both see all data at the same clock.
 * Returns undefined when nothing was queued, else what the liquidity refresh did (if the clock is set).
 */
export async function recomputeDerived(client: PoolClient): Promise<{ liquidity?: LiquidityRefresh } | undefined> {
  const { rows } = await client.query<{ id: string; cap_from: Date | null; cap_to: Date | null; restated: boolean }>(
    'SELECT id, cap_from, cap_to, restated FROM derive_pending ORDER BY id',
  );
  if (rows.length === 0) return undefined;
  const clock = await client.query<{ now: Date }>('SELECT now FROM read_model_clock');
  const now = clock.rows[0]?.now;
  const whole = rows.some((r) => r.restated);
  const liquidity = now ? await refreshLiquidity(client, now, { whole }) : undefined;
  // The hours of every queued cycle, each computed once (marketplaces finishing together cover the
  // same hours), in runs of consecutive hours.
  const spans = rows.flatMap((r) =>
    r.cap_from && r.cap_to ? [{ from: r.cap_from.getTime(), to: r.cap_to.getTime() }] : [],
  );
  for (const run of hourRuns(spans)) await refreshMarketCap(client, new Date(run.from), new Date(run.to));
  // By id, not all: both steps hold the derive lock, so nothing is queued meanwhile today, but a
  // row this run did not read must never be deleted unrecomputed.
  await client.query('DELETE FROM derive_pending WHERE id = ANY($1::bigint[])', [rows.map((r) => r.id)]);
  // Retention (dropping old hourly partitions) runs after this commits, in a transaction of its
  // own (deriver.ts): its exclusive lock on listing_hourly must not wait behind this one.
  return liquidity ? { liquidity } : {};
}

const HOUR_MS = 3_600_000;

/**
 * The hours (start times) the spans touch, as runs of consecutive hours: [from, to] each, `to`
 * the start of the run's last hour. Pure.
 */
export function hourRuns(spans: readonly { from: number; to: number }[]): { from: number; to: number }[] {
  const hours = new Set<number>();
  for (const { from, to } of spans)
    for (let h = Math.floor(from / HOUR_MS) * HOUR_MS; h <= to; h += HOUR_MS) hours.add(h);
  const runs: { from: number; to: number }[] = [];
  for (const h of [...hours].sort((a, b) => a - b)) {
    const last = runs.at(-1);
    if (last && h === last.to + HOUR_MS) last.to = h;
    else runs.push({ from: h, to: h });
  }
  return runs;
}

/**
 * GET /v1/status: is the data fresh, and is the pipeline alive? Every age is wall-clock time on the
 * database's clock (the materializer writes `now()` when it applies a marker and at each
 * heartbeat), never the read model's own data clock: measured against the data's clock, a
 * pipeline-wide stall could never look stale, since the clock stalls with it.
 *
 * - A marketplace's kind is stale when its last complete cycle was applied longer ago than twice
 *   its refresh interval (from the marketplace registry) plus a grace: one missed cycle is
 *   weather, two are an outage. CN-A buy orders (30 min) and daily history are judged by their own
 *   intervals, not one threshold for all.
 * - The materializer is `down` when no process has a heartbeat younger than `deadAfterMs`, and the
 *   pipeline `stalled` when none has committed a batch for `stallAfterMs` (pollers' sales cycles
 *   commit every minute, so a quiet minute and a half means nothing is flowing: a broker outage, a
 *   hung consumer, or pollers that stopped).
 */
import { getMarket, isMarketSlug, refreshIntervalMs } from '@skinprices/domain';
import type { ReadModel } from './readmodel.js';
import type { DatabaseRow, FreshnessRow, MaterializerRow } from './readmodel-status.js';

export interface StatusOptions {
  /** Added to twice the refresh interval before a kind counts as stale. @default 60000 */
  graceMs: number;
  /** For a kind the registry gives no interval. @default 900000 */
  fallbackIntervalMs: number;
  /** A heartbeat older than this means the process is dead or hung. @default 30000 */
  deadAfterMs: number;
  /** No batch committed by any process for this long means the pipeline has stalled. @default 90000 */
  stallAfterMs: number;
  /** A standby further behind its primary than this degrades the status. @default 10000 */
  maxReplicaLagMs: number;
}

export const DEFAULT_STATUS_OPTIONS: StatusOptions = {
  graceMs: 60_000,
  fallbackIntervalMs: 900_000,
  deadAfterMs: 30_000,
  stallAfterMs: 90_000,
  maxReplicaLagMs: 10_000,
};

export interface StatusInputs {
  now: Date;
  dataTime: Date | null;
  freshness: FreshnessRow[];
  materializers: MaterializerRow[];
  deadLetters: { topic: string; reason: string; count: number; last_at: Date }[];
  database: DatabaseRow;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);
const ageS = (now: Date, d: Date | null) => (d ? Math.max(0, Math.round((now.getTime() - d.getTime()) / 1000)) : null);

/**
 * The database's part: on a standby, how far it is behind its primary, and whether that is a
 * problem (behind by more than `maxReplicaLagMs`, or not receiving WAL at all).
 */
function databaseReport(db: DatabaseRow, o: StatusOptions) {
  const lagS = db.lag_s === null ? null : Math.round(db.lag_s * 1000) / 1000;
  const problem = !db.standby
    ? undefined
    : db.receiving === false
      ? `the database is a standby that receives no WAL from its primary (last replayed ${lagS === null ? 'never since it started' : `${Math.round(lagS)} s ago`})`
      : lagS === null
        ? 'the database is a standby that has replayed nothing since it started: how far behind is unknown'
        : lagS * 1000 > o.maxReplicaLagMs
          ? `the database is a standby ${Math.round(lagS)} s behind its primary`
          : undefined;
  return {
    problem,
    report: {
      role: db.standby ? ('standby' as const) : ('primary' as const),
      replay_lag_seconds: lagS,
      replay_lag_bytes: db.lag_bytes === null ? null : Number(db.lag_bytes),
      receiving: db.receiving,
      degraded_after_seconds: o.maxReplicaLagMs / 1000,
      status: problem ? ('lagging' as const) : ('ok' as const),
    },
  };
}

/** The materializers and the pipeline they form, judged as of `now`. */
function pipelineReport(materializers: MaterializerRow[], now: Date, o: StatusOptions) {
  const members = materializers.map((m) => ({
    member_id: m.member_id,
    group_id: m.group_id,
    host: m.host,
    pid: m.pid,
    state: m.state,
    started_at: m.started_at.toISOString(),
    heartbeat_at: m.heartbeat_at.toISOString(),
    heartbeat_age_seconds: ageS(now, m.heartbeat_at) as number,
    alive: now.getTime() - m.heartbeat_at.getTime() <= o.deadAfterMs,
    last_batch_at: iso(m.last_batch_at),
    lag: m.lag === null ? null : Number(m.lag),
  }));
  const alive = members.filter((m) => m.alive);
  const lastBatch = Math.max(0, ...materializers.map((m) => m.last_batch_at?.getTime() ?? 0));
  const problems: string[] = [];
  if (alive.length === 0)
    problems.push(
      members.length === 0
        ? 'no materializer has ever reported a heartbeat'
        : `no materializer heartbeat for ${Math.min(...members.map((m) => m.heartbeat_age_seconds))} s`,
    );
  if (lastBatch === 0 || now.getTime() - lastBatch > o.stallAfterMs)
    problems.push(
      lastBatch === 0
        ? 'no batch has been committed yet'
        : `no batch committed for ${ageS(now, new Date(lastBatch))} s`,
    );
  if (alive.some((m) => m.state === 'erroring')) problems.push('a materializer is retrying failed batches');
  if (alive.some((m) => m.lag === null)) problems.push('lag cannot be measured (Kafka unreachable?)');
  const pipeline = alive.length === 0 ? 'down' : problems.length > 0 ? 'stalled' : 'ok';
  return {
    status: pipeline,
    problems,
    lag: alive.every((m) => m.lag !== null) ? alive.reduce((s, m) => s + (m.lag ?? 0), 0) : null,
    last_batch_at: lastBatch ? new Date(lastBatch).toISOString() : null,
    materializers: members,
  };
}

/** The status document (without the envelope), from what the read model says: pure, unit-tested. */
export function statusReport(input: StatusInputs, o: StatusOptions = DEFAULT_STATUS_OPTIONS) {
  const { now } = input;
  const database = databaseReport(input.database, o);
  // The materializers' heartbeats and batches are judged as of what this database has replayed: a
  // standby behind its primary shows them older by its lag, which says nothing about the
  // materializers (the lag is reported, and judged, on its own). Data ages are not shifted: they
  // are what a customer of this process gets.
  const pipelineNow = new Date(
    now.getTime() - (input.database.standby ? (database.report.replay_lag_seconds ?? 0) * 1000 : 0),
  );
  const markets = input.freshness.map((r) => {
    const interval =
      (isMarketSlug(r.market) ? refreshIntervalMs(getMarket(r.market), r.kind) : undefined) ?? o.fallbackIntervalMs;
    const staleAfterMs = 2 * interval + o.graceMs;
    const age = ageS(now, r.last_complete_applied_at);
    return {
      market: r.market,
      kind: r.kind,
      refresh_interval_seconds: Math.round(interval / 1000),
      stale_after_seconds: Math.round(staleAfterMs / 1000),
      last_outcome: r.last_outcome,
      last_cycle_at: r.last_finished_at.toISOString(),
      last_complete_at: iso(r.last_complete_at),
      last_applied_at: iso(r.last_applied_at),
      last_complete_applied_at: iso(r.last_complete_applied_at),
      age_seconds: age,
      stale: age === null || age * 1000 > staleAfterMs,
      failed_in_a_row: r.consecutive_failed,
    };
  });
  const pipeline = pipelineReport(input.materializers, pipelineNow, o);
  const stale = markets.filter((m) => m.stale);
  return {
    status: pipeline.status === 'ok' && stale.length === 0 && !database.problem ? 'ok' : 'degraded',
    now: now.toISOString(),
    data_time: iso(input.dataTime),
    pipeline,
    database: database.report,
    dead_letters: input.deadLetters.map((d) => ({
      topic: d.topic,
      reason: d.reason,
      count: d.count,
      last_at: d.last_at.toISOString(),
    })),
    stale_count: stale.length,
    markets,
  };
}

export type StatusReport = ReturnType<typeof statusReport>;

/** Reads what the report needs from the read model (one query each, concurrently) and builds it. */
export async function loadStatus(
  read: Pick<ReadModel, 'dbNow' | 'clock' | 'freshness' | 'materializers' | 'deadLetters' | 'replication'>,
  o: StatusOptions = DEFAULT_STATUS_OPTIONS,
): Promise<StatusReport> {
  const [now, dataTime, freshness, materializers, deadLetters, database] = await Promise.all([
    read.dbNow(),
    read.clock(),
    read.freshness(),
    read.materializers(),
    read.deadLetters(),
    read.replication(),
  ]);
  return statusReport({ now, dataTime, freshness, materializers, deadLetters, database }, o);
}

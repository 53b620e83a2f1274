/**
 * The read model's reads for the service's own status (status.ts, GET /v1/status and the status
 * page): freshness per marketplace and kind, the materializers' heartbeats, dead letters, the
 * clocks, and whether a migration is running. ReadModel (readmodel.ts) answers with these.
 */
import { MIGRATION_RUNNING_SQL } from '@skinprices/store';
import { sql } from 'kysely';
import type { ReadDb } from './readmodel-rows.js';

export interface FreshnessRow {
  market: string;
  kind: string;
  last_outcome: string;
  /** Upstream time (the marketplace's clock) of the last cycle and of the last complete one. */
  last_finished_at: Date;
  last_complete_at: Date | null;
  consecutive_failed: number;
  /** Wall clock when the read model applied the last marker and the last complete one. */
  last_applied_at: Date | null;
  last_complete_applied_at: Date | null;
}

export interface MaterializerRow {
  member_id: string;
  group_id: string;
  host: string;
  pid: number;
  state: string;
  started_at: Date;
  heartbeat_at: Date;
  last_batch_at: Date | null;
  /** bigint as text (pg returns int8 as a string). */
  lag: string | null;
}

/** Whether a migration is running (migrate.ts): a query that failed meanwhile may succeed shortly. */
export async function migrating(db: ReadDb): Promise<boolean> {
  const { rows } = await sql.raw<{ running: boolean }>(MIGRATION_RUNNING_SQL).execute(db);
  return rows[0]?.running === true;
}

/** The read model's clock: the data's "now" (a simulator may run accelerated). */
export async function clock(db: ReadDb): Promise<Date | null> {
  const row = await db.selectFrom('api_clock_v1').select('now').executeTakeFirst();
  return row?.now ?? null;
}

export async function freshness(db: ReadDb): Promise<FreshnessRow[]> {
  return db
    .selectFrom('api_freshness_v1')
    .select([
      'market',
      'kind',
      'last_outcome',
      'last_finished_at',
      'last_complete_at',
      'consecutive_failed',
      'last_applied_at',
      'last_complete_applied_at',
    ])
    .orderBy(['market', 'kind'])
    .execute();
}

/** The database's clock: every wall time of the status tables was written with it. */
export async function dbNow(db: ReadDb): Promise<Date> {
  const row = await db.selectNoFrom(sql<Date>`now()`.as('now')).executeTakeFirstOrThrow();
  return row.now;
}

/** Every materializer process's heartbeat row (see the materializer's migration 0003). */
export async function materializers(db: ReadDb): Promise<MaterializerRow[]> {
  return db.selectFrom('api_materializers_v1').selectAll().orderBy(['group_id', 'member_id']).execute();
}

/** Dead letters per topic and reason. */
export async function deadLetters(
  db: ReadDb,
): Promise<{ topic: string; reason: string; count: number; last_at: Date }[]> {
  return db
    .selectFrom('api_dead_letters_v1')
    .select((eb) => ['topic', 'reason', sql<number>`count(*)::int`.as('count'), eb.fn.max('received_at').as('last_at')])
    .groupBy(['topic', 'reason'])
    .orderBy(['topic', 'reason'])
    .execute();
}

/** The API's database as a replica sees itself (status.ts `database`). */
export interface DatabaseRow {
  standby: boolean;
  /** WAL received but not yet replayed, bytes; null on a primary. */
  lag_bytes: string | null;
  /** Seconds; null on a primary (see `replication`). */
  lag_s: number | null;
  /** The WAL receiver streams from the primary; null on a primary or where it is not visible. */
  receiving: boolean | null;
}

/**
 * How far this server is behind its primary. On a standby that has replayed all it received while
 * streaming, the lag is 0 (the primary may simply be idle: the time since the last replayed
 * transaction would then grow without anything being behind); otherwise it is the time since the
 * last replayed transaction was committed on the primary, a lower bound when nothing arrives, and
 * unknown (null) before any was replayed since the standby started. pg_stat_wal_receiver has a row
 * only while a receiver is connected (none: not receiving), and shows its status only to roles
 * with pg_read_all_stats (`receiving` null without it). After a restart the receive position
 * starts at its segment's beginning, below the replay position: the byte lag is clamped at 0.
 */
export async function replication(db: ReadDb): Promise<DatabaseRow> {
  const { rows } = await sql<DatabaseRow>`
    SELECT r.standby,
      CASE WHEN r.standby THEN greatest(0, COALESCE(pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()), 0))::text END AS lag_bytes,
      CASE WHEN NOT r.standby THEN NULL
        WHEN w.status = 'streaming' AND pg_last_wal_receive_lsn() <= pg_last_wal_replay_lsn() THEN 0
        ELSE greatest(0, extract(epoch FROM now() - pg_last_xact_replay_timestamp()))::float8 END AS lag_s,
      CASE WHEN NOT r.standby THEN NULL WHEN w.pid IS NULL THEN false WHEN w.status IS NULL THEN NULL
        ELSE w.status = 'streaming' END AS receiving
    FROM (SELECT pg_is_in_recovery() AS standby) r
    LEFT JOIN (SELECT pid, status FROM pg_stat_wal_receiver) w ON true`.execute(db);
  return rows[0] as DatabaseRow;
}

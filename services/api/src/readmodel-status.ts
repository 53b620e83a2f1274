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

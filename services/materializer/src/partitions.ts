/** listing_hourly is partitioned by UTC day: retention is dropping partitions, not deleting rows. */
import { DAY_MS, startOfUtcDay } from '@skinprices/domain';
import type { PoolClient } from '@skinprices/store';

/** The name of the day partition of listing_hourly holding `day` (UTC midnight, ms). */
export function hourPartitionName(day: number): string {
  return `listing_hourly_${new Date(day).toISOString().slice(0, 10).replaceAll('-', '')}`;
}

/**
 * Creates the day partitions of listing_hourly the batch needs. Batches of several partitions
 * run at once (materializer.ts), and two transactions creating the same table collide on the
 * catalogue's unique index (23505, which poison isolation would take for a bad record): a missing
 * partition is created under a transaction-scoped advisory lock, so the second waits for the
 * first to commit and then finds the table. Existing partitions cost one catalogue lookup.
 */
export async function ensureHourPartitions(client: PoolClient, times: readonly number[]): Promise<void> {
  const days = [...new Set(times.map((t) => startOfUtcDay(t)))];
  if (days.length === 0) return;
  const { rows } = await client.query<{ name: string }>(
    `SELECT n AS name FROM unnest($1::text[]) AS n WHERE to_regclass(n) IS NULL`,
    [days.map(hourPartitionName)],
  );
  if (rows.length === 0) return;
  await client.query(`SELECT pg_advisory_xact_lock(hashtext('skinprices-hour-partitions:' || current_schema()))`);
  for (const day of days) {
    if (!rows.some((r) => r.name === hourPartitionName(day))) continue;
    const from = new Date(day).toISOString();
    const to = new Date(day + DAY_MS).toISOString();
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${hourPartitionName(day)} PARTITION OF listing_hourly FOR VALUES FROM ('${from}') TO ('${to}')`,
    );
  }
}

/** listing_hourly is partitioned by UTC day: retention is dropping partitions, not deleting rows. */
import { DAY_MS, startOfUtcDay } from '@skinprices/domain';
import type { PoolClient } from '@skinprices/store';

/** The name of the day partition of listing_hourly holding `day` (UTC midnight, ms). */
export function hourPartitionName(day: number): string {
  return `listing_hourly_${new Date(day).toISOString().slice(0, 10).replaceAll('-', '')}`;
}

/** Creates the day partitions of listing_hourly the batch needs (idempotent DDL). */
export async function ensureHourPartitions(client: PoolClient, times: readonly number[]): Promise<void> {
  const days = new Set(times.map((t) => startOfUtcDay(t)));
  for (const day of days) {
    const from = new Date(day).toISOString();
    const to = new Date(day + DAY_MS).toISOString();
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${hourPartitionName(day)} PARTITION OF listing_hourly FOR VALUES FROM ('${from}') TO ('${to}')`,
    );
  }
}

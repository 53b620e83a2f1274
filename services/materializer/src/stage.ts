/**
 * Staging for COPY: a batch goes into a temporary table shaped like its target (plus the Kafka
 * offset, which breaks ties between events observed at the same millisecond), then one set-based
 * statement merges it. The temp table lives per connection and empties itself at commit; it is
 * also emptied on each call, in the same round trip, because poison isolation (poison.ts) may
 * stage several subsets of a batch in one transaction and each merge must see only its own rows.
 */
import { copyRows, type CopyValue, type PoolClient } from '@skinprices/store';

/**
 * `extra`: columns the events carry beyond the target's (as SQL column definitions), each given
 * in `columns`; a target is always staged with the same extras.
 */
export async function stage(
  client: PoolClient,
  target: string,
  columns: readonly string[],
  rows: readonly (readonly CopyValue[])[],
  extra = '',
): Promise<string> {
  const name = `stage_${target}`;
  await client.query(`CREATE TEMP TABLE IF NOT EXISTS ${name} (
      LIKE ${target} INCLUDING DEFAULTS, kafka_offset bigint NOT NULL${extra ? `, ${extra}` : ''}
    ) ON COMMIT DELETE ROWS; DELETE FROM ${name}`);
  await copyRows(client, name, [...columns, 'kafka_offset'], rows);
  return name;
}

/** `a = excluded.a, b = excluded.b, …` for an upsert. */
export function setExcluded(columns: readonly string[]): string {
  return columns.map((c) => `${c} = excluded.${c}`).join(', ');
}

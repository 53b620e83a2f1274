/**
 * Applies one consumed batch (one partition of one topic) to PostgreSQL in one transaction:
 * the rows it produces and the partition's next offset commit together, or not at all.
 *
 * Exactly-once effect: the transaction first locks the partition's offset row and drops every
 * message below the stored offset, so a batch redelivered after a crash (Kafka's committed
 * offset lags ours), or a batch still finishing on a consumer whose partition was revoked while
 * the new owner already applied it, changes nothing. The observed_at guard on every upsert
 * makes even a replay of old events harmless.
 */
import type { ConsumedBatch, DecodedMessage, PollCycleEvent } from '@skinprices/events';
import type { PoolClient } from '@skinprices/store';
import { applyBooks, type BookKind } from './books.js';
import { applyListings } from './listings.js';
import { applyReadyMarkers, storeMarkers } from './markers.js';

export type MaterializedKind = 'listing' | 'pollCycle' | BookKind;

export const MATERIALIZED_KINDS: readonly MaterializedKind[] = [
  'listing',
  'buyorder',
  'floatRanged',
  'floatBuyorder',
  'sale',
  'orderBook',
  'historyPoint',
  'pollCycle',
];

export interface ApplyOptions {
  groupId: string;
  /** Write outbox rows for committed changes. Off while replaying. @default true */
  outbox?: boolean;
  /** Days of hourly history kept. @default 100 */
  hourlyRetentionDays?: number;
  /**
   * Per partition, the first offset not to apply (a replay stops at the end it saw when it
   * started; the live materializer continues from there).
   */
  stopAt?: ReadonlyMap<string, bigint>;
}

export interface ApplyResult {
  applied: number;
  skipped: number;
  deadLetters: number;
  markersApplied: string[];
}

export async function applyBatch(
  client: PoolClient,
  kind: MaterializedKind,
  batch: ConsumedBatch<MaterializedKind>,
  options: ApplyOptions,
): Promise<ApplyResult> {
  const { groupId } = options;
  const derived = { outbox: options.outbox ?? true, hourlyRetentionDays: options.hourlyRetentionDays ?? 100 };
  const result: ApplyResult = { applied: 0, skipped: 0, deadLetters: 0, markersApplied: [] };
  await client.query('BEGIN');
  try {
    await client.query(
      `INSERT INTO consumer_offsets (group_id, topic, partition, next_offset) VALUES ($1, $2, $3, 0)
       ON CONFLICT DO NOTHING`,
      [groupId, batch.topic, batch.partition],
    );
    const { rows } = await client.query<{ next_offset: string }>(
      'SELECT next_offset FROM consumer_offsets WHERE group_id = $1 AND topic = $2 AND partition = $3 FOR UPDATE',
      [groupId, batch.topic, batch.partition],
    );
    const next = BigInt(rows[0]?.next_offset ?? '0');
    const stop = options.stopAt?.get(`${batch.topic}:${batch.partition}`);
    const fresh = batch.messages.filter(
      (m) => BigInt(m.offset) >= next && (stop === undefined || BigInt(m.offset) < stop),
    );
    result.skipped = batch.messages.length - fresh.length;
    if (fresh.length > 0) {
      const good: DecodedMessage<MaterializedKind>[] = [];
      for (const m of fresh) {
        if (m.error) {
          await client.query(
            `INSERT INTO dead_letters (topic, partition, "offset", key, error) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT DO NOTHING`,
            [m.topic, m.partition, m.offset, m.key, m.error.message],
          );
          result.deadLetters++;
        } else if (m.value !== null) good.push(m);
      }
      if (kind === 'listing') await applyListings(client, good as DecodedMessage<'listing'>[], derived);
      else if (kind === 'pollCycle')
        await storeMarkers(
          client,
          good.map((m) => m.value as PollCycleEvent),
        );
      else await applyBooks(client, kind, good as DecodedMessage<BookKind>[]);
      result.applied = good.length;
      const last = fresh.at(-1) as DecodedMessage<MaterializedKind>;
      await client.query(
        `UPDATE consumer_offsets SET next_offset = $4, updated_at = now()
         WHERE group_id = $1 AND topic = $2 AND partition = $3`,
        [groupId, batch.topic, batch.partition, (BigInt(last.offset) + 1n).toString()],
      );
    }
    result.markersApplied = await applyReadyMarkers(client, groupId, derived);
    // Readers (the API's body caches) hear of the change when, and only if, it commits.
    if (result.applied > 0 || result.markersApplied.length > 0)
      await client.query(`SELECT pg_notify('skinprices_readmodel', current_schema())`);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

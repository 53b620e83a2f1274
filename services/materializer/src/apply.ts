/**
 * The ingest path: applies one consumed batch (one partition of one topic) to PostgreSQL in one
 * transaction: the rows it produces and the partition's next offset commit together, or not at
 * all. Nothing else runs in it: poll-cycle markers are stored here and applied by the derive path
 * in transactions of their own (deriver.ts), and batches of different partitions commit
 * concurrently (materializer.ts).
 *
 * Exactly-once effect: the transaction first locks the partition's offset row and drops every
 * message below the stored offset, so a batch redelivered after a crash (Kafka's committed
 * offset lags ours), or a batch still finishing on a consumer whose partition was revoked while
 * the new owner already applied it, changes nothing. The observed_at guard on every upsert
 * makes even a replay of old events harmless.
 *
 * A record PostgreSQL refuses (poison.ts) is isolated inside the same transaction and written to
 * dead_letters; the rest of the batch and the next offset commit as usual, so the partition moves
 * on and nothing after the refused record is lost.
 *
 * The offset row says which Kafka cluster it counts records of (offsets.ts): a row bound to
 * another cluster stops the materializer here too, inside the lock, so a second process pointed
 * at another cluster cannot skip records between the start-up check and its first batch.
 */
import { DATA_KIND_NAMES, DATA_KINDS, kindOfEvent, readTag } from '@skinprices/domain';
import type { ConsumedBatch, DecodedMessage, PollCycleEvent } from '@skinprices/events';
import type { PoolClient } from '@skinprices/store';
import { applyBooks, type BookKind } from './books.js';
import { applyListings, writeImportedHours } from './listings.js';
import { storeMarkers } from './markers.js';
import { offsetsMismatchError, storedOffsetMismatch } from './offsets.js';
import { applyIsolating, failureMessage, sqlState } from './poison.js';
import { candlesTag, noteReadChanges } from './read-changes.js';
import type { BatchView, ServedListings } from './served.js';

export type MaterializedKind = 'listing' | 'pollCycle' | 'historyHours' | BookKind;

/**
 * The events the materializer consumes: every data kind's (the descriptor's), the hours of the
 * history import (HISTORY's second topic), and the cycle markers.
 */
export const MATERIALIZED_KINDS: readonly MaterializedKind[] = [
  ...DATA_KIND_NAMES.map((k): MaterializedKind => DATA_KINDS[k].event),
  'historyHours',
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
  /**
   * The Kafka cluster id the batches come from: new offset rows are bound to it, and a row bound
   * to another cluster throws `offsets_mismatch`. @default none: rows stay unbound (adopted by
   * the next materializer start)
   */
  clusterId?: string;
  /**
   * The listings rows this process holds in memory (served.ts): a repeat is dropped before SQL.
   * @default none: every record is written
   */
  served?: ServedListings;
}

export interface ApplyResult {
  applied: number;
  skipped: number;
  /** Records written to dead_letters: those that could not be decoded plus the poisoned ones. */
  deadLetters: number;
  /** Of those, the records that decoded but PostgreSQL refused (dead_letters.reason = 'sql'). */
  poisoned: number;
  /** The batch's first apply failed on a record's content and was taken apart (poison.ts). */
  isolated: boolean;
  /** Listing records that repeated the row they would write (served.ts): dropped, or only their candles written. */
  repeats?: { skipped: number; candles: number };
  /**
   * The stored next offset lies past the batch's high watermark, so the whole batch was below
   * it and skipped. Either this log is not the one the offset counts (recreated topic) or the
   * batch is stale (fetched before another member applied further); the caller tells the two
   * apart with a fresh ListOffsets (offsets.ts). Absent when the batch carried no watermark.
   */
  pastEnd?: { nextOffset: bigint; highWatermark: bigint };
}

export async function applyBatch(
  client: PoolClient,
  kind: MaterializedKind,
  batch: ConsumedBatch<MaterializedKind>,
  options: ApplyOptions,
): Promise<ApplyResult> {
  const result: ApplyResult = {
    applied: 0,
    skipped: 0,
    deadLetters: 0,
    poisoned: 0,
    isolated: false,
  };
  await client.query('BEGIN');
  try {
    const next = await lockOffsetRow(client, batch, options);
    const hw = batch.highWatermark === undefined ? undefined : BigInt(batch.highWatermark);
    if (hw !== undefined && hw >= 0n && next > hw) result.pastEnd = { nextOffset: next, highWatermark: hw };
    const stop = options.stopAt?.get(`${batch.topic}:${batch.partition}`);
    const fresh = batch.messages.filter(
      (m) => BigInt(m.offset) >= next && (stop === undefined || BigInt(m.offset) < stop),
    );
    result.skipped = batch.messages.length - fresh.length;
    const served = kind === 'listing' ? options.served : undefined;
    let applied = NOTHING_APPLIED;
    if (fresh.length > 0) {
      applied = await applyFresh(client, kind, fresh, options, served && { rows: served, storedNext: next });
      result.isolated = applied.isolated;
      result.poisoned = applied.poisoned.length;
      result.deadLetters = applied.undecoded + applied.poisoned.length;
      result.applied = applied.good.length - applied.poisoned.length;
      await storeNextOffset(client, batch, options, fresh.at(-1) as DecodedMessage<MaterializedKind>);
    }
    // A batch applied in one attempt: its view classes every good record (repeats dropped change nothing).
    const view = !result.isolated ? applied.views.at(-1) : undefined;
    if (view) {
      const skipped = view.classes.filter((c) => c === 'skip').length;
      result.repeats = { skipped, candles: view.classes.filter((c) => c === 'candle').length };
    }
    await noteReadChanges(client, readChangeTags(kind, applied, view));
    await client.query('COMMIT');
    // What the rows are now, once they are: a batch taken apart is read again by key next time.
    const last = fresh.at(-1);
    if (served && last) {
      const moved = BigInt(last.offset) + 1n;
      if (result.isolated) for (const v of applied.views) v.forget(moved);
      else if (view) view.commit(moved);
      else served.moved(batch.partition, next, moved);
    }
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/**
 * Locks the batch's partition's offset row (made at 0, bound to `options.clusterId`, if there is
 * none) for the transaction and returns its next offset; a row bound to another cluster throws
 * `offsets_mismatch`.
 */
async function lockOffsetRow(
  client: PoolClient,
  batch: ConsumedBatch<MaterializedKind>,
  options: ApplyOptions,
): Promise<bigint> {
  const { groupId } = options;
  const clusterId = options.clusterId ?? null;
  await client.query(
    `INSERT INTO consumer_offsets (group_id, topic, partition, next_offset, cluster_id, bound_at)
     VALUES ($1, $2, $3, 0, $4::text, CASE WHEN $4::text IS NOT NULL THEN now() END)
     ON CONFLICT DO NOTHING`,
    [groupId, batch.topic, batch.partition, clusterId],
  );
  const { rows } = await client.query<{ next_offset: string; cluster_id: string | null }>(
    `SELECT next_offset, cluster_id FROM consumer_offsets
     WHERE group_id = $1 AND topic = $2 AND partition = $3 FOR UPDATE`,
    [groupId, batch.topic, batch.partition],
  );
  const next = BigInt(rows[0]?.next_offset ?? '0');
  if (clusterId !== null) {
    const stored = { topic: batch.topic, partition: batch.partition, nextOffset: next };
    const foreign = storedOffsetMismatch({ ...stored, clusterId: rows[0]?.cluster_id ?? null }, clusterId, undefined);
    if (foreign) throw offsetsMismatchError(groupId, [foreign]);
  }
  return next;
}

/** What a batch's fresh records came to inside its transaction. */
interface Applied {
  /** The records that decoded, in offset order. */
  good: readonly DecodedMessage<MaterializedKind>[];
  /** Of those, the ones PostgreSQL refused (dead-lettered, reason 'sql'). */
  poisoned: readonly DecodedMessage<MaterializedKind>[];
  /** Records that could not be decoded (dead-lettered, reason 'decode'). */
  undecoded: number;
  /** The first apply failed on a record's content and was taken apart (poison.ts). */
  isolated: boolean;
  /** One per apply attempt (poison isolation may make several): the last one is the batch's. */
  views: readonly BatchView[];
}

/** A batch none of whose records is fresh. */
const NOTHING_APPLIED: Applied = { good: [], poisoned: [], undecoded: 0, isolated: false, views: [] };

/**
 * Applies the fresh records of a batch (in offset order), isolating a record PostgreSQL refuses;
 * the undecodable and the refused ones go to dead_letters.
 */
async function applyFresh(
  client: PoolClient,
  kind: MaterializedKind,
  fresh: readonly DecodedMessage<MaterializedKind>[],
  options: ApplyOptions,
  served: { rows: ServedListings; storedNext: bigint } | undefined,
): Promise<Applied> {
  const listingOptions = {
    outbox: options.outbox ?? true,
    hourlyRetentionDays: options.hourlyRetentionDays ?? 100,
  };
  const good: DecodedMessage<MaterializedKind>[] = [];
  let undecoded = 0;
  for (const m of fresh) {
    if (m.error) {
      await deadLetter(client, m, 'decode', m.error.message, null);
      undecoded++;
    } else if (m.value !== null) good.push(m);
  }
  const views: BatchView[] = [];
  const isolation = await applyIsolating(client, good, async (records) => {
    const view = await applyRecords(client, kind, records, listingOptions, served);
    if (view) views.push(view);
  });
  for (const p of isolation.poisoned)
    await deadLetter(client, p.record, 'sql', failureMessage(p.error), sqlState(p.error) ?? null);
  const poisoned = isolation.poisoned.map((p) => p.record);
  return { good, poisoned, undecoded, isolated: isolation.isolated, views };
}

/** Moves the partition's offset row past `last`, in the batch's transaction. */
async function storeNextOffset(
  client: PoolClient,
  batch: ConsumedBatch<MaterializedKind>,
  options: ApplyOptions,
  last: DecodedMessage<MaterializedKind>,
): Promise<void> {
  // A row stored before migration 0004 is bound by the first batch that moves it.
  await client.query(
    `UPDATE consumer_offsets SET next_offset = $4, updated_at = now(),
       bound_at = CASE WHEN cluster_id IS NULL AND $5::text IS NOT NULL THEN now() ELSE bound_at END,
       cluster_id = coalesce(cluster_id, $5::text)
     WHERE group_id = $1 AND topic = $2 AND partition = $3`,
    [options.groupId, batch.topic, batch.partition, (BigInt(last.offset) + 1n).toString(), options.clusterId ?? null],
  );
}

/**
 * What readers (the API's body caches) hear of the batch when, and only if, it commits: what it
 * touched, `<kind>:<market>` per marketplace of the applied records, listing rows by their keys
 * and only where a served value changed (read-changes.ts), a listing batch's candles apart (the
 * derive path notes `derived` for what markers change: deriver.ts). `view` is the batch's if it
 * was applied in one attempt.
 */
function readChangeTags(kind: MaterializedKind, applied: Applied, view: BatchView | undefined): Set<string> {
  const tags = new Set<string>();
  const dataKind = kind === 'historyHours' ? 'HISTORY' : kindOfEvent(kind);
  if (dataKind !== undefined && applied.good.length - applied.poisoned.length > 0) {
    const poisoned = new Set(applied.poisoned);
    for (const [i, m] of applied.good.entries()) {
      if (poisoned.has(m) || view?.classes[i] === 'skip') continue;
      const market = (m.value as { market: string }).market;
      tags.add(kind === 'listing' ? candlesTag(market) : readTag(dataKind, market));
    }
  }
  return tags;
}

/** The kind's apply path on a subset of the batch's decoded records (in offset order). */
async function applyRecords(
  client: PoolClient,
  kind: MaterializedKind,
  records: readonly DecodedMessage<MaterializedKind>[],
  listingOptions: { outbox: boolean; hourlyRetentionDays: number },
  served: { rows: ServedListings; storedNext: bigint } | undefined,
): Promise<BatchView | undefined> {
  if (kind === 'listing') return applyListings(client, records as DecodedMessage<'listing'>[], listingOptions, served);
  if (kind === 'pollCycle')
    await storeMarkers(
      client,
      records.map((m) => m.value as PollCycleEvent),
    );
  else if (kind === 'historyHours') {
    await writeImportedHours(client, records as DecodedMessage<'historyHours'>[], listingOptions.hourlyRetentionDays);
    // A day without a close gets its daily candle from its hours, which the day's liquidity reads.
    // The HISTORY marker vouches for history.v1 only and may be applied before these, so they
    // queue the recomputation a history cycle queues themselves (markers.ts queueDerived).
    await client.query('INSERT INTO derive_pending (cap_from, cap_to, restated) VALUES (NULL, NULL, true)');
  } else {
    // Points written with history.v1's withdrawn version 2 may carry their day's hours.
    if (kind === 'historyPoint')
      await writeImportedHours(client, records as DecodedMessage<'historyPoint'>[], listingOptions.hourlyRetentionDays);
    await applyBooks(client, kind, records as DecodedMessage<BookKind>[]);
  }
  return undefined;
}

/**
 * Keeps a record that will not be applied, with its position and why. The error text is the
 * server's message only (no statement context, which names a COPY line that depends on how the
 * batch was cut), so a replay writes the same row.
 */
async function deadLetter(
  client: PoolClient,
  m: DecodedMessage<MaterializedKind>,
  reason: 'decode' | 'sql',
  error: string,
  sqlstate: string | null,
): Promise<void> {
  await client.query(
    `INSERT INTO dead_letters (topic, partition, "offset", key, error, reason, sqlstate)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT DO NOTHING`,
    [m.topic, m.partition, m.offset, m.key === null ? null : visibleNul(m.key), visibleNul(error), reason, sqlstate],
  );
}

/** text refuses U+0000, and a poisoned record's key often holds one: spell it out as `\u0000`. */
const visibleNul = (s: string): string => s.replaceAll('\u0000', '\\u0000');

/*
 * The notifier's consumer of price-changes.v1: every change matched against every served
 * subscription, and what matched stored — a message (batch_max 1) or a batch event (batch_max > 1,
 * sealed later: sealer.ts), within the keys' daily limits (messages.ts) — in ONE transaction per
 * batch together with the partition's next offset in webhook_consumer_offsets. So a crash anywhere either stored a batch's effects and its
 * offset, or neither, and the records are read again; message ids derived from the change make a
 * record read again (or republished by the outbox, which is at least once) no second message.
 *
 * Kafka's committed offsets are not used (autoCommit off): on every assignment each partition is
 * moved (seek) to its stored offset, and each batch's transaction skips records below the stored
 * offset it locks, so a batch fetched before the seek landed, or by a process whose partition was
 * revoked meanwhile, changes nothing (the row lock orders two such batches; the second sees the
 * first's offset).
 *
 * The subscriptions matched are the cache's (subscriptions.ts), which may be older than a
 * subscription made moments ago (its NOTIFY missed, the listener reconnecting): matched without it,
 * the batch's offset would move past its first changes for good. So each batch's transaction asks
 * the database whether a subscription was created that the cache's last load did not see, and
 * reloads first if so.
 *
 *   created ──start()──▶ consuming ──(batch fails: rolled back)──▶ erroring ──(kafkajs retries it)──▶ consuming
 *                            └──stop()──▶ stopped
 */
import { AppError } from '@skinprices/domain';
import {
  EventConsumer,
  topicFor,
  type ConsumedBatch,
  type DecodedMessage,
  type EventSerde,
  type PriceChangeEvent,
} from '@skinprices/events';
import type { Logger } from '@skinprices/runtime';
import type { Pool, PoolClient } from '@skinprices/store';
import { changeBody, eventId, matches, messageId, toWebhookChange, type WebhookChange } from '@skinprices/webhooks';
import type { Admin, Kafka } from 'kafkajs';
import { storeMatches, type BatchEvent, type NewMessage } from './messages.js';
import type { NotifierMetrics } from './metrics.js';
import { CREATED_AT_MARGIN_MS, type ActiveSubscription, type LoadMark } from './subscriptions.js';

export type ConsumerState = 'created' | 'consuming' | 'erroring' | 'stopped';

/** What a batch's changes make for `subscriptions`: messages (unique ids) and batch events. Pure. */
export function matchChanges(
  changes: readonly PriceChangeEvent[],
  subscriptions: readonly ActiveSubscription[],
  now: Date,
): { messages: NewMessage[]; batchEvents: BatchEvent[] } {
  const messages = new Map<string, NewMessage>();
  const batchEvents = new Map<string, BatchEvent>();
  for (const change of changes) {
    let id: string | undefined;
    let wc: WebhookChange | undefined;
    // The same bytes for every subscription the change matches: serialised once.
    let body: string | undefined;
    for (const s of subscriptions) {
      // A consumer catching up (a new group reads the topic's 30 days) must not hand a new
      // subscription the changes committed before it existed. changed_at is the materializer
      // transaction's START: one committed just after the subscription's creation may carry an
      // earlier changed_at, hence the margin (a few changes of the minute before, at worst).
      if (change.changed_at < s.createdAt - CREATED_AT_MARGIN_MS || !matches(s.filters, change)) continue;
      id ??= eventId(change);
      wc ??= toWebhookChange(change);
      if (s.batchMax > 1) {
        batchEvents.set(`${s.id}\0${id}`, {
          subscriptionId: s.id,
          keyId: s.keyId,
          plan: s.plan,
          eventId: id,
          change: wc,
          committedAt: change.changed_at,
        });
        continue;
      }
      const mid = messageId(s.id, [id]);
      if (messages.has(mid)) continue;
      messages.set(mid, {
        id: mid,
        subscriptionId: s.id,
        keyId: s.keyId,
        plan: s.plan,
        type: 'price.changed',
        body: (body ??= changeBody(wc, now)),
        eventCount: 1,
        committedAt: change.changed_at,
      });
    }
  }
  return { messages: [...messages.values()], batchEvents: [...batchEvents.values()] };
}

/**
 * From which offset a batch's records are new, given the partition's stored row. A row bound to
 * another Kafka cluster (its logs recreated: `make clean`) counts nothing of these logs, so the
 * partition is read again from its start: derived ids turn every change already made into a
 * message into no new one. Pure.
 */
export function freshFrom(stored: { nextOffset: bigint; clusterId: string } | undefined, clusterId: string): bigint {
  return stored && stored.clusterId === clusterId ? stored.nextOffset : 0n;
}

/** What a listener hears after each committed batch. */
export interface CommittedBatch {
  topic: string;
  partition: number;
  changes: number;
  /** Messages stored (to be sent). */
  created: number;
  /** Matched changes not stored: their keys' daily limit was reached. */
  dropped: number;
  /** Batch events stored (to be sealed). */
  batchEvents: number;
}

/** Whether a subscription was created that the load marked `mark` did not see (subscriptions.ts). */
async function createdSince(client: PoolClient, mark: LoadMark): Promise<boolean> {
  const { rows } = await client.query<{ newer: boolean }>(
    `SELECT EXISTS (
       SELECT 1 FROM webhook_subscriptions
       WHERE created_at > $1::timestamptz - $3 * interval '1 millisecond' AND NOT (id = ANY($2::text[]))
     ) AS newer`,
    [mark.at, mark.recentIds, CREATED_AT_MARGIN_MS],
  );
  return rows[0]?.newer ?? false;
}

export interface ChangeConsumerOptions {
  groupId: string;
  topicSuffix: string;
  clusterId: string;
  /** @default 30000 */
  sessionTimeoutMs?: number;
  /**
   * A batch waits (fails, and kafkajs retries it) while the subscriptions were last loaded longer
   * ago than this: matching against a snapshot that cannot be refreshed would skip subscriptions
   * made since, and the offset would move past their changes for good. @default 60000
   */
  maxSnapshotAgeMs?: number;
}

export class ChangeConsumer {
  state: ConsumerState = 'created';
  private consumer: EventConsumer<'priceChange'> | undefined;
  private readonly listeners = new Set<(b: CommittedBatch) => void>();

  constructor(
    private readonly options: ChangeConsumerOptions,
    private readonly deps: {
      kafka: Kafka;
      admin: Admin;
      serde: EventSerde;
      pool: Pool;
      logger: Logger;
      subscriptions: {
        readonly list: readonly ActiveSubscription[];
        readonly loadedAt: number;
        readonly loadedAsOf: LoadMark | undefined;
        reload(): Promise<void>;
      };
      metrics?: NotifierMetrics;
    },
  ) {}

  get topic(): string {
    return `${topicFor('priceChange').name}${this.options.topicSuffix}`;
  }

  onCommitted(listener: (b: CommittedBatch) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async start(): Promise<void> {
    const codec = await this.deps.serde.codec(this.topic, 'priceChange');
    const consumer = new EventConsumer(this.deps.kafka, [codec], {
      groupId: this.options.groupId,
      fromBeginning: true,
      autoCommit: false,
      ...(this.options.sessionTimeoutMs ? { sessionTimeoutMs: this.options.sessionTimeoutMs } : {}),
    });
    this.consumer = consumer;
    const raw = consumer.raw;
    raw.on(raw.events.GROUP_JOIN, ({ payload }) => {
      const partitions = payload.memberAssignment[this.topic] ?? [];
      this.seekToStored(partitions).catch((err: unknown) =>
        // Only a shortcut: each batch's transaction skips what the stored offset has seen.
        this.deps.logger.warn({ err }, 'could not move the new assignment to its stored offsets'),
      );
    });
    this.state = 'consuming';
    await consumer.start((batch) => this.handle(batch));
  }

  async stop(): Promise<void> {
    await this.consumer?.stop();
    this.state = 'stopped';
  }

  /**
   * Moves each assigned partition to its stored offset. A row of another cluster, or one past its
   * partition's end (the topic deleted and made again), is moved back to the log's start, where
   * its partition is read again (derived ids: no message twice).
   */
  private async seekToStored(partitions: readonly number[]): Promise<void> {
    const { pool, admin, logger } = this.deps;
    if (partitions.length === 0 || !this.consumer) return;
    const { rows } = await pool.query<{ partition: number; next_offset: string; cluster_id: string }>(
      `SELECT partition, next_offset, cluster_id FROM webhook_consumer_offsets
       WHERE group_id = $1 AND topic = $2 AND partition = ANY($3::int[])`,
      [this.options.groupId, this.topic, partitions],
    );
    const ends = new Map((await admin.fetchTopicOffsets(this.topic)).map((o) => [o.partition, o]));
    for (const row of rows) {
      const end = ends.get(row.partition);
      if (!end) continue;
      let offset = row.next_offset;
      if (row.cluster_id !== this.options.clusterId || BigInt(offset) > BigInt(end.high)) {
        logger.warn(
          { topic: this.topic, partition: row.partition, stored: offset, high: end.high, cluster: row.cluster_id },
          "stored offset does not count this log's records: reading the partition again from its start",
        );
        offset = end.low;
        await pool.query(
          `UPDATE webhook_consumer_offsets SET next_offset = $4, cluster_id = $5, updated_at = now()
           WHERE group_id = $1 AND topic = $2 AND partition = $3`,
          [this.options.groupId, this.topic, row.partition, offset, this.options.clusterId],
        );
      }
      this.consumer.raw.seek({ topic: this.topic, partition: row.partition, offset });
    }
  }

  private async handle(batch: ConsumedBatch<'priceChange'>): Promise<void> {
    const { pool, logger, metrics, subscriptions } = this.deps;
    const age = Date.now() - subscriptions.loadedAt;
    if (age > (this.options.maxSnapshotAgeMs ?? 60_000))
      throw new AppError('db_unavailable', `subscriptions last loaded ${Math.round(age / 1000)} s ago: batch waits`);
    let client: PoolClient | undefined;
    try {
      client = await pool.connect();
      const report = await this.apply(client, batch);
      this.state = 'consuming';
      metrics?.consumedChanges.inc(report.changes);
      for (const l of this.listeners) l(report);
    } catch (err) {
      this.state = 'erroring';
      logger.warn({ err, topic: batch.topic, partition: batch.partition }, 'batch failed; will be retried');
      throw err;
    } finally {
      client?.release();
    }
  }

  /** The batch's transaction: offset row locked, fresh changes matched and stored, offset moved. */
  private async apply(client: PoolClient, batch: ConsumedBatch<'priceChange'>): Promise<CommittedBatch> {
    const { subscriptions } = this.deps;
    const last = batch.messages.at(-1);
    const report = {
      topic: batch.topic,
      partition: batch.partition,
      changes: 0,
      created: 0,
      dropped: 0,
      batchEvents: 0,
    };
    if (!last) return report;
    try {
      await client.query('BEGIN');
      const from = await this.lockOffset(client, batch);
      const fresh = batch.messages.filter((m) => BigInt(m.offset) >= from);
      const changes = this.decoded(fresh);
      report.changes = changes.length;
      // A load's mark comes from the database's clock, as created_at does: no clock skew between
      // the hosts can hide a subscription. The reload (on another connection) sees every commit
      // this check saw.
      const mark = subscriptions.loadedAsOf;
      if (changes.length > 0 && (!mark || (await createdSince(client, mark)))) await subscriptions.reload();
      const { messages, batchEvents } = matchChanges(changes, subscriptions.list, new Date());
      const stored = await storeMatches(client, messages, batchEvents);
      report.created = stored.created;
      report.dropped = stored.dropped;
      report.batchEvents = stored.batchEvents;
      await client.query(
        `UPDATE webhook_consumer_offsets SET next_offset = greatest(next_offset, $4), cluster_id = $5, updated_at = now()
         WHERE group_id = $1 AND topic = $2 AND partition = $3`,
        [
          this.options.groupId,
          batch.topic,
          batch.partition,
          (BigInt(last.offset) + 1n).toString(),
          this.options.clusterId,
        ],
      );
      await client.query('COMMIT');
      return report;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }

  /** Locks the partition's offset row (made at 0 if none) and returns from where records are new. */
  private async lockOffset(client: PoolClient, batch: ConsumedBatch<'priceChange'>): Promise<bigint> {
    const key = [this.options.groupId, batch.topic, batch.partition];
    await client.query(
      `INSERT INTO webhook_consumer_offsets (group_id, topic, partition, next_offset, cluster_id)
       VALUES ($1, $2, $3, 0, $4) ON CONFLICT DO NOTHING`,
      [...key, this.options.clusterId],
    );
    const { rows } = await client.query<{ next_offset: string; cluster_id: string }>(
      `SELECT next_offset, cluster_id FROM webhook_consumer_offsets
       WHERE group_id = $1 AND topic = $2 AND partition = $3 FOR UPDATE`,
      key,
    );
    const row = rows[0];
    const stored = row && { nextOffset: BigInt(row.next_offset), clusterId: row.cluster_id };
    if (stored && stored.clusterId !== this.options.clusterId)
      // Rebound by this batch's UPDATE; greatest() there must not keep the foreign position.
      await client.query(
        `UPDATE webhook_consumer_offsets SET next_offset = 0, cluster_id = $4 WHERE group_id = $1 AND topic = $2 AND partition = $3`,
        [...key, this.options.clusterId],
      );
    return freshFrom(stored, this.options.clusterId);
  }

  /** The batch's changes; an undecodable record is logged and skipped (it cannot be matched). */
  private decoded(messages: readonly DecodedMessage<'priceChange'>[]): PriceChangeEvent[] {
    const out: PriceChangeEvent[] = [];
    for (const m of messages) {
      if (m.error) {
        this.deps.metrics?.undecodable.inc();
        this.deps.logger.error(
          { topic: m.topic, partition: m.partition, offset: m.offset, err: m.error },
          'undecodable price change skipped',
        );
      } else if (m.value) out.push(m.value);
    }
    return out;
  }
}

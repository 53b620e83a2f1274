/**
 * Where a poller's jobs resume after a restart, so that nothing is published twice because a
 * process restarted: the history import's days and the sales window, kept on poller-cursors.v1,
 * a compacted topic with one record per [market, kind]. Why Kafka: pollers never read the
 * database, and the cursor lives beside the records it counts.
 *
 * A job's cursor is written after each cycle that moved it (poller.ts), after the cycle's records
 * were acknowledged and before its marker; a restarted poller reads the topic from its beginning
 * to the end offsets it found at start (a consumer group of its own, nothing committed) and keeps
 * the last record of each of its kinds. A crash between a cycle's records and its cursor imports
 * that one day (or window) again; a stop lets a running history cycle end first (poller.ts).
 */
import { randomUUID } from 'node:crypto';
import { AppError } from '@skinprices/domain';
import {
  EventConsumer,
  topicFor,
  type EventProducer,
  type EventSerde,
  type PollerCursorEvent,
} from '@skinprices/events';
import type { Admin, Kafka } from 'kafkajs';

export interface CursorStore {
  /** The kept cursors of `market`'s jobs, by data kind. */
  load(market: string): Promise<Map<string, PollerCursorEvent>>;
  save(cursor: PollerCursorEvent): Promise<void>;
}

export interface KafkaCursorStoreOptions {
  topicSuffix: string;
  /** Names the reading consumer group (a unique tail is added per load). */
  owner: string;
  /** How long a load may take before it fails (retryable: the process is restarted). @default 30 s */
  loadTimeoutMs?: number;
}

export class KafkaCursorStore implements CursorStore {
  constructor(
    private readonly options: KafkaCursorStoreOptions,
    private readonly deps: { kafka: Kafka; admin: Admin; serde: EventSerde; producer: EventProducer },
  ) {}

  private get topic(): string {
    return `${topicFor('pollerCursor').name}${this.options.topicSuffix}`;
  }

  async load(market: string): Promise<Map<string, PollerCursorEvent>> {
    const kept = new Map<string, PollerCursorEvent>();
    const ends = await this.deps.admin.fetchTopicOffsets(this.topic);
    /** Per partition, the end offset the read must reach (partitions with records only). */
    const pending = new Map(
      ends.filter((e) => BigInt(e.high) > BigInt(e.low)).map((e) => [e.partition, BigInt(e.high)] as const),
    );
    if (pending.size === 0) return kept;
    const codec = await this.deps.serde.codec(this.topic, 'pollerCursor');
    const consumer = new EventConsumer(this.deps.kafka, [codec], {
      groupId: `${this.options.owner}-cursors-${randomUUID().slice(0, 8)}`,
      fromBeginning: true,
      autoCommit: false,
    });
    let reached: () => void = () => undefined;
    const read = new Promise<void>((resolve) => (reached = resolve));
    try {
      await consumer.start(async (batch) => {
        for (const m of batch.messages) {
          const cursor = m.value as PollerCursorEvent | null;
          if (cursor && cursor.market === market) kept.set(cursor.kind, cursor);
          const end = pending.get(batch.partition);
          if (end !== undefined && BigInt(m.offset) + 1n >= end) pending.delete(batch.partition);
        }
        if (pending.size === 0) reached();
      });
      const timeoutMs = this.options.loadTimeoutMs ?? 30_000;
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new AppError('kafka_unavailable', `${this.topic} not read to its end within ${timeoutMs} ms`, {
                retryable: true,
              }),
            ),
          timeoutMs,
        );
      });
      await Promise.race([read, late]).finally(() => clearTimeout(timer));
      return kept;
    } finally {
      await consumer.stop();
    }
  }

  async save(cursor: PollerCursorEvent): Promise<void> {
    const codec = await this.deps.serde.codec(this.topic, 'pollerCursor');
    const res = await this.deps.producer.send(codec, [cursor]);
    if (res.rejected.length > 0)
      throw new AppError('serde_invalid_event', `cursor of ${cursor.market} ${cursor.kind} refused by its schema`, {
        retryable: false,
      });
  }
}

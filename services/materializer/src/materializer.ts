/*
 * The materializer: consumes every poller topic (listings, buy orders, float-ranged, float buy
 * orders, sales, the store's book, history, poll-cycle markers) and applies each batch in one
 * PostgreSQL transaction with its offsets (see apply.ts).
 *
 *   created ──start()──▶ migrating ──▶ consuming ──stop()──▶ stopping ──▶ stopped
 *                                         │  ▲
 *                              batch fails│  │retry after backoff (kafkajs re-delivers the batch)
 *                                         ▼  │
 *                                       erroring
 *
 * Kafka's committed offsets are only a starting hint (committed after our transaction);
 * PostgreSQL's consumer_offsets decide what is new. Offsets are resolved only after the
 * transaction commits, and not at all for a partition revoked meanwhile (the consumer helper
 * checks isStale): the new owner starts from PostgreSQL's offsets either way.
 */
import { EventConsumer, topicFor, type EventSerde, type TopicCodec } from '@skinprices/events';
import type { Logger } from '@skinprices/runtime';
import { migrate, type Pool, type PoolClient } from '@skinprices/store';
import type { Kafka } from 'kafkajs';
import { schemaLockSql } from './lock.js';
import { applyBatch, MATERIALIZED_KINDS, type ApplyResult, type MaterializedKind } from './apply.js';

export type MaterializerState = 'created' | 'migrating' | 'consuming' | 'erroring' | 'stopping' | 'stopped';

export interface MaterializerOptions {
  groupId: string;
  topicSuffix: string;
  migrationsDir: string;
  /** @default 30000 */
  sessionTimeoutMs?: number;
  /** Write committed changes to the outbox. @default true (off while replaying) */
  outbox?: boolean;
  /** Days of hourly history kept. @default 100 */
  hourlyRetentionDays?: number;
  /** Per `topic:partition`, the first offset not to apply. @default none */
  stopAt?: ReadonlyMap<string, bigint>;
}

/** What a listener hears after each committed batch; `ms` is the time from receipt to commit. */
export type BatchReport = ApplyResult & { topic: string; ms: number };

export class Materializer {
  state: MaterializerState = 'created';
  private consumer: EventConsumer<MaterializedKind> | undefined;
  private lock: PoolClient | undefined;
  private readonly listeners = new Set<(r: BatchReport) => void>();

  constructor(
    private readonly options: MaterializerOptions,
    private readonly deps: { kafka: Kafka; serde: EventSerde; pool: Pool; logger: Logger },
  ) {}

  onBatch(listener: (r: BatchReport) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async start(): Promise<void> {
    const { pool, serde, kafka, logger } = this.deps;
    // Held for the process's lifetime; a running replay holds it exclusively, and we wait for it.
    this.lock = await pool.connect();
    await this.lock.query(`SELECT pg_advisory_lock_shared(${schemaLockSql('current_schema()')})`);
    this.state = 'migrating';
    const mig = await migrate(pool, this.options.migrationsDir);
    if (mig.applied.length > 0) logger.info({ applied: mig.applied.map((m) => m.version) }, 'migrations applied');
    const codecs: TopicCodec<MaterializedKind>[] = [];
    const kindOf = new Map<string, MaterializedKind>();
    for (const kind of MATERIALIZED_KINDS) {
      const codec = await serde.codec(`${topicFor(kind).name}${this.options.topicSuffix}`, kind);
      codecs.push(codec as TopicCodec<MaterializedKind>);
      kindOf.set(codec.topic, kind);
    }
    this.consumer = new EventConsumer(kafka, codecs, {
      groupId: this.options.groupId,
      fromBeginning: true,
      ...(this.options.sessionTimeoutMs ? { sessionTimeoutMs: this.options.sessionTimeoutMs } : {}),
    });
    const applyOptions = {
      groupId: this.options.groupId,
      outbox: this.options.outbox ?? true,
      hourlyRetentionDays: this.options.hourlyRetentionDays ?? 100,
      ...(this.options.stopAt ? { stopAt: this.options.stopAt } : {}),
    };
    this.state = 'consuming';
    await this.consumer.start(async (batch) => {
      const t0 = performance.now();
      const client = await pool.connect();
      try {
        const result = await applyBatch(client, kindOf.get(batch.topic) as MaterializedKind, batch, applyOptions);
        if (this.state === 'erroring') this.state = 'consuming';
        for (const l of this.listeners) l({ ...result, topic: batch.topic, ms: performance.now() - t0 });
        if (result.deadLetters > 0)
          logger.error({ topic: batch.topic, count: result.deadLetters }, 'records sent to dead_letters');
      } catch (err) {
        // Throwing makes kafkajs retry the batch (with its backoff); nothing was committed.
        this.state = 'erroring';
        logger.warn({ err, topic: batch.topic, partition: batch.partition }, 'batch failed; will be retried');
        throw err;
      } finally {
        client.release();
      }
    });
  }

  async stop(): Promise<void> {
    this.state = 'stopping';
    await this.consumer?.stop();
    await this.lock?.query('SELECT pg_advisory_unlock_all()').catch(() => undefined);
    this.lock?.release();
    this.lock = undefined;
    this.state = 'stopped';
  }
}

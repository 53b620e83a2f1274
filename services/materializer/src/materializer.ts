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
 * A batch refused for a record's content never reaches `erroring`: the record is isolated and
 * dead-lettered inside the batch's transaction (poison.ts) and the partition moves on. Only
 * retryable errors (connection, deadlock, shutdown) roll back and let kafkajs redeliver.
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
import { Heartbeat } from './heartbeat.js';
import type { MaterializerMetrics } from './metrics.js';

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
  /**
   * Write this process's row in materializer_heartbeat (state, lag, last batch) this often.
   * @default none: no heartbeat (replays, embedded tests)
   */
  heartbeatIntervalMs?: number;
}

/** What a listener hears after each committed batch; `ms` is the time from receipt to commit. */
export type BatchReport = ApplyResult & { topic: string; partition: number; ms: number };

export class Materializer {
  state: MaterializerState = 'created';
  private consumer: EventConsumer<MaterializedKind> | undefined;
  private lock: PoolClient | undefined;
  private readonly listeners = new Set<(r: BatchReport) => void>();
  private heartbeat: Heartbeat | undefined;
  private assignment: Record<string, number[]> | undefined;
  private kafkaMemberId: string | undefined;
  private lastBatchAt: Date | undefined;

  constructor(
    private readonly options: MaterializerOptions,
    private readonly deps: {
      kafka: Kafka;
      serde: EventSerde;
      pool: Pool;
      logger: Logger;
      /** @default none: nothing is measured */
      metrics?: MaterializerMetrics;
    },
  ) {}

  /** This process's row in materializer_heartbeat, if it writes one. */
  get memberId(): string | undefined {
    return this.heartbeat?.memberId;
  }

  onBatch(listener: (r: BatchReport) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async start(): Promise<void> {
    const { pool, serde, kafka, logger, metrics } = this.deps;
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
    const raw = this.consumer.raw;
    raw.on(raw.events.GROUP_JOIN, ({ payload }) => {
      this.assignment = payload.memberAssignment;
      this.kafkaMemberId = payload.memberId;
    });
    for (const topic of kindOf.keys())
      for (const reason of ['decode', 'sql']) metrics?.deadLetters.inc({ topic, reason }, 0);
    if (this.options.heartbeatIntervalMs) {
      this.heartbeat = new Heartbeat(
        { groupId: this.options.groupId, intervalMs: this.options.heartbeatIntervalMs },
        {
          pool,
          kafka,
          logger,
          ...(metrics ? { metrics } : {}),
          source: {
            state: () => this.state,
            assignment: () => this.assignment,
            kafkaMemberId: () => this.kafkaMemberId,
            lastBatchAt: () => this.lastBatchAt,
          },
        },
      );
      this.heartbeat.start();
    }
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
        const report = { ...result, topic: batch.topic, partition: batch.partition, ms: performance.now() - t0 };
        this.lastBatchAt = new Date();
        this.record(report);
        for (const l of this.listeners) l(report);
        if (result.deadLetters > 0)
          logger.error(
            {
              topic: batch.topic,
              partition: batch.partition,
              count: result.deadLetters,
              poisoned: result.poisoned,
            },
            'records sent to dead_letters',
          );
      } catch (err) {
        // Throwing makes kafkajs retry the batch (with its backoff); nothing was committed.
        metrics?.batchesFailed.inc({ topic: batch.topic });
        this.state = 'erroring';
        logger.warn({ err, topic: batch.topic, partition: batch.partition }, 'batch failed; will be retried');
        throw err;
      } finally {
        client.release();
      }
    });
  }

  private record(r: BatchReport): void {
    const { metrics } = this.deps;
    if (!metrics) return;
    metrics.batchSeconds.observe({ topic: r.topic }, r.ms / 1000);
    metrics.records.inc({ topic: r.topic }, r.applied);
    if (r.deadLetters > r.poisoned)
      metrics.deadLetters.inc({ topic: r.topic, reason: 'decode' }, r.deadLetters - r.poisoned);
    if (r.poisoned > 0) metrics.deadLetters.inc({ topic: r.topic, reason: 'sql' }, r.poisoned);
    if (r.isolated) metrics.batchesIsolated.inc({ topic: r.topic });
    if (r.markersApplied.length > 0) {
      metrics.deriveSeconds.observe(r.deriveMs / 1000);
      metrics.markers.inc(r.markersApplied.length);
    }
    metrics.lastBatch.set(this.lastBatchAt ? this.lastBatchAt.getTime() / 1000 : Date.now() / 1000);
  }

  async stop(): Promise<void> {
    this.state = 'stopping';
    await this.heartbeat?.stop();
    this.heartbeat = undefined;
    await this.consumer?.stop();
    await this.lock?.query('SELECT pg_advisory_unlock_all()').catch(() => undefined);
    this.lock?.release();
    this.lock = undefined;
    this.state = 'stopped';
  }
}

/*
 * A materializer process's heartbeat: every interval it writes its row in materializer_heartbeat
 * (wall-clock now(), its state, its last committed batch, its lag) and sets the lag gauges, so
 * /v1/status and Prometheus see a dead, hung or falling-behind materializer within a minute.
 *
 *   idle ──start()──▶ beating ⇄ sleeping ──stop()──▶ stopped (row deleted: a clean stop is not a death)
 *
 * Lag is measured here with the admin client (ListOffsets per assigned topic) against the next
 * offsets stored in PostgreSQL, not from the batches' high watermarks: a batch only reports a
 * watermark when one arrives, so an idle partition, a hung apply or a consumer that never got a
 * fetch back would freeze the figure exactly when it matters. One ListOffsets per topic (eight)
 * and one indexed query every few seconds cost nothing next to the batches.
 * The stored offsets, not Kafka's committed ones, are the truth (see apply.ts), so lag is what
 * the read model has not applied yet.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@skinprices/runtime';
import type { Pool } from '@skinprices/store';
import type { Admin, Kafka } from 'kafkajs';
import type { MaterializerMetrics } from './metrics.js';

export interface PartitionLag {
  topic: string;
  partition: number;
  /** The partition's end (high watermark): the offset the next record will get. */
  end: number;
  /** The first offset the read model has not applied (stored next_offset, or the log start). */
  next: number;
  lag: number;
}

/** Offsets per `topic:partition` as Kafka reports them. */
export type PartitionEnds = ReadonlyMap<string, { low: bigint; high: bigint }>;

/**
 * Lag of the assigned partitions: end − max(stored next offset, log start). A partition without
 * a stored offset is read from its log start (the consumer starts from the beginning), and one
 * whose early records were deleted by retention cannot be behind by more than what is left.
 * Pure; partitions Kafka gave no offsets for are left out.
 */
export function measureLag(
  assigned: Readonly<Record<string, readonly number[]>>,
  ends: PartitionEnds,
  stored: ReadonlyMap<string, bigint>,
): { total: bigint; partitions: PartitionLag[] } {
  let total = 0n;
  const partitions: PartitionLag[] = [];
  for (const topic of Object.keys(assigned).sort())
    for (const partition of [...(assigned[topic] ?? [])].sort((a, b) => a - b)) {
      const key = `${topic}:${partition}`;
      const end = ends.get(key);
      if (!end) continue;
      const from = stored.get(key) ?? end.low;
      const next = from > end.low ? from : end.low;
      const lag = end.high > next ? end.high - next : 0n;
      total += lag;
      partitions.push({ topic, partition, end: Number(end.high), next: Number(next), lag: Number(lag) });
    }
  return { total, partitions };
}

/** What the heartbeat reads from the consumer it reports on. */
export interface HeartbeatSource {
  state: () => string;
  /** Topic → partitions assigned at the last group join; undefined before the first join. */
  assignment: () => Readonly<Record<string, readonly number[]>> | undefined;
  kafkaMemberId: () => string | undefined;
  lastBatchAt: () => Date | undefined;
}

export interface HeartbeatOptions {
  groupId: string;
  intervalMs: number;
  /** @default `<host>/<pid>/<random>` (several materializers may share a process in tests) */
  memberId?: string;
  /** Rows silent this long are deleted by any live member. @default 3_600_000 */
  pruneAfterMs?: number;
}

export type HeartbeatState = 'idle' | 'beating' | 'sleeping' | 'stopped';

export class Heartbeat {
  state: HeartbeatState = 'idle';
  readonly memberId: string;
  private readonly startedAt = new Date();
  private readonly stopCtl = new AbortController();
  private loop: Promise<void> | undefined;
  private admin: Admin | undefined;
  /** A ListOffsets still running (Kafka slow or away): never start a second one beside it. */
  private measuring: Promise<unknown> | undefined;

  constructor(
    private readonly options: HeartbeatOptions,
    private readonly deps: {
      pool: Pool;
      kafka: Kafka;
      logger: Logger;
      source: HeartbeatSource;
      metrics?: MaterializerMetrics;
    },
  ) {
    this.memberId = options.memberId ?? `${hostname()}/${process.pid}/${randomBytes(3).toString('hex')}`;
  }

  start(): void {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopCtl.abort();
    await this.loop;
    this.state = 'stopped';
    await this.deps.pool
      .query('DELETE FROM materializer_heartbeat WHERE member_id = $1', [this.memberId])
      .catch(() => undefined);
    // A ListOffsets still in flight finishes against a disconnected admin and is ignored.
    await this.admin?.disconnect().catch(() => undefined);
  }

  private async run(): Promise<void> {
    while (!this.stopCtl.signal.aborted) {
      this.state = 'beating';
      try {
        await this.beatOnce();
      } catch (err) {
        this.deps.metrics?.heartbeatFailures.inc();
        this.deps.logger.warn({ err }, 'heartbeat failed; trying again at the next interval');
      }
      this.state = 'sleeping';
      await sleep(this.options.intervalMs, undefined, { signal: this.stopCtl.signal }).catch(() => undefined);
    }
  }

  /** Measures lag (bounded by the interval) and writes the row; lag is NULL when it could not be measured. */
  async beatOnce(): Promise<void> {
    const { pool, source, metrics } = this.deps;
    const assigned = source.assignment();
    let lag: { total: bigint; partitions: PartitionLag[] } | undefined;
    if (assigned) {
      try {
        lag = await this.withinInterval(() => this.measure(assigned));
      } catch (err) {
        metrics?.heartbeatFailures.inc();
        this.deps.logger.warn({ err }, 'could not measure consumer lag');
      }
    }
    if (metrics && lag) {
      // Reset first: partitions revoked since the last beat must not keep their old series.
      metrics.lag.reset();
      for (const p of lag.partitions) metrics.lag.set({ topic: p.topic, partition: String(p.partition) }, p.lag);
    }
    await pool.query(
      `INSERT INTO materializer_heartbeat AS h (member_id, group_id, host, pid, kafka_member_id, state, started_at,
                                          heartbeat_at, last_batch_at, lag, lag_by_partition)
       VALUES ($1, $2, $3, $4, $5, $6, $7, now(), $8, $9, $10)
       ON CONFLICT (member_id) DO UPDATE SET
         kafka_member_id = excluded.kafka_member_id, state = excluded.state, heartbeat_at = excluded.heartbeat_at,
         last_batch_at = excluded.last_batch_at, lag = excluded.lag, lag_by_partition = excluded.lag_by_partition`,
      [
        this.memberId,
        this.options.groupId,
        hostname(),
        process.pid,
        source.kafkaMemberId() ?? null,
        source.state(),
        this.startedAt,
        source.lastBatchAt() ?? null,
        lag ? lag.total.toString() : null,
        JSON.stringify(lag?.partitions ?? []),
      ],
    );
    await pool.query(
      `DELETE FROM materializer_heartbeat WHERE heartbeat_at < now() - make_interval(secs => $1::double precision / 1000)`,
      [this.options.pruneAfterMs ?? 3_600_000],
    );
    metrics?.heartbeat.set(Date.now() / 1000);
    if (metrics) {
      // The oldest unpublished change (by id, the primary key: no scan however long the outbox grows).
      const { rows } = await pool.query<{ age: number | null }>(
        `SELECT extract(epoch FROM now() - changed_at)::float8 AS age FROM price_change_outbox ORDER BY id LIMIT 1`,
      );
      metrics.outboxOldestAge.set(Math.max(0, rows[0]?.age ?? 0));
    }
  }

  private async measure(
    assigned: Readonly<Record<string, readonly number[]>>,
  ): Promise<{ total: bigint; partitions: PartitionLag[] }> {
    if (!this.admin) {
      const admin = this.deps.kafka.admin();
      await admin.connect();
      this.admin = admin;
    }
    const ends = new Map<string, { low: bigint; high: bigint }>();
    for (const topic of Object.keys(assigned)) {
      if ((assigned[topic] ?? []).length === 0) continue;
      for (const p of await this.admin.fetchTopicOffsets(topic))
        ends.set(`${topic}:${p.partition}`, { low: BigInt(p.low), high: BigInt(p.high) });
    }
    const { rows } = await this.deps.pool.query<{ topic: string; partition: number; next_offset: string }>(
      'SELECT topic, partition, next_offset FROM consumer_offsets WHERE group_id = $1',
      [this.options.groupId],
    );
    const stored = new Map(rows.map((r) => [`${r.topic}:${r.partition}`, BigInt(r.next_offset)]));
    return measureLag(assigned, ends, stored);
  }

  /** Kafka away makes ListOffsets retry for long: the row is written on time anyway, lag unknown. */
  private async withinInterval<T>(work: () => Promise<T>): Promise<T> {
    if (this.measuring) throw new Error('the previous lag measurement has not finished');
    const tracked = work().finally(() => {
      this.measuring = undefined;
    });
    this.measuring = tracked;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error('lag measurement timed out')),
        Math.max(this.options.intervalMs, 2_000),
      );
    });
    try {
      return await Promise.race([tracked, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}

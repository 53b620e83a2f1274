/*
 * Publishes committed changes from price_change_outbox to price-changes.v1 and the compacted
 * prices.current.v1, then deletes them — so subscribers only ever hear of changes that are in
 * the read model. In the same transaction it numbers them into price_change_log (migration 0006),
 * the committed-change log the HTTP change feed and stream read: Kafka and HTTP subscribers see
 * the same changes in the same order. A NOTIFY on `skinprices_changes` at commit wakes streams.
 *
 *   idle ──(tick)──▶ publishing ──(rows sent, deleted)──▶ idle
 *                        │
 *                        └──(Kafka or PostgreSQL away)──▶ backoff ──▶ idle
 *   any ──stop()──▶ stopped
 *
 * Delivery is at least once: a crash between Kafka's ack and the COMMIT publishes those rows
 * again. Subscribers de-duplicate by (key, observed_at). Replays cannot emit phantom changes:
 * re-applying old events changes no row (the observed_at guard), so no outbox row is written.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { topicFor, type EventProducer, type EventSerde } from '@skinprices/events';
import { Backoff, type Logger } from '@skinprices/runtime';
import type { Pool } from '@skinprices/store';
import type { MaterializerMetrics } from './metrics.js';

export type OutboxState = 'idle' | 'publishing' | 'backoff' | 'stopped';

/**
 * The advisory lock that orders price_change_log: held from drawing numbers until COMMIT, so
 * numbers become visible in commit order (see the migration). An arbitrary constant of ours.
 */
const CHANGE_LOG_LOCK = 7_346_200_451;
/** The channel API processes LISTEN on to wake their change streams. */
export const CHANGES_CHANNEL = 'skinprices_changes';

export interface OutboxOptions {
  topicSuffix: string;
  intervalMs: number;
  batchSize: number;
  /** Changes older than this leave price_change_log (the HTTP feed's reach back). @default 7 days */
  logRetentionMs?: number;
  /** How often retention runs. @default 60 s */
  pruneEveryMs?: number;
}

interface OutboxRow {
  id: string;
  market: string;
  market_hash_name: string;
  phase: string;
  currency: string;
  old_price: string | null;
  new_price: string | null;
  old_count: number | null;
  new_count: number | null;
  observed_at: Date;
  changed_at: Date;
  is_outlier: boolean | null;
  confidence: string | null;
}

export class OutboxPublisher {
  state: OutboxState = 'idle';
  private loop: Promise<void> | undefined;
  private readonly stopCtl = new AbortController();
  published = 0;

  constructor(
    private readonly options: OutboxOptions,
    private readonly deps: {
      pool: Pool;
      producer: EventProducer;
      serde: EventSerde;
      logger: Logger;
      /** @default none: nothing is measured */
      metrics?: MaterializerMetrics;
    },
  ) {}

  start(): void {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopCtl.abort();
    await this.loop;
    this.state = 'stopped';
  }

  private lastPrune = 0;

  private async run(): Promise<void> {
    const backoff = new Backoff({ baseMs: 250, maxMs: 10_000 });
    while (!this.stopCtl.signal.aborted) {
      try {
        this.state = 'publishing';
        if (Date.now() - this.lastPrune >= (this.options.pruneEveryMs ?? 60_000)) {
          await this.pruneLog();
          this.lastPrune = Date.now();
        }
        const n = await this.publishOnce();
        backoff.reset();
        this.state = 'idle';
        if (n === this.options.batchSize) continue;
        await sleep(this.options.intervalMs, undefined, { signal: this.stopCtl.signal });
      } catch (err) {
        if (this.stopCtl.signal.aborted) break;
        this.state = 'backoff';
        this.deps.logger.warn({ err }, 'outbox publish failed; backing off');
        await sleep(backoff.next(), undefined, { signal: this.stopCtl.signal }).catch(() => undefined);
      }
    }
  }

  /**
   * Retention of the change log: rows older than the window go, and `pruned_through` remembers
   * the highest number deleted, so the feed can tell an expired cursor from a quiet one.
   */
  async pruneLog(): Promise<number> {
    const retention = this.options.logRetentionMs ?? 7 * 86_400_000;
    const { rows } = await this.deps.pool.query<{ n: number }>(
      `WITH gone AS (DELETE FROM price_change_log WHERE logged_at < now() - $1 * interval '1 millisecond' RETURNING seq),
            mark AS (UPDATE price_change_log_state SET pruned_through = greatest(pruned_through, (SELECT max(seq) FROM gone))
                     WHERE EXISTS (SELECT 1 FROM gone))
       SELECT count(*)::int AS n FROM gone`,
      [retention],
    );
    return rows[0]?.n ?? 0;
  }

  /** Publishes one batch; returns how many rows it handled. */
  async publishOnce(): Promise<number> {
    const { pool, producer, serde } = this.deps;
    const changes = await serde.codec(`${topicFor('priceChange').name}${this.options.topicSuffix}`, 'priceChange');
    const current = await serde.codec(`${topicFor('currentPrice').name}${this.options.topicSuffix}`, 'currentPrice');
    const client = await pool.connect();
    try {
      // Nothing to publish: no lock taken (another publisher may hold it through a slow send).
      const { rows: queued } = await client.query<{ any: boolean }>(
        'SELECT EXISTS (SELECT 1 FROM price_change_outbox) AS any',
      );
      if (!queued[0]?.any) return 0;
      await client.query('BEGIN');
      // Numbers are drawn under the lock (held until COMMIT), so they become visible in order.
      await client.query('SELECT pg_advisory_xact_lock($1)', [CHANGE_LOG_LOCK]);
      // One statement takes the rows out of the outbox and numbers them into the log, in id order
      // (nextval in a subquery: in a sorted SELECT's list it runs before the sort), not three (a
      // SELECT … FOR UPDATE, the log's INSERT and the DELETE, each finding the rows by id again):
      // the relay runs beside ingest through a cold start, on the same PostgreSQL. A failed send
      // rolls the DELETE back, so delivery stays at least once. The lock also makes several
      // materializer replicas publish one after another, so no row needs locking apart.
      const { rows } = await client.query<OutboxRow>(
        `WITH taken AS (
           DELETE FROM price_change_outbox
           WHERE id IN (SELECT id FROM price_change_outbox ORDER BY id LIMIT $1)
           RETURNING *
         ),
         logged AS (
           INSERT INTO price_change_log (seq, market, market_hash_name, phase, currency, old_price, new_price,
                                         old_count, new_count, observed_at, changed_at)
           SELECT nextval('price_change_seq'), market, market_hash_name, phase, currency, old_price, new_price,
                  old_count, new_count, observed_at, changed_at
           FROM (SELECT * FROM taken ORDER BY id) o
         )
         SELECT * FROM taken ORDER BY id`,
        [this.options.batchSize],
      );
      if (rows.length > 0) {
        await client.query(`SELECT pg_notify('${CHANGES_CHANNEL}', current_schema())`);
        await producer.send(
          changes,
          rows.map((r) => ({
            market: r.market,
            market_hash_name: r.market_hash_name,
            phase: r.phase,
            currency: r.currency,
            old_price: r.old_price,
            new_price: r.new_price,
            old_count: r.old_count,
            new_count: r.new_count,
            observed_at: r.observed_at.getTime(),
            changed_at: r.changed_at.getTime(),
          })),
        );
        await producer.send(
          current,
          rows.map((r) => ({
            market: r.market,
            market_hash_name: r.market_hash_name,
            phase: r.phase,
            currency: r.currency,
            price: r.new_price,
            count: r.new_count ?? 0,
            updated_at: r.observed_at.getTime(),
            is_outlier: r.is_outlier,
            confidence: r.confidence,
          })),
        );
        this.published += rows.length;
      }
      await client.query('COMMIT');
      this.deps.metrics?.outboxPublished.inc(rows.length);
      return rows.length;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }
}

/*
 * Publishes committed changes from price_change_outbox to price-changes.v1 and the compacted
 * prices.current.v1, then deletes them — so subscribers only ever hear of changes that are in
 * the read model.
 *
 *   idle ──(tick)──▶ publishing ──(rows sent, deleted)──▶ idle
 *                        │
 *                        └──(Kafka or PostgreSQL away)──▶ backoff ──▶ idle
 *   any ──stop()──▶ stopped
 *
 * Delivery is at least once: a crash between Kafka's ack and the DELETE publishes those rows
 * again. Subscribers de-duplicate by (key, observed_at). Replays cannot emit phantom changes:
 * re-applying old events changes no row (the observed_at guard), so no outbox row is written.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { topicFor, type EventProducer, type EventSerde } from '@skinprices/events';
import type { Logger } from '@skinprices/runtime';
import type { Pool } from '@skinprices/store';
import type { MaterializerMetrics } from './metrics.js';

export type OutboxState = 'idle' | 'publishing' | 'backoff' | 'stopped';

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
}

export class OutboxPublisher {
  state: OutboxState = 'idle';
  private loop: Promise<void> | undefined;
  private readonly stopCtl = new AbortController();
  published = 0;

  constructor(
    private readonly options: { topicSuffix: string; intervalMs: number; batchSize: number },
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

  private async run(): Promise<void> {
    let backoff = 250;
    while (!this.stopCtl.signal.aborted) {
      try {
        this.state = 'publishing';
        const n = await this.publishOnce();
        backoff = 250;
        this.state = 'idle';
        if (n === this.options.batchSize) continue;
        await sleep(this.options.intervalMs, undefined, { signal: this.stopCtl.signal });
      } catch (err) {
        if (this.stopCtl.signal.aborted) break;
        this.state = 'backoff';
        this.deps.logger.warn({ err }, 'outbox publish failed; backing off');
        backoff = Math.min(10_000, backoff * 2);
        await sleep(backoff, undefined, { signal: this.stopCtl.signal }).catch(() => undefined);
      }
    }
  }

  /** Publishes one batch; returns how many rows it handled. */
  async publishOnce(): Promise<number> {
    const { pool, producer, serde } = this.deps;
    const changes = await serde.codec(`${topicFor('priceChange').name}${this.options.topicSuffix}`, 'priceChange');
    const current = await serde.codec(`${topicFor('currentPrice').name}${this.options.topicSuffix}`, 'currentPrice');
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      // SKIP LOCKED: several materializer replicas can publish side by side without doubling.
      const { rows } = await client.query<OutboxRow>(
        `SELECT * FROM price_change_outbox ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`,
        [this.options.batchSize],
      );
      if (rows.length > 0) {
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
          })),
        );
        await client.query('DELETE FROM price_change_outbox WHERE id = ANY($1::bigint[])', [rows.map((r) => r.id)]);
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

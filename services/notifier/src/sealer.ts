/*
 * Seals the open batch events of batching subscriptions (batch_max > 1) into one
 * price.changed.batch message each: when batch_max of them are open, or the oldest was committed
 * batch_window_ms ago. The message id is derived from the events it carries (messageId), so a
 * seal that ran twice (a crash between its COMMIT and anything else) makes no second message, and
 * each subscription is sealed under an advisory lock, so two notifiers never split one batch.
 * A batch message counts as one against its key's daily limit (messages.ts); one past the limit is
 * not stored, and its events are deleted and counted as dropped.
 *
 *   idle ──(wake: a batch committed events, or POLL_MS)──▶ sealing ──▶ idle
 *     └──(PostgreSQL away)──▶ backoff ──▶ idle            any ──stop()──▶ stopped
 */
import { Backoff, type Logger } from '@skinprices/runtime';
import type { Pool, PoolClient } from '@skinprices/store';
import { batchBody, messageId, type WebhookChange } from '@skinprices/webhooks';
import { storeMatches } from './messages.js';
import type { NotifierMetrics } from './metrics.js';
import type { ActiveSubscription } from './subscriptions.js';
import { Wakeable } from './wake.js';

export type SealerState = 'idle' | 'sealing' | 'backoff' | 'stopped';

/** Whether a subscription's open events make a batch now. Pure. */
export function shouldSeal(
  open: { count: number; oldest: number },
  sub: { batchMax: number; batchWindowMs: number },
  now: number,
): boolean {
  return open.count > 0 && (open.count >= sub.batchMax || now - open.oldest >= sub.batchWindowMs);
}

export class Sealer {
  state: SealerState = 'idle';
  private readonly stopCtl = new AbortController();
  private readonly waker = new Wakeable();
  private loop: Promise<void> | undefined;
  private readonly sealedListeners = new Set<(messages: number) => void>();

  constructor(
    private readonly options: { pollMs: number },
    private readonly deps: {
      pool: Pool;
      logger: Logger;
      subscriptions: { get(id: string): ActiveSubscription | undefined };
      metrics?: NotifierMetrics;
    },
  ) {}

  /** Hears every seal round that made messages. */
  onSealed(listener: (messages: number) => void): void {
    this.sealedListeners.add(listener);
  }

  start(): void {
    this.loop = this.run();
  }

  wake(): void {
    this.waker.wake();
  }

  async stop(): Promise<void> {
    this.stopCtl.abort();
    await this.loop;
    this.state = 'stopped';
  }

  private async run(): Promise<void> {
    const { signal } = this.stopCtl;
    const backoff = new Backoff({ baseMs: 250, maxMs: 10_000 });
    while (!signal.aborted) {
      try {
        this.state = 'sealing';
        const made = await this.sealDue();
        if (made > 0) for (const l of this.sealedListeners) l(made);
        backoff.reset();
        this.state = 'idle';
        await this.waker.wait(this.options.pollMs, signal);
      } catch (err) {
        if (signal.aborted) break;
        this.state = 'backoff';
        this.deps.logger.warn({ err }, 'sealing batches failed; backing off');
        await this.waker.wait(backoff.next(), signal);
      }
    }
  }

  /** Seals every due batch of every served subscription; returns the messages made. */
  async sealDue(now = Date.now()): Promise<number> {
    const { rows } = await this.deps.pool.query<{ subscription_id: string; n: number; oldest: Date }>(
      `SELECT subscription_id, count(*)::int AS n, min(committed_at) AS oldest
       FROM webhook_batch_events WHERE message_id IS NULL GROUP BY subscription_id`,
    );
    let made = 0;
    for (const row of rows) {
      // Not served (disabled, its key's plan lowered): its events wait, as its messages do.
      const sub = this.deps.subscriptions.get(row.subscription_id);
      if (!sub || !shouldSeal({ count: row.n, oldest: row.oldest.getTime() }, sub, now)) continue;
      const client = await this.deps.pool.connect();
      try {
        // Full batches one after another; a last partial one only if its window passed.
        for (let more = true; more && !this.stopCtl.signal.aborted;) {
          const sealed = await this.sealOne(client, sub, now);
          made += sealed.made;
          more = sealed.full;
        }
      } finally {
        client.release();
      }
    }
    return made;
  }

  /** One batch of `sub`, in its own transaction. `full`: it took batch_max events (more may be open). */
  private async sealOne(
    client: PoolClient,
    sub: ActiveSubscription,
    now: number,
  ): Promise<{ made: number; full: boolean }> {
    try {
      await client.query('BEGIN');
      const { rows: lock } = await client.query<{ ok: boolean }>(
        `SELECT pg_try_advisory_xact_lock(hashtext('skinprices_webhooks_seal'), hashtext(current_schema() || '.' || $1)) AS ok`,
        [sub.id],
      );
      if (!lock[0]?.ok) {
        await client.query('ROLLBACK');
        return { made: 0, full: false };
      }
      const { rows } = await client.query<{ event_id: string; change: WebhookChange; committed_at: Date }>(
        `SELECT event_id, change, committed_at FROM webhook_batch_events
         WHERE subscription_id = $1 AND message_id IS NULL ORDER BY committed_at, event_id LIMIT $2`,
        [sub.id, sub.batchMax],
      );
      const oldest = rows[0]?.committed_at.getTime() ?? now;
      if (!shouldSeal({ count: rows.length, oldest }, sub, now)) {
        await client.query('ROLLBACK');
        return { made: 0, full: false };
      }
      const ids = rows.map((r) => r.event_id);
      const id = messageId(sub.id, ids);
      const stored = await storeMatches(client, [
        {
          id,
          subscriptionId: sub.id,
          keyId: sub.keyId,
          plan: sub.plan,
          type: 'price.changed.batch',
          body: batchBody(
            rows.map((r) => r.change),
            new Date(now),
          ),
          eventCount: rows.length,
          committedAt: oldest,
        },
      ]);
      // Sealed into the message, or dropped with it (the day's limit): no longer open either way.
      await client.query(
        stored.dropped > 0
          ? 'DELETE FROM webhook_batch_events WHERE subscription_id = $1 AND event_id = ANY($2::text[])'
          : 'UPDATE webhook_batch_events SET message_id = $3 WHERE subscription_id = $1 AND event_id = ANY($2::text[])',
        stored.dropped > 0 ? [sub.id, ids] : [sub.id, ids, id],
      );
      await client.query('COMMIT');
      this.deps.metrics?.messages.inc({ outcome: 'created' }, stored.created);
      this.deps.metrics?.messages.inc({ outcome: 'dropped' }, stored.dropped);
      return { made: stored.created, full: rows.length >= sub.batchMax };
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }
}

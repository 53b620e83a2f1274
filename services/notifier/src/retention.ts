/*
 * The delivery log's retention: finished messages (succeeded, failed) older than the retention
 * are deleted, with the batch events they sealed, and daily usage rows of past days. Pending and
 * delivering messages are never deleted: they are work, not log — and a message a customer
 * retries between the slice's choice and its delete is work again: the DELETE re-checks the
 * status on the row it deletes (waiting for, then reading, the retry's committed version), so it
 * survives, and so do its batch events. Deletes go in slices so that a first run over a large log
 * holds no long transaction.
 *
 *   idle ──(every intervalMs)──▶ pruning ──(slices done)──▶ idle
 *                                   └──(PostgreSQL away: logged)──▶ idle
 *   any ──stop()──▶ stopped
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@skinprices/runtime';
import type { Pool } from '@skinprices/store';

export type RetentionState = 'idle' | 'pruning' | 'stopped';

export interface RetentionOptions {
  /** Finished messages older than this are deleted. @default 30 days */
  retentionMs: number;
  /** @default 1 h */
  intervalMs?: number;
  /** Rows deleted per statement. @default 5000 */
  slice?: number;
}

export class Retention {
  state: RetentionState = 'idle';
  private readonly stopCtl = new AbortController();
  private loop: Promise<void> | undefined;

  constructor(
    private readonly options: RetentionOptions,
    private readonly deps: { pool: Pool; logger: Logger },
  ) {}

  start(): void {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.state = 'stopped';
    this.stopCtl.abort();
    await this.loop;
  }

  /** One pass; the number of messages deleted. */
  async prune(): Promise<number> {
    const { pool } = this.deps;
    const slice = this.options.slice ?? 5_000;
    const cutoff = new Date(Date.now() - this.options.retentionMs);
    let total = 0;
    for (;;) {
      if (this.stopCtl.signal.aborted) break;
      const { rows } = await pool.query<{ chosen: number; deleted: number }>(
        `WITH old AS (
           SELECT id FROM webhook_messages
           WHERE status IN ('succeeded', 'failed') AND created_at < $1 LIMIT $2
         ), gone AS (
           DELETE FROM webhook_messages m USING old WHERE m.id = old.id AND m.status IN ('succeeded', 'failed')
           RETURNING m.id
         ), events AS (
           DELETE FROM webhook_batch_events e USING gone WHERE e.message_id = gone.id
         )
         SELECT (SELECT count(*)::int FROM old) AS chosen, (SELECT count(*)::int FROM gone) AS deleted`,
        [cutoff, slice],
      );
      total += rows[0]?.deleted ?? 0;
      if ((rows[0]?.chosen ?? 0) < slice) break;
    }
    await pool.query(`DELETE FROM webhook_daily_usage WHERE day < (now() AT TIME ZONE 'UTC')::date - 7`);
    return total;
  }

  private async run(): Promise<void> {
    const { signal } = this.stopCtl;
    while (!signal.aborted) {
      this.state = 'pruning';
      try {
        const deleted = await this.prune();
        if (deleted > 0) this.deps.logger.info({ deleted }, 'delivery log: finished messages past retention deleted');
      } catch (err) {
        this.deps.logger.warn({ err }, 'delivery log retention failed; trying again at the next interval');
      }
      if (signal.aborted) break;
      this.state = 'idle';
      await sleep(this.options.intervalMs ?? 3_600_000, undefined, { signal }).catch(() => undefined);
    }
    this.state = 'stopped';
  }
}

/*
 * The read model's version as this process knows it: bumped by the materializer's NOTIFY (sent on
 * commit of every batch that changed something), on every (re)connection of the listener, and every
 * `fallbackMs` (5 min) as a last resort. Not more often: each bump rebuilds megabytes of bodies.
 *
 *   connecting ──▶ listening ──(connection lost)──▶ backoff ──▶ connecting      stop() ──▶ stopped
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@skinprices/runtime';
import type { Pool, PoolClient } from '@skinprices/store';

export type VersionState = 'connecting' | 'listening' | 'backoff' | 'stopped';

export class ReadModelVersion {
  state: VersionState = 'connecting';
  private n = 0;
  private client: PoolClient | undefined;
  private readonly stopCtl = new AbortController();
  private loop: Promise<void> | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly schema: string,
    private readonly logger: Logger,
    private readonly fallbackMs = 300_000,
  ) {}

  get value(): number {
    return this.n;
  }

  start(): void {
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    const tick = setInterval(() => this.n++, this.fallbackMs);
    try {
      while (!this.stopCtl.signal.aborted) {
        try {
          this.state = 'connecting';
          this.client = await this.pool.connect();
          const lost = new Promise<void>((resolve) => {
            this.client?.once('error', () => resolve());
            this.client?.once('end', () => resolve());
            this.stopCtl.signal.addEventListener('abort', () => resolve(), { once: true });
          });
          this.client.on('notification', (msg) => {
            if (msg.payload === this.schema) this.n++;
          });
          await this.client.query('LISTEN skinprices_readmodel');
          this.n++; // anything may have changed while we were not listening
          this.state = 'listening';
          await lost;
        } catch (err) {
          if (!this.stopCtl.signal.aborted) this.logger.warn({ err }, 'read-model notifications lost; reconnecting');
        } finally {
          this.client?.release(true);
          this.client = undefined;
        }
        if (this.stopCtl.signal.aborted) break;
        this.state = 'backoff';
        await sleep(1_000, undefined, { signal: this.stopCtl.signal }).catch(() => undefined);
      }
    } finally {
      clearInterval(tick);
    }
  }

  async stop(): Promise<void> {
    this.stopCtl.abort();
    await this.loop;
    this.state = 'stopped';
  }
}

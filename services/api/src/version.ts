/*
 * PostgreSQL notifications this process follows on one connection: the materializer's NOTIFY on
 * commit of every batch that changed the read model (bumps the read-model version, which rebuilds
 * cached bodies), and the key table's trigger (reloads the key snapshot). On every (re)connection
 * each subscription fires once, since anything may have changed while nobody listened.
 *
 *   connecting ──▶ listening ──(connection lost)──▶ backoff ──▶ connecting      stop() ──▶ stopped
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@skinprices/runtime';
import type { Pool, PoolClient } from '@skinprices/store';

export type ListenerState = 'connecting' | 'listening' | 'backoff' | 'stopped';

export interface Subscription {
  channel: string;
  /** Only notifications with this payload count (the schema: tests share one database). */
  payload: string;
  onNotify: () => void;
}

export class PgNotifications {
  state: ListenerState = 'connecting';
  private client: PoolClient | undefined;
  private readonly stopCtl = new AbortController();
  private loop: Promise<void> | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly subscriptions: readonly Subscription[],
    private readonly logger: Logger,
    /** Called with true once listening, false when the connection is lost. */
    private readonly onListening: (listening: boolean) => void = () => undefined,
  ) {}

  start(): void {
    this.loop = this.run();
  }

  private async run(): Promise<void> {
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
          for (const s of this.subscriptions) if (s.channel === msg.channel && s.payload === msg.payload) s.onNotify();
        });
        for (const channel of new Set(this.subscriptions.map((s) => s.channel)))
          await this.client.query(`LISTEN ${channel}`);
        for (const s of this.subscriptions) s.onNotify();
        this.state = 'listening';
        this.onListening(true);
        await lost;
      } catch (err) {
        if (!this.stopCtl.signal.aborted) this.logger.warn({ err }, 'PostgreSQL notifications lost; reconnecting');
      } finally {
        this.onListening(false);
        this.client?.release(true);
        this.client = undefined;
      }
      if (this.stopCtl.signal.aborted) break;
      this.state = 'backoff';
      await sleep(1_000, undefined, { signal: this.stopCtl.signal }).catch(() => undefined);
    }
  }

  async stop(): Promise<void> {
    this.stopCtl.abort();
    await this.loop;
    this.state = 'stopped';
  }
}

/**
 * The read model's version as this process knows it: bumped by the materializer's NOTIFY, on every
 * (re)connection of the listener, and every `fallbackMs` (5 min) as a last resort. Not more often:
 * each bump rebuilds megabytes of bodies.
 */
export class ReadModelVersion {
  private n = 0;
  private readonly tick: NodeJS.Timeout;

  constructor(fallbackMs = 300_000) {
    this.tick = setInterval(() => this.n++, fallbackMs);
    this.tick.unref();
  }

  get value(): number {
    return this.n;
  }

  bump(): void {
    this.n++;
  }

  stop(): void {
    clearInterval(this.tick);
  }
}

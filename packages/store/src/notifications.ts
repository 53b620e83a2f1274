/*
 * PostgreSQL notifications a process follows on one connection of its own: each subscription names
 * a channel and the payload (a schema: tests and deployments share one database) it listens for.
 * Every notification is a hint: what listens also polls. On every (re)connection each subscription
 * fires once, since anything may have changed while nobody listened. The API follows the
 * materializer's commits, its change log and the key table; the notifier the webhook
 * subscriptions, the key table and the deliveries made due.
 *
 *   connecting ──▶ listening ──(connection lost)──▶ backoff ──▶ connecting      stop() ──▶ stopped
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Backoff, type Logger } from '@skinprices/runtime';
import type { Pool, PoolClient } from './pool.js';

export type ListenerState = 'connecting' | 'listening' | 'backoff' | 'stopped';

export interface NotificationSubscription {
  channel: string;
  /**
   * Only notifications whose payload is this (the schema: tests share one database), optionally
   * followed by a tab and comma-separated tags saying what the commit touched.
   */
  payload: string;
  /** `tags` undefined: anything may have changed (an untagged notification, or a reconnection). */
  onNotify: (tags?: readonly string[]) => void;
}

/** Splits `schema\ttag,tag` (tags optional). */
export function parsePayload(payload: string): { schema: string; tags?: string[] } {
  const tab = payload.indexOf('\t');
  if (tab < 0) return { schema: payload };
  return {
    schema: payload.slice(0, tab),
    tags: payload
      .slice(tab + 1)
      .split(',')
      .filter(Boolean),
  };
}

export class PgNotifications {
  state: ListenerState = 'connecting';
  private client: PoolClient | undefined;
  private readonly stopCtl = new AbortController();
  private loop: Promise<void> | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly subscriptions: readonly NotificationSubscription[],
    private readonly logger: Logger,
    /** Called with true once listening, false when the connection is lost. */
    private readonly onListening: (listening: boolean) => void = () => undefined,
  ) {}

  start(): void {
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    // Reconnects wait longer while PostgreSQL stays away (every API process reconnects at once
    // after a restart; the jitter spreads them); a session that reached `listening` starts over.
    const backoff = new Backoff({ baseMs: 500, maxMs: 10_000 });
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
          const { schema, tags } = parsePayload(msg.payload ?? '');
          for (const s of this.subscriptions) if (s.channel === msg.channel && s.payload === schema) s.onNotify(tags);
        });
        for (const channel of new Set(this.subscriptions.map((s) => s.channel)))
          await this.client.query(`LISTEN ${channel}`);
        for (const s of this.subscriptions) s.onNotify();
        this.state = 'listening';
        backoff.reset();
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
      await sleep(backoff.next(), undefined, { signal: this.stopCtl.signal }).catch(() => undefined);
    }
  }

  async stop(): Promise<void> {
    this.stopCtl.abort();
    await this.loop;
    this.state = 'stopped';
  }
}

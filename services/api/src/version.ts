/*
 * PostgreSQL notifications this process follows on one connection: the materializer's NOTIFY on
 * commit of every transaction that changed the read model (wakes the change follower, which reads
 * what moved from the change journal), its change log's (wakes change streams), and the key
 * table's trigger (reloads the key snapshot). Every one is a hint: the follower and the streams
 * poll, the keys are reloaded every few seconds without it. On every (re)connection each
 * subscription fires once, since anything may have changed while nobody listened.
 *
 *   connecting ──▶ listening ──(connection lost)──▶ backoff ──▶ connecting      stop() ──▶ stopped
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Backoff, type Logger } from '@skinprices/runtime';
import type { Pool, PoolClient } from '@skinprices/store';

export type ListenerState = 'connecting' | 'listening' | 'backoff' | 'stopped';

export interface Subscription {
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
    private readonly subscriptions: readonly Subscription[],
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

/**
 * The read model's version as this process knows it, per tag (`listing:cn-a`, `buyorder:cn-b`, …:
 * what materializer commits touched, as the change follower reads them from the change journal:
 * changes/follower.ts) plus a global part bumped when anything may have changed (bumpAll: the
 * follower's first read, a journal that no longer reaches back to its position), and every
 * `fallbackMs` (5 min) as a last resort. A body depends on some tags; it is rebuilt only when one
 * of them (or the global part) moved, so a batch of one marketplace does not rebuild the megabytes
 * of all the others.
 *
 * `derived` (what every applied cycle marker recomputes: statistics, liquidity, market cap, the
 * clock; rows of every list, slowly moving) is counted apart (`derived()`): caches let it lag by
 * seconds (VersionedCache's derived age), because a derive transaction commits every few seconds
 * under load, and rebuilding every list each time (33k rows: about a CPU-second each) would keep
 * the API saturated and price changes waiting behind the rebuilds. The rows a marker removed come
 * with their own tags, so removals are as prompt as ingest's changes.
 * `scores` (the recomputation that writes liquidity scores) is counted apart again (`scores()`).
 */
export class ReadModelVersion {
  private global = 0;
  private readonly tags = new Map<string, number>();
  private all = 0;
  private scoresCount = 0;
  private derivedCount = 0;
  private resetCount = 0;
  private readonly tick: NodeJS.Timeout;
  private readonly listeners: (() => void)[] = [];

  constructor(fallbackMs = 300_000) {
    // The fallback moves everything but is not a reset: nothing said rows may have gone.
    this.tick = setInterval(() => {
      this.all++;
      this.global++;
      this.moved();
    }, fallbackMs);
    this.tick.unref();
  }

  /** `listener` is called after every move of any part (caches that refresh ahead of requests). */
  onBump(listener: () => void): void {
    this.listeners.push(listener);
  }

  private moved(): void {
    for (const l of this.listeners) l();
  }

  /**
   * A number that changes whenever anything `deps` names (or the global part) changed; without
   * `deps`, whenever anything changed. Sums of counters that only grow: equal means unchanged.
   */
  value(deps?: readonly string[]): number {
    if (!deps) return this.all;
    let v = this.global;
    for (const t of deps) v += this.tags.get(t) ?? 0;
    return v;
  }

  /**
   * Untagged bumps: anything may have changed, so a patched list body must be rebuilt (the change
   * follower uses bumpAll: the lists follow positions of their own). The 5-minute
   * fallback is not one: a patch reads every committed change whether notified or not, and
   * counting it here would rebuild every list at once every five minutes (thirteen 33k-row lists,
   * about a CPU-second each, on one event loop: seconds during which no price change is served).
   */
  resets(): number {
    return this.resetCount;
  }

  /** How often derived values moved (see the class comment). */
  derived(): number {
    return this.derivedCount;
  }

  /**
   * How often liquidity scores moved (`scores`: the derive path's recomputation, which also sends
   * `derived`): lists read their scores only after this moved (list-reads.ts LiquidityLag). The
   * markers' transaction moves `derived` alone, before the scores it queues are computed.
   */
  scores(): number {
    return this.scoresCount;
  }

  /**
   * Anything may have changed, but nothing behind the patched lists' own positions (the change
   * follower's first read, or a journal that no longer reaches back to it): every value is looked
   * at again, the lists through their positions, so this is no reset.
   */
  bumpAll(): void {
    this.all++;
    this.global++;
    this.derivedCount++;
    this.scoresCount++;
    this.moved();
  }

  /** A commit touched `tags` (undefined: possibly everything; `derived`: the derived values). */
  bump(tags?: readonly string[]): void {
    if (!tags) {
      this.all++;
      this.global++;
      this.resetCount++;
    } else {
      for (const t of tags) {
        if (t === 'derived') this.derivedCount++;
        else if (t === 'scores') this.scoresCount++;
        else this.tags.set(t, (this.tags.get(t) ?? 0) + 1);
      }
      if (tags.some((t) => t !== 'derived' && t !== 'scores')) this.all++;
    }
    this.moved();
  }

  stop(): void {
    clearInterval(this.tick);
  }
}

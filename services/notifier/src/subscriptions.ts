/*
 * The subscriptions the notifier serves, in memory: every active subscription whose API key may
 * have webhooks now (enabled, unexpired, on a plan with WEBHOOK_LIMITS), with its filters parsed
 * and its secrets opened. Reloaded every `refreshMs` and at once on NOTIFY `skinprices_webhooks`
 * (the API, on every subscription write; payload: the webhooks schema) or `skinprices_keys` (the
 * keys table's trigger; payload: the keys schema). A notification is a hint: the timer alone keeps
 * it right within `refreshMs`, and every (re)connection of the listener reloads, since anything
 * may have changed while nobody listened. A subscription made since the last load is the one
 * change a hint missed cannot wait for (its first changes would be matched without it and the
 * offset moved past them): the consumer asks the database about those before each batch
 * (`loadedAsOf`, consumer.ts).
 *
 * The same connection LISTENs on `skinprices_webhook_due` (the API's test deliveries and retries:
 * messages made due; payload: the webhooks schema), which reloads nothing and only tells onDue's
 * listeners (the dispatcher) to look for due messages. The connection and its reconnections are
 * @skinprices/store's PgNotifications, as the API's.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Backoff, type Logger } from '@skinprices/runtime';
import { ident, PgNotifications, type Pool } from '@skinprices/store';
import {
  filtersSchema,
  SecretBox,
  WEBHOOK_DUE_CHANNEL,
  WEBHOOK_LIMITS,
  WEBHOOKS_CHANNEL,
  type Filters,
} from '@skinprices/webhooks';

/** The API keys' trigger's channel (payload: the keys schema). */
export const KEYS_CHANNEL = 'skinprices_keys';

/**
 * How far a transaction's start (what now() — created_at, the change's changed_at — records) may
 * lie before its commit: the API's and the materializer's transactions take milliseconds, a
 * minute is far beyond them. A change committed after a subscription's creation may carry a
 * changed_at this much before the subscription's created_at (consumer.ts), and a subscription
 * committed after a load may carry a created_at this much before the load's now().
 */
export const CREATED_AT_MARGIN_MS = 60_000;

/**
 * Where a load stood in the database: its now(), as PostgreSQL's text (microseconds kept), and the
 * ids of every subscription (served or not) it saw created in the CREATED_AT_MARGIN_MS before. A
 * subscription created after `at` - margin and not among `recentIds` was not seen by the load.
 */
export interface LoadMark {
  at: string;
  recentIds: readonly string[];
}

export type WebhookPlan = keyof typeof WEBHOOK_LIMITS;
const PLANS = Object.keys(WEBHOOK_LIMITS) as WebhookPlan[];

export interface ActiveSubscription {
  id: string;
  /** api_keys.id, as text (bigint). */
  keyId: string;
  plan: WebhookPlan;
  url: string;
  filters: Filters;
  batchMax: number;
  batchWindowMs: number;
  /** When it was created (epoch ms): changes committed before it are not its own. */
  createdAt: number;
  secret: string;
  /** The secret before the last rotation and until when it still signs (epoch ms). */
  previous?: { secret: string; until: number };
}

/** The secrets that sign a delivery made at `now`: the current one, and the previous during the overlap. */
export function signingSecrets(s: ActiveSubscription, now: number): string[] {
  return s.previous && s.previous.until > now ? [s.secret, s.previous.secret] : [s.secret];
}

interface SubscriptionRow {
  as_of: string;
  recent_ids: string[];
  /** null for the one row of an empty load. */
  id: string | null;
  key_id: string;
  plan: WebhookPlan;
  url: string;
  filters: unknown;
  batch_max: number;
  batch_window_ms: number;
  secret_sealed: string;
  previous_secret_sealed: string | null;
  previous_secret_until: Date | null;
  created_at: Date;
}

export interface SubscriptionsOptions {
  webhooksSchema: string;
  keysSchema: string;
  /** The operators' key ring that opens the sealed secrets. */
  secretKeys: string;
  /** @default 5000 */
  refreshMs?: number;
}

export class Subscriptions {
  private all: readonly ActiveSubscription[] = [];
  private byId = new Map<string, ActiveSubscription>();
  /** When the last reload succeeded (epoch ms); 0: never. */
  loadedAt = 0;
  /** The last load's mark in the database's time; undefined: never loaded. */
  loadedAsOf: LoadMark | undefined;
  private readonly box: SecretBox;
  private readonly stopCtl = new AbortController();
  private refresh: Promise<void> | undefined;
  private readonly notifications: PgNotifications;
  private reloading: Promise<void> | undefined;
  private again = false;
  private readonly changeListeners = new Set<() => void>();
  private readonly dueListeners = new Set<() => void>();

  constructor(
    private readonly options: SubscriptionsOptions,
    private readonly deps: { pool: Pool; logger: Logger },
  ) {
    this.box = new SecretBox(options.secretKeys);
    const reload = () => void this.reload().catch(() => undefined);
    this.notifications = new PgNotifications(
      deps.pool,
      [
        { channel: WEBHOOKS_CHANNEL, payload: options.webhooksSchema, onNotify: reload },
        { channel: KEYS_CHANNEL, payload: options.keysSchema, onNotify: reload },
        { channel: WEBHOOK_DUE_CHANNEL, payload: options.webhooksSchema, onNotify: () => this.due() },
      ],
      deps.logger,
    );
  }

  private due(): void {
    for (const l of this.dueListeners) l();
  }

  get list(): readonly ActiveSubscription[] {
    return this.all;
  }

  get(id: string): ActiveSubscription | undefined {
    return this.byId.get(id);
  }

  /** Hears every reload that may have changed something (a NOTIFY, a reconnection, the timer). */
  onChange(listener: () => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  /** Hears every NOTIFY on WEBHOOK_DUE_CHANNEL for our schema (messages made due by the API). */
  onDue(listener: () => void): () => void {
    this.dueListeners.add(listener);
    return () => this.dueListeners.delete(listener);
  }

  /**
   * Loads once, then keeps reloading and listening until stop(). The first load is retried until
   * it succeeds (or stop()): the keys schema is the API's, and the API may not have migrated it yet
   * when the notifier starts (`make run` starts them together).
   */
  async start(): Promise<void> {
    const { signal } = this.stopCtl;
    const backoff = new Backoff({ baseMs: 500, maxMs: 10_000 });
    while (!signal.aborted) {
      try {
        await this.reload();
        break;
      } catch (err) {
        if (backoff.attempts % 10 === 0)
          this.deps.logger.warn({ err, attempts: backoff.attempts + 1 }, 'subscriptions not loaded yet; retrying');
        await sleep(backoff.next(), undefined, { signal }).catch(() => undefined);
      }
    }
    if (signal.aborted) return;
    this.refresh = this.refreshLoop();
    this.notifications.start();
  }

  async stop(): Promise<void> {
    this.stopCtl.abort();
    await Promise.all([this.refresh, this.notifications.stop()]);
    await this.reloading?.catch(() => undefined);
  }

  /** Reloads now; a reload asked for while one runs runs once more after it (it may miss the change). */
  reload(): Promise<void> {
    if (this.reloading) {
      this.again = true;
      return this.reloading;
    }
    this.reloading = (async () => {
      try {
        do {
          this.again = false;
          await this.load();
        } while (this.again && !this.stopCtl.signal.aborted);
      } finally {
        this.reloading = undefined;
      }
    })();
    return this.reloading;
  }

  private async load(): Promise<void> {
    const keys = `${ident(this.options.keysSchema)}.api_keys`;
    // One statement, so the mark and the list are of one snapshot; the LEFT JOIN keeps the mark's
    // row when nothing is served.
    const { rows } = await this.deps.pool.query<SubscriptionRow>(
      `WITH mark AS (
         SELECT now()::text AS as_of,
                array(SELECT id FROM webhook_subscriptions WHERE created_at > now() - $2 * interval '1 millisecond') AS recent_ids
       )
       SELECT mark.as_of, mark.recent_ids, l.* FROM mark LEFT JOIN (
         SELECT s.id, s.key_id, k.plan, s.url, s.filters, s.batch_max, s.batch_window_ms, s.secret_sealed,
                s.previous_secret_sealed, s.previous_secret_until, s.created_at
         FROM webhook_subscriptions s JOIN ${keys} k ON k.id = s.key_id
         WHERE s.status = 'active' AND NOT k.disabled AND (k.expires_at IS NULL OR k.expires_at > now())
           AND k.plan = ANY($1::text[])
       ) l ON true
       ORDER BY l.id`,
      [PLANS, CREATED_AT_MARGIN_MS],
    );
    const all: ActiveSubscription[] = [];
    for (const row of rows) {
      const s = row.id === null ? undefined : this.parse({ ...row, id: row.id });
      if (s) all.push(s);
    }
    const mark = rows[0];
    this.all = all;
    this.byId = new Map(all.map((s) => [s.id, s]));
    this.loadedAt = Date.now();
    if (mark) this.loadedAsOf = { at: mark.as_of, recentIds: mark.recent_ids };
    for (const l of this.changeListeners) l();
  }

  /** A row as served; undefined (logged) when its filters or secret cannot be used. */
  private parse(row: SubscriptionRow & { id: string }): ActiveSubscription | undefined {
    const filters = filtersSchema.safeParse(row.filters);
    if (!filters.success) {
      // The API validates what it stores; a row that does not parse was written by something else.
      this.deps.logger.error({ subscription: row.id, err: filters.error }, 'subscription filters invalid: not served');
      return undefined;
    }
    try {
      const previous =
        row.previous_secret_sealed && row.previous_secret_until
          ? {
              secret: this.box.open(row.previous_secret_sealed, row.id),
              until: row.previous_secret_until.getTime(),
            }
          : undefined;
      return {
        id: row.id,
        keyId: row.key_id,
        plan: row.plan,
        url: row.url,
        filters: filters.data,
        batchMax: row.batch_max,
        batchWindowMs: row.batch_window_ms,
        createdAt: row.created_at.getTime(),
        secret: this.box.open(row.secret_sealed, row.id),
        ...(previous ? { previous } : {}),
      };
    } catch (err) {
      // A key missing from WEBHOOK_SECRET_KEYS (a ring that dropped a key still in use): nothing
      // could be signed, so nothing is sent until an operator restores the key.
      this.deps.logger.error({ subscription: row.id, err }, 'subscription secret cannot be opened: not served');
      return undefined;
    }
  }

  private async refreshLoop(): Promise<void> {
    const { signal } = this.stopCtl;
    while (!signal.aborted) {
      await sleep(this.options.refreshMs ?? 5_000, undefined, { signal }).catch(() => undefined);
      if (signal.aborted) break;
      await this.reload().catch((err: unknown) =>
        this.deps.logger.warn({ err }, 'subscriptions not reloaded; keeping the last ones'),
      );
    }
  }
}

/*
 * Delivers due messages. Each round claims what may be sent now — pending messages whose
 * next_attempt_at passed, and delivering ones whose lease expired (a notifier that died
 * mid-delivery: the message goes again, with the same webhook-id) — with FOR UPDATE SKIP LOCKED,
 * so notifiers never claim the same message, and leases it for the delivery timeout plus a margin.
 * Each claimed message is delivered on its own (no round waits for a delivery), so a receiver that
 * hangs holds only its own slots: at most `perSubscription` deliveries of one subscription at once
 * (counted over every notifier, from the live leases) and `maxInFlight` of this process in total.
 * The claim takes each subscription's due messages apart (a LATERAL per subscription), so one
 * subscription's backlog never fills a round and starves another's, and skips subscriptions a
 * receiver's Retry-After paused (paused_until).
 *
 * A commit, a seal or a NOTIFY wakes the loop at once; a finished delivery wakes it no sooner than
 * `coalesceMs` after the last claim round began, so that a burst of completions (64 in flight
 * answered within a millisecond) makes one claim round, not one each back to back, while a lone
 * completion after a quiet spell still claims at once.
 *
 *   idle ──(wake: commit, seal, NOTIFY; a delivery done, coalesced; or POLL_MS)──▶ claiming ──▶ idle
 *     └──(PostgreSQL away)──▶ backoff ──▶ idle
 *   any ──stop()──▶ draining (no claims; in-flight deliveries finish, up to the timeout;
 *                   leases still held are given back) ──▶ stopped
 *
 * Each delivery's result is written only while its lease is still the one this process took
 * (lease_until unchanged): a message deleted with its subscription, or claimed again by another
 * notifier after the lease ran out, ignores the late result. What a result does to the message
 * and its subscription is the pure transition of outcome.ts.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Backoff, type Logger } from '@skinprices/runtime';
import type { Pool, PoolClient } from '@skinprices/store';
import { WEBHOOKS_CHANNEL } from '@skinprices/webhooks';
import type { Deliverer } from './deliver.js';
import type { NotifierMetrics } from './metrics.js';
import { next, type AttemptOutcome, type Transition } from './outcome.js';
import { signingSecrets, type ActiveSubscription } from './subscriptions.js';
import { SuccessWriter } from './successes.js';
import { Wakeable } from './wake.js';

export type DispatcherState = 'idle' | 'claiming' | 'backoff' | 'draining' | 'stopped';

export interface DispatcherOptions {
  /** Deliveries this process makes at once. @default 64 */
  maxInFlight: number;
  /** Deliveries to one subscription at once, over every notifier. @default 4 */
  perSubscription: number;
  /** The whole exchange's limit; the lease is this plus LEASE_MARGIN_MS. @default 10000 */
  deliveryTimeoutMs: number;
  /** Looks for due messages this often without a wake-up. @default 250 */
  pollMs: number;
  /**
   * Claim rounds woken by finished deliveries are at least this far apart; completions meanwhile
   * share one round. 0: each wakes the loop at once. @default 5
   */
  coalesceMs?: number;
  /** @default Math.random */
  random?: () => number;
}

/** Beyond the delivery timeout, what a lease leaves for writing the result (and a slow event loop). */
export const LEASE_MARGIN_MS = 5_000;

/** A claimed message, as the claim returns it. */
interface Claimed {
  id: string;
  subscription_id: string;
  type: 'price.changed' | 'price.changed.batch' | 'webhook.test';
  body: string;
  attempts: number;
  committed_at: Date;
  first_attempt_at: Date;
  /** first_attempt_at and last_attempt_at before this claim, to give the claim back uncounted. */
  prev_first_attempt_at: Date | null;
  prev_last_attempt_at: Date | null;
  /** The lease this process holds, exactly as stored (text keeps PostgreSQL's microseconds). */
  lease: string;
}

// The horizon of the retries counts from the message's first attempt; a customer's retry of a
// failed message (the API sets it due and clears first_attempt_at) starts a new horizon.
//
// The cap per subscription: each subscription's live leases (f.n) leave it room for $2 - f.n
// more, taken ONCE over the union of its due pending messages and its expired leases (each branch
// limited too, only so that it stops early on its index). The count is of this statement's
// snapshot: notifiers claiming the same subscription at the same instant do not see each other's
// new leases, so together they may briefly hold up to (notifiers × cap) of it — until those
// deliveries end. Serialising the claims per subscription (an advisory lock per subscription per
// round, in a transaction of its own) would cost three more round trips a claim and a lock-table
// entry per subscription; a few extra concurrent deliveries for the time of one exchange is the
// cheaper bound.
const CLAIM_SQL = `
WITH subs AS (
  SELECT s.id FROM unnest($1::text[]) AS u(id) JOIN webhook_subscriptions s ON s.id = u.id
  WHERE s.status = 'active' AND (s.paused_until IS NULL OR s.paused_until <= now())
),
cand AS (
  SELECT c.id, c.next_attempt_at FROM subs s
  CROSS JOIN LATERAL (
    SELECT count(*)::int AS n FROM webhook_messages d
    WHERE d.subscription_id = s.id AND d.status = 'delivering' AND d.lease_until > now()
  ) f
  CROSS JOIN LATERAL (
    SELECT u.id, u.next_attempt_at FROM (
      (SELECT m.id, m.next_attempt_at FROM webhook_messages m
       WHERE m.subscription_id = s.id AND m.status = 'pending' AND m.next_attempt_at <= now()
       ORDER BY m.next_attempt_at, m.id LIMIT greatest(0, $2 - f.n))
      UNION ALL
      (SELECT m.id, m.next_attempt_at FROM webhook_messages m
       WHERE m.subscription_id = s.id AND m.status = 'delivering' AND m.lease_until <= now()
       ORDER BY m.next_attempt_at, m.id LIMIT greatest(0, $2 - f.n))
    ) u
    ORDER BY u.next_attempt_at, u.id LIMIT greatest(0, $2 - f.n)
  ) c
  ORDER BY c.next_attempt_at LIMIT $3
),
locked AS (
  SELECT m.id, m.first_attempt_at, m.last_attempt_at FROM webhook_messages m
  WHERE m.id IN (SELECT id FROM cand)
    AND ((m.status = 'pending' AND m.next_attempt_at <= now()) OR (m.status = 'delivering' AND m.lease_until <= now()))
  FOR UPDATE SKIP LOCKED
)
UPDATE webhook_messages m
SET status = 'delivering', lease_until = now() + $4 * interval '1 millisecond', attempts = m.attempts + 1,
    last_attempt_at = now(), first_attempt_at = coalesce(m.first_attempt_at, now())
FROM locked WHERE m.id = locked.id
RETURNING m.id, m.subscription_id, m.type, m.body, m.attempts, m.committed_at, m.first_attempt_at,
  locked.first_attempt_at AS prev_first_attempt_at, locked.last_attempt_at AS prev_last_attempt_at,
  m.lease_until::text AS lease`;

/** The lease guard every result's UPDATE carries. */
const OURS = `id = $1 AND status = 'delivering' AND lease_until = $2::timestamptz`;

export class Dispatcher {
  state: DispatcherState = 'idle';
  private readonly inFlight = new Map<string, { lease: string; done: Promise<void> }>();
  private readonly successes: SuccessWriter;
  private readonly stopCtl = new AbortController();
  private readonly waker = new Wakeable();
  /** The pending coalesced wake-up of finished deliveries. */
  private soon: NodeJS.Timeout | undefined;
  /** When the last claim round began (performance.now()). */
  private lastClaimAt = -Infinity;
  private loop: Promise<void> | undefined;
  private readonly deliveredListeners = new Set<(id: string, t: Transition) => void>();

  constructor(
    private readonly options: DispatcherOptions,
    private readonly deps: {
      pool: Pool;
      logger: Logger;
      deliverer: Deliverer;
      subscriptions: {
        readonly list: readonly ActiveSubscription[];
        get(id: string): ActiveSubscription | undefined;
        reload(): Promise<void>;
      };
      metrics?: NotifierMetrics;
    },
  ) {
    this.successes = new SuccessWriter(deps.pool);
  }

  /** Deliveries under way in this process. */
  get inFlightCount(): number {
    return this.inFlight.size;
  }

  /** Hears every recorded attempt (tests, benchmarks). */
  onAttempt(listener: (messageId: string, t: Transition) => void): () => void {
    this.deliveredListeners.add(listener);
    return () => this.deliveredListeners.delete(listener);
  }

  start(): void {
    this.loop = this.run();
  }

  /** Looks for due messages now (a commit made some, a NOTIFY asked for a test or a retry). */
  wake(): void {
    this.waker.wake();
  }

  /**
   * Stops claiming, waits for the deliveries under way (each ends within the delivery timeout),
   * and gives back the leases still held after `graceMs`, so another notifier sends them at once
   * rather than after the lease runs out.
   */
  async stop(graceMs = this.options.deliveryTimeoutMs + 1_000): Promise<void> {
    this.state = 'draining';
    this.stopCtl.abort();
    clearTimeout(this.soon);
    await this.loop;
    const all = Promise.allSettled([...this.inFlight.values()].map((f) => f.done));
    await Promise.race([all, sleep(graceMs, undefined, { ref: false })]);
    await this.releaseLeases();
    this.state = 'stopped';
  }

  private async run(): Promise<void> {
    const { signal } = this.stopCtl;
    const backoff = new Backoff({ baseMs: 250, maxMs: 10_000 });
    while (!signal.aborted) {
      try {
        this.state = 'claiming';
        const room = this.options.maxInFlight - this.inFlight.size;
        const claimed = room > 0 ? await this.claim(room) : [];
        for (const c of claimed) this.launch(c);
        backoff.reset();
        this.state = 'idle';
        // A full round may have left more due: look again at once.
        if (room > 0 && claimed.length === room) continue;
        await this.waker.wait(this.options.pollMs, signal);
      } catch (err) {
        if (signal.aborted) break;
        this.state = 'backoff';
        this.deps.logger.warn({ err }, 'claiming deliveries failed; backing off');
        await this.waker.wait(backoff.next(), signal);
      }
    }
  }

  /** Claims up to `room` due messages of served subscriptions. */
  private async claim(room: number): Promise<Claimed[]> {
    this.lastClaimAt = performance.now();
    const ids = this.deps.subscriptions.list.map((s) => s.id);
    if (ids.length === 0) return [];
    const { rows } = await this.deps.pool.query<Claimed>(CLAIM_SQL, [
      ids,
      this.options.perSubscription,
      room,
      this.options.deliveryTimeoutMs + LEASE_MARGIN_MS,
    ]);
    return rows;
  }

  /** Delivers one claimed message in the background; the loop is woken when it is done. */
  private launch(c: Claimed): void {
    const { logger, metrics } = this.deps;
    const done = this.deliver(c)
      .catch((err: unknown) =>
        // Its lease runs out and it is claimed again: at least once.
        logger.warn({ err, message: c.id }, 'delivery result not recorded; the message is sent again after its lease'),
      )
      .finally(() => {
        this.inFlight.delete(c.id);
        metrics?.inFlight.set(this.inFlight.size);
        this.wakeSoon();
      });
    this.inFlight.set(c.id, { lease: c.lease, done });
    metrics?.inFlight.set(this.inFlight.size);
  }

  /** Wakes the loop for a finished delivery: at once, or `coalesceMs` after the last round began. */
  private wakeSoon(): void {
    const wait = (this.options.coalesceMs ?? 5) - (performance.now() - this.lastClaimAt);
    if (wait <= 0) return this.waker.wake();
    if (this.soon || this.stopCtl.signal.aborted) return;
    this.soon = setTimeout(() => {
      this.soon = undefined;
      this.waker.wake();
    }, wait);
  }

  private async deliver(c: Claimed): Promise<void> {
    const { deliverer, metrics } = this.deps;
    const sub = this.deps.subscriptions.get(c.subscription_id);
    if (!sub) {
      // No longer served since the claim (disabled, its key changed): back to waiting, uncounted —
      // attempts and the attempts' times as before the claim, so that a first attempt made later
      // (say after the subscription is enabled again) starts the retries' horizon then.
      await this.deps.pool.query(
        `UPDATE webhook_messages SET status = 'pending', lease_until = NULL, attempts = attempts - 1,
           first_attempt_at = $3, last_attempt_at = $4
         WHERE ${OURS}`,
        [c.id, c.lease, c.prev_first_attempt_at, c.prev_last_attempt_at],
      );
      return;
    }
    const { outcome, ms } = await deliverer.deliver({
      url: sub.url,
      messageId: c.id,
      body: c.body,
      secrets: signingSecrets(sub, Date.now()),
    });
    metrics?.attemptSeconds.observe(ms / 1000);
    const t = await this.record(c, outcome);
    metrics?.deliveries.inc({ outcome: t ? outcome.kind : 'ignored' });
    if (!t) return;
    if (t.status === 'succeeded') {
      metrics?.messages.inc({ outcome: 'succeeded' });
      metrics?.latency.observe(t.latencyMs / 1000);
    } else if (t.status === 'failed') metrics?.messages.inc({ outcome: 'failed' });
    for (const l of this.deliveredListeners) l(c.id, t);
  }

  /** Writes an attempt's transition; undefined when the result is ignored (deleted, lease lost). */
  private async record(c: Claimed, outcome: AttemptOutcome): Promise<Transition | undefined> {
    const now = Date.now();
    const base = {
      attempts: c.attempts,
      firstAttemptAt: c.first_attempt_at.getTime(),
      committedAt: c.committed_at.getTime(),
      test: c.type === 'webhook.test',
    };
    if (outcome.kind === 'ok') {
      // A success reads nothing of the subscription: it ends the streak (or, a test, leaves it).
      const t = next({ ...base, failingSince: null }, outcome, now, this.random);
      if (t.status !== 'succeeded') return undefined;
      const written = await this.successes.write({
        id: c.id,
        lease: c.lease,
        deliveredAt: t.deliveredAt,
        latencyMs: t.latencyMs,
        statusCode: t.statusCode,
        test: base.test,
      });
      return written ? t : undefined;
    }
    return this.recordFailure(c, outcome, base, now);
  }

  /** A failed attempt: the message's next state and its subscription's streak and pause, in one transaction. */
  private async recordFailure(
    c: Claimed,
    outcome: AttemptOutcome,
    base: { attempts: number; firstAttemptAt: number; committedAt: number; test: boolean },
    now: number,
  ): Promise<Transition | undefined> {
    const client = await this.deps.pool.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query<{ failing_since: Date | null }>(
        'SELECT failing_since FROM webhook_subscriptions WHERE id = $1 FOR NO KEY UPDATE',
        [c.subscription_id],
      );
      const row = rows[0];
      const t = row && next({ ...base, failingSince: row.failing_since?.getTime() ?? null }, outcome, now, this.random);
      if (!t || t.status === 'succeeded') {
        await client.query('ROLLBACK');
        return undefined;
      }
      const updated = await client.query(
        `UPDATE webhook_messages SET status = $3, next_attempt_at = coalesce($4::timestamptz, next_attempt_at),
           lease_until = NULL, last_status_code = $5, last_error = $6
         WHERE ${OURS}`,
        [
          c.id,
          c.lease,
          t.status,
          t.nextAttemptAt === undefined ? null : new Date(t.nextAttemptAt).toISOString(),
          t.statusCode,
          t.error,
        ],
      );
      if (!updated.rowCount) {
        await client.query('ROLLBACK');
        return undefined;
      }
      await this.markFailing(client, c.subscription_id, row.failing_since, t);
      await client.query('COMMIT');
      if (t.disable) await this.disabled(c.subscription_id, t.disable);
      return t;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  private get random(): () => number {
    return this.options.random ?? Math.random;
  }

  /**
   * What a failure does to its subscription: the failing streak started (kept if under way), a
   * Retry-After's pause (only ever lengthened: deliveries in flight together may each answer one),
   * and the disabling once the streak is 24 h long.
   */
  private async markFailing(
    client: PoolClient,
    subscriptionId: string,
    failingSince: Date | null,
    t: Extract<Transition, { status: 'pending' | 'failed' }>,
  ): Promise<void> {
    const starts = failingSince === null ? t.failingSince : undefined;
    if (starts !== undefined || t.pausedUntil !== undefined)
      await client.query(
        `UPDATE webhook_subscriptions
         SET failing_since = coalesce(failing_since, $2::timestamptz), paused_until = greatest(paused_until, $3::timestamptz)
         WHERE id = $1`,
        [
          subscriptionId,
          starts === undefined ? null : new Date(starts).toISOString(),
          t.pausedUntil === undefined ? null : new Date(t.pausedUntil).toISOString(),
        ],
      );
    if (!t.disable) return;
    await client.query(
      `UPDATE webhook_subscriptions SET status = 'disabled', disabled_reason = $2, disabled_at = now(), updated_at = now()
       WHERE id = $1 AND status = 'active'`,
      [subscriptionId, t.disable],
    );
    // Other notifiers (and API caches) hear it at commit.
    await client.query('SELECT pg_notify($1, current_schema())', [WEBHOOKS_CHANNEL]);
  }

  private async disabled(subscriptionId: string, reason: string): Promise<void> {
    this.deps.logger.warn({ subscription: subscriptionId, reason }, 'subscription disabled');
    await this.deps.subscriptions
      .reload()
      .catch((err: unknown) => this.deps.logger.warn({ err }, 'subscriptions not reloaded after disabling one'));
  }

  /** Gives back the leases of deliveries still under way (stop() past its grace). */
  private async releaseLeases(): Promise<void> {
    const held = [...this.inFlight.entries()];
    if (held.length === 0) return;
    await this.deps.pool
      .query(
        `UPDATE webhook_messages m SET status = 'pending', lease_until = NULL, next_attempt_at = now()
         FROM unnest($1::text[], $2::text[]) AS h(id, lease)
         WHERE m.id = h.id AND m.status = 'delivering' AND m.lease_until = h.lease::timestamptz`,
        [held.map(([id]) => id), held.map(([, f]) => f.lease)],
      )
      .catch((err: unknown) =>
        this.deps.logger.warn({ err, messages: held.length }, 'leases not given back; they run out by themselves'),
      );
  }
}

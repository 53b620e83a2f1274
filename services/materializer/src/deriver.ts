/*
 * The derive path: applies stored poll-cycle markers once their data is in (markers.ts) — what a
 * COMPLETE cycle implies (vanished → NULL, or deleted for the kinds whose rows go), freshness, statistics rolled
 * into the new day, the outlier guard's second look, liquidity, the market cap — in transactions
 * of its own, apart from the ingest path's batch transactions (apply.ts).
 *
 * Why apart: the ingest transaction holds the partition's offset row and, on its commit, makes a
 * price visible. Markers applied inside it would make one batch that finds markers ready carry
 * every derived recomputation (liquidity over the whole catalogue, hours of market cap, the
 * retention DROP that locks listing_hourly), and every price behind it in the partition would wait
 * for them. So a batch commits what it read and nothing else; this loop catches up behind it.
 *
 * Each round is up to three transactions: the markers' (what a COMPLETE cycle implies,
 * statistics, freshness, the clock — row locks on listings_current that ingest batches wait for)
 * commits first and queues the outlier guard's second look (judge_pending, migration 0017) and
 * the recomputation (derive_pending, migration 0014); the second judges again the rows of the
 * items the listings cycles wrote; the third recomputes liquidity and the market cap, writing no
 * table ingest writes. (In one transaction with the recomputation, the markers' row locks would be
 * held through it, tens of seconds under load; with the second look in the markers' transaction,
 * a cold start's statuses would wait seconds a clump for it.)
 *
 * The second look waits while listings are on their way in (judgeGate); the recomputation
 * waits while ingest is far behind (BACKLOG_DEFERS) and is paced (RECOMPUTE_COST_FACTOR): a
 * round in their pause applies markers only.
 *
 *   idle ──poke()/tick──▶ deriving ──nothing ready / lock held elsewhere──▶ idle
 *                           │  ▲
 *                           └──┘ markers applied: look again (more may have become ready)
 *   any ──stop()──▶ stopping (waits for the running transaction) ──▶ stopped
 *
 * One deriver at a time per schema: a transaction-scoped advisory lock (PostgreSQL's, taken with
 * try) — a second materializer process of the same group skips its turn instead of queueing, and
 * its timer tries again. A failed transaction (deadlock with an ingest batch, PostgreSQL away)
 * rolls back whole, so a marker is applied once or not at all, and is retried on the next tick.
 *
 * Replay determinism: what a marker does reads the tables after its data (it is ready only then)
 * and the read model's clock, which only moves forward; the last recomputation of anything sees
 * all the data at the same clock in a replay as live (markers.ts, recomputeDerived).
 *
 * Retention (dropping day partitions of listing_hourly past the window) runs in a short
 * transaction of its own after the others, with a lock timeout: the DROP needs an exclusive
 * lock on listing_hourly, which every ingest batch writes, and must never hold them up.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Backoff, type Logger } from '@skinprices/runtime';
import type { Pool, PoolClient } from '@skinprices/store';
import { dropOldHourPartitions, type LiquidityRefresh } from './derived.js';
import { applyReadyMarkers, judgePending, judgeQueue, recomputeDerived } from './markers.js';
import { judgeGate, MAX_RECOMPUTE_PAUSE_MS, RECOMPUTE_COST_FACTOR, recomputeGate } from './derive-gates.js';
import { noteReadChanges } from './read-changes.js';

export type DeriverState = 'idle' | 'deriving' | 'stopping' | 'stopped';

export interface DeriverOptions {
  groupId: string;
  /** Write outbox rows for committed changes (vanished listings). @default true */
  outbox?: boolean;
  hourlyRetentionDays: number;
  /**
   * Look for ready markers this often even without a poke (a marker made ready by another
   * process's batch, a transaction that failed). @default 1000
   */
  intervalMs?: number;
  /**
   * After a recomputation that took T, the next starts no sooner than this many times T later
   * (RECOMPUTE_COST_FACTOR): a cold start's, a FULL cycle's or a day's roll-over reads most of
   * the catalogue (liquidity recomputes the items whose inputs moved, derived.ts).
   * @default 2
   */
  recomputeCostFactor?: number;
  /**
   * Records the ingest path has yet to read (materializer.ts: what its partitions' last batches
   * left unread); past BACKLOG_DEFERS, a due recomputation waits (see there).
   * @default none: never
   */
  backlog?: () => number;
  /** The part of `backlog` on listings.v1: the second look waits while it is large (judgeGate). @default none */
  listingsBacklog?: () => number;
}

/** The derive path's transactions: applying markers, judging again and recomputing what they queued. */
export type DeriveStep = 'markers' | 'judge' | 'recompute';

/** What a listener hears after each derive transaction that did something. */
export interface DeriveReport {
  step: DeriveStep;
  /** The markers applied (step `markers`). */
  markers: string[];
  /** Wall time of the transaction, in ms. */
  ms: number;
  /** What the liquidity refresh did (step `recompute`, once the read model has a clock). */
  liquidity?: LiquidityRefresh;
}

/** The advisory lock key of a schema's derive path (one deriver at a time). */
const DERIVE_LOCK = `hashtext('skinprices-derive:' || current_schema())`;

export class Deriver {
  state: DeriverState = 'idle';
  private poked = false;
  private running: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly listeners = new Set<(r: DeriveReport) => void>();
  /** Failed derive transactions in a row: a short pause each, so a persistent failure does not spin. */
  private readonly failures = new Backoff({ baseMs: 200, maxMs: 5_000 });
  /** The same for the second look, whose failures are caught (judge): not before this (performance.now()). */
  private readonly judgeFailures = new Backoff({ baseMs: 500, maxMs: 30_000 });
  private judgeRetryAt = 0;
  /** When the next recomputation may start (performance.now()): see RECOMPUTE_COST_FACTOR. */
  private recomputeDueAt = 0;
  /**
   * When this process's markers first queued work that no recomputation of this process has
   * taken since (performance.now()): see BACKLOG_DEFERS.
   */
  private queuedSince: number | undefined;

  constructor(
    private readonly options: DeriverOptions,
    private readonly deps: { pool: Pool; logger: Pick<Logger, 'warn' | 'info' | 'error'> },
  ) {}

  onDerive(listener: (r: DeriveReport) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  start(): void {
    const every = this.options.intervalMs ?? 1_000;
    this.timer = setInterval(() => this.poke(), every);
    this.timer.unref();
    this.poke();
  }

  /** Something may have become ready (a batch committed): derive now, or right after the current run. */
  poke(): void {
    if (this.state === 'stopping' || this.state === 'stopped') return;
    this.poked = true;
    if (this.state === 'idle') this.running = this.loop();
  }

  /**
   * Derives until nothing is ready (replays and tests: every marker whose data is in is applied
   * when this resolves). Takes the lock with a wait, not a try, so a concurrent deriver cannot
   * make it return early.
   */
  async settle(): Promise<void> {
    await this.running;
    for (;;) {
      const applied = await this.deriveOnce(true);
      if (applied === 0) return;
    }
  }

  async stop(): Promise<void> {
    this.state = 'stopping';
    if (this.timer) clearInterval(this.timer);
    await this.running;
    this.state = 'stopped';
  }

  private async loop(): Promise<void> {
    this.state = 'deriving';
    try {
      while (this.poked && this.state === 'deriving') {
        this.poked = false;
        try {
          // Markers applied: others may have become ready meanwhile, look again at once.
          while ((await this.deriveOnce(false)) > 0 && this.state === 'deriving');
          this.failures.reset();
        } catch (err) {
          const wait = this.failures.next();
          this.deps.logger.warn({ err, failures: this.failures.attempts }, 'derive transaction failed; retrying');
          // The timer pokes again; a short pause keeps a persistent failure from spinning.
          await sleep(wait);
        }
      }
    } finally {
      if (this.state === 'deriving') this.state = 'idle';
    }
  }

  /**
   * ANALYZE the tables the markers' and the merge's joins plan over once they have doubled since
   * their last statistics. A cold start fills listings_current from empty within a minute,
   * before autovacuum's next look: planned on the empty table's statistics, the markers' joins
   * over the whole catalogue run as nested loops over sequential scans and take minutes instead of
   * seconds. ANALYZE samples (a fraction of a second a table) and takes no lock writers wait for;
   * doubling bounds it to a few runs while a table grows, and autovacuum keeps them after that.
   */
  private async analyzeGrown(client: PoolClient): Promise<void> {
    const { rows } = await client.query<{ name: string }>(
      `SELECT s.relname AS name FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
       WHERE s.schemaname = current_schema() AND s.relname IN ('listings_current', 'listing_daily', 'item_markets')
         AND s.n_mod_since_analyze > 1000 + greatest(c.reltuples, 0)`,
    );
    // SKIP_LOCKED: a table autovacuum is analyzing or vacuuming at cost limits is left to it
    // (the next round looks again) rather than waited for with the markers behind.
    for (const { name } of rows) await client.query(`ANALYZE (SKIP_LOCKED) ${name}`);
  }

  /**
   * One round of the derive path: the markers' transaction, then the second look's and the
   * recomputation's; returns how many markers it applied plus 1 for each of the other two that ran
   * (0: nothing to do, or locked elsewhere).
   */
  private async deriveOnce(wait: boolean): Promise<number> {
    const client = await this.deps.pool.connect();
    try {
      await this.analyzeGrown(client);
      let queue: Awaited<ReturnType<typeof judgeQueue>>;
      const { done: markers } = await this.locked(client, wait, 'markers', async () => {
        const touched = new Set<string>();
        const applied = await applyReadyMarkers(client, this.options.groupId, {
          outbox: this.options.outbox ?? true,
          logger: this.deps.logger,
          touched,
        });
        // Readers hear of it when, and only if, it commits: `derived` for the statistics and the
        // clock (every list, slowly moving), and the tags of what the markers removed (listing
        // rows by their keys: read-changes.ts).
        if (applied.length > 0) await noteReadChanges(client, ['derived', ...touched]);
        // Queued by these markers or by any before them (another member's, a restart's): its
        // deferral counts from the oldest row's queued_at, whoever queued it.
        queue = await judgeQueue(client);
        return { done: applied };
      });
      const now = performance.now();
      if (markers.length > 0) this.queuedSince ??= now;
      // Both in transactions of their own, after the markers' has released its row locks; the
      // second look holds row locks only while it writes, the recomputation none ingest waits for.
      const judged =
        queue !== undefined &&
        (wait || judgeGate(queue.waitedMs, this.options.listingsBacklog?.() ?? 0, queue.listingsPending))
          ? await this.judge(client, wait)
          : [];
      // Paced unless settling (the 1 s timer pokes again, and finds it due).
      const recomputed = wait || this.recomputeDue() ? await this.recompute(client, wait) : [];
      if (markers.length > 0) await this.retain(client);
      return markers.length + judged.length + recomputed.length;
    } finally {
      client.release();
    }
  }

  /** Paced (RECOMPUTE_COST_FACTOR), and deferred while ingest is behind (BACKLOG_DEFERS). */
  private recomputeDue(): boolean {
    return recomputeGate(performance.now(), this.recomputeDueAt, this.options.backlog?.() ?? 0, this.queuedSince);
  }

  /**
   * The outlier guard's second look at what the markers queued (judge_pending). A failure is
   * logged and left queued for the next round: it must not hold up the recomputation behind it.
   */
  private async judge(client: PoolClient, wait: boolean): Promise<string[]> {
    if (!wait && performance.now() < this.judgeRetryAt) return [];
    try {
      const { done } = await this.locked(client, wait, 'judge', async () => {
        const { cycles, changed } = await judgePending(client);
        // The verdicts are derived values: every list, slowly moving, as the markers' statistics.
        if (changed > 0) await noteReadChanges(client, ['derived']);
        return { done: cycles > 0 ? ['judge'] : [] };
      });
      this.judgeFailures.reset();
      this.judgeRetryAt = 0;
      return done;
    } catch (err) {
      if (wait) throw err; // settle() must not return with work queued
      this.judgeRetryAt = performance.now() + this.judgeFailures.next();
      this.deps.logger.warn(
        { err, failures: this.judgeFailures.attempts },
        "the outlier guard's second look failed; trying again after a pause",
      );
      return [];
    }
  }

  /** Recomputes what the markers queued; the next run is due RECOMPUTE_COST_FACTOR times its time later. */
  private async recompute(client: PoolClient, wait: boolean): Promise<string[]> {
    let ran = false;
    const { done, ms } = await this.locked(client, wait, 'recompute', async () => {
      ran = true;
      const queued = await recomputeDerived(client);
      // The scores that changed are noted by their trigger (the API's LiquidityLag follows them).
      if (queued) await noteReadChanges(client, ['derived']);
      return { done: queued ? ['recompute'] : [], liquidity: queued?.liquidity };
    });
    // Committed with the lock held: whatever was queued is recomputed (not so when the lock was
    // another member's, or the transaction failed: the wait goes on from the same start).
    if (ran) this.queuedSince = undefined;
    if (done.length > 0) {
      const pause = Math.min(ms * (this.options.recomputeCostFactor ?? RECOMPUTE_COST_FACTOR), MAX_RECOMPUTE_PAUSE_MS);
      this.recomputeDueAt = performance.now() + pause;
    }
    return done;
  }

  /**
   * `work` in a transaction holding the derive lock (try, or wait); reports what it returned to
   * the listeners, and returns it with the transaction's milliseconds. Returns no work done without
   * running it when another deriver holds the lock.
   */
  private async locked(
    client: PoolClient,
    wait: boolean,
    step: DeriveStep,
    work: () => Promise<{ done: string[]; liquidity?: LiquidityRefresh | undefined }>,
  ): Promise<{ done: string[]; ms: number }> {
    const t0 = performance.now();
    let done: string[];
    let liquidity: LiquidityRefresh | undefined;
    await client.query('BEGIN');
    try {
      // Markers sort and aggregate whole marketplaces (the catalogue's rows per item, liquidity):
      // the default 4 MB spilled those sorts to disk.
      await client.query(`SET LOCAL work_mem = '64MB'`);
      if (wait) await client.query(`SELECT pg_advisory_xact_lock(${DERIVE_LOCK})`);
      else {
        const { rows } = await client.query<{ ok: boolean }>(`SELECT pg_try_advisory_xact_lock(${DERIVE_LOCK}) AS ok`);
        if (!rows[0]?.ok) {
          await client.query('ROLLBACK');
          return { done: [], ms: performance.now() - t0 };
        }
      }
      ({ done, liquidity } = await work());
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
    const ms = performance.now() - t0;
    if (done.length > 0) {
      const report: DeriveReport = {
        step,
        markers: step === 'markers' ? done : [],
        ms,
        ...(liquidity ? { liquidity } : {}),
      };
      for (const l of this.listeners) l(report);
    }
    return { done, ms };
  }

  /** Drops hourly partitions past the window, without ever waiting long for ingest's locks. */
  private async retain(client: PoolClient): Promise<void> {
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL lock_timeout = '1s'`);
      const { rows } = await client.query<{ now: Date | null }>('SELECT max(now) AS now FROM read_model_clock');
      const now = rows[0]?.now;
      if (now) await dropOldHourPartitions(client, now, this.options.hourlyRetentionDays);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      // Old partitions only cost disk until the next marker's try.
      this.deps.logger.warn({ err }, 'dropping old hourly partitions failed; trying again after the next markers');
    }
  }
}

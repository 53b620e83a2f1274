/**
 * Table upkeep where the server's autovacuum is off: what autovacuum would do for this schema's
 * tables, run by the derive path (deriver.ts) after its rounds, on a connection of its own.
 */
import type { Logger } from '@skinprices/runtime';
import { ident, type Pool, type PoolClient } from '@skinprices/store';
import { BACKLOG_DEFERS } from './derive-gates.js';

/**
 * The upkeep looks for tables due every this many of the derive loop's intervals (15 s by
 * default; autovacuum's own naptime is 60 s).
 */
const UPKEEP_INTERVALS = 15;

/**
 * The tables of this schema autovacuum would vacuum or analyze now by its default thresholds
 * (autovacuum_vacuum_threshold 50, _scale_factor 0.2; the inserts' 1000 and 0.2, since
 * PostgreSQL 13, which set an append-only table's visibility map and freeze it early;
 * _analyze_threshold 50, _scale_factor 0.1), and none where the server's autovacuum is on.
 * reltuples is -1 before a table's first VACUUM or ANALYZE.
 */
const UPKEEP_DUE = `
  WITH t AS (
    SELECT s.relname AS name, s.n_dead_tup AS dead, s.n_live_tup AS live,
           s.n_dead_tup > 50 + 0.2 * greatest(c.reltuples, 0)
             OR s.n_ins_since_vacuum > 1000 + 0.2 * greatest(c.reltuples, 0) AS vacuum,
           s.n_mod_since_analyze > 50 + 0.1 * greatest(c.reltuples, 0) AS stale
    FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
    WHERE s.schemaname = current_schema() AND NOT current_setting('autovacuum')::boolean
  )
  SELECT name, vacuum, dead, live FROM t WHERE vacuum OR stale ORDER BY dead DESC`;

export class TableUpkeep {
  /** When it may look next (performance.now()). */
  private dueAt = 0;
  private announced = false;
  /** The upkeep running on a connection of its own, if any. */
  private upkeeping: Promise<void> | undefined;
  /** Its backend, while it tends tables: stop() cancels what it runs. */
  private pid: number | undefined;

  constructor(
    private readonly deps: { pool: Pool; logger: Pick<Logger, 'warn' | 'info'> },
    /** The derive loop's interval: it looks every UPKEEP_INTERVALS of them. */
    private readonly intervalMs: number,
    /** Records the ingest path has yet to read. */
    private readonly backlog: () => number,
    /** Whether the derive path is stopping: upkeep ends early then. */
    private readonly stopping: () => boolean,
  ) {}

  /**
   * Where the server's autovacuum is off, what it would have done for this schema's tables, by its
   * default thresholds: VACUUM a table whose dead rows passed 20% (+50) or whose rows inserted
   * since its last VACUUM did (+1000), ANALYZE one whose changes since its statistics passed 10%
   * (+50). Started after a round's work, at most every UPKEEP_INTERVALS, on a connection of its
   * own, and not while ingest is far behind (BACKLOG_DEFERS): run in the round, while a cold
   * start's tables are analyzed at cost limits, it would hold the markers up.
   *
   * Why: the machines this runs on in CI and the benchmarks ship PostgreSQL with `autovacuum =
   * off` (conf.d/90-ci.conf). Without this upkeep nothing refreshes the statistics after a cold
   * start's last doubling, or removes a row version: within minutes of a start listings_current
   * would hold a dead row for every few live ones and be planned on statistics taken at a fraction
   * of its size, and a burst's merge would find each batch row's stored state through the name
   * index (several buffers a row, other marketplaces' rows filtered away) instead of the key.
   * Unthrottled, a VACUUM would take cores from ingest: it runs at autovacuum's cost limits
   * (vacuum_cost_delay 2 ms). SKIP_LOCKED: another member's deriver vacuuming the same table
   * is left to it rather than waited for; TRUNCATE false: giving pages back to the file system
   * takes an exclusive lock ingest batches would queue behind.
   */
  start(): void {
    const now = performance.now();
    if (this.upkeeping || this.stopping() || now < this.dueAt) return;
    // A cold start or a catch-up: its tables are written faster than any statistics keep up
    // with, and the cores are ingest's (the doubling ANALYZE covers the plans meanwhile).
    if (this.backlog() > BACKLOG_DEFERS) return;
    this.dueAt = now + UPKEEP_INTERVALS * this.intervalMs;
    this.upkeeping = this.run().finally(() => {
      this.upkeeping = undefined;
    });
  }

  /** On a connection of its own: a VACUUM at cost limits takes seconds, which markers must not wait for. */
  private async run(): Promise<void> {
    let client: PoolClient;
    try {
      client = await this.deps.pool.connect();
    } catch (err) {
      this.deps.logger.warn({ err }, 'table upkeep failed; trying again later');
      return;
    }
    try {
      const { rows } = await client.query<{ name: string; vacuum: boolean; dead: string; live: string }>(UPKEEP_DUE);
      if (rows.length > 0) {
        const { rows: me } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        this.pid = me[0]?.pid;
        await this.tend(client, rows);
      }
    } catch (err) {
      // Upkeep only: the next interval tries again (a stop cancels it on purpose).
      if (!this.stopping()) this.deps.logger.warn({ err }, 'table upkeep failed; trying again later');
    } finally {
      this.pid = undefined;
      // Stopping: the connection is closed, not pooled again, so stop()'s cancel can never reach
      // a statement of someone else's.
      client.release(this.stopping());
    }
  }

  private async tend(
    client: PoolClient,
    rows: readonly { name: string; vacuum: boolean; dead: string; live: string }[],
  ): Promise<void> {
    if (!this.announced) {
      this.announced = true;
      this.deps.logger.warn(
        {},
        "the server's autovacuum is off: the derive path vacuums and analyzes this schema's tables at autovacuum's default thresholds",
      );
    }
    await client.query(`SET vacuum_cost_delay = '2ms'`);
    try {
      for (const { name, vacuum, dead, live } of rows) {
        if (this.stopping()) break;
        const t0 = performance.now();
        await client.query(
          vacuum
            ? `VACUUM (SKIP_LOCKED, ANALYZE, TRUNCATE false) ${ident(name)}`
            : `ANALYZE (SKIP_LOCKED) ${ident(name)}`,
        );
        this.deps.logger.info(
          { table: name, dead: Number(dead), live: Number(live), ms: Math.round(performance.now() - t0) },
          vacuum ? 'vacuumed' : 'analyzed',
        );
      }
    } finally {
      await client.query('RESET vacuum_cost_delay').catch(() => undefined);
    }
  }

  /** Cancels what it runs and waits for it. */
  async stop(): Promise<void> {
    // A VACUUM at cost limits can take tens of seconds: cancelled, not waited out (it is
    // upkeep; the next start looks again).
    if (this.pid !== undefined)
      await this.deps.pool.query('SELECT pg_cancel_backend($1)', [this.pid]).catch(() => undefined);
    await this.upkeeping;
  }
}

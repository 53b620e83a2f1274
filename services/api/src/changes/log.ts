/**
 * Reads the materializer's committed-change log (price_change_log, migration 0006 of the
 * materializer): the same changes, in the same order, as price-changes.v1. A cursor names the
 * log (its epoch) and a position in it; see cursor.ts.
 */
import type { Pool } from '@skinprices/store';

export interface ChangeRow {
  seq: string;
  market: string;
  market_hash_name: string;
  phase: string;
  currency: string;
  old_price: string | null;
  new_price: string | null;
  old_count: number | null;
  new_count: number | null;
  observed_at: Date;
  changed_at: Date;
}

export interface LogState {
  epoch: string;
  /** Every number at or below this was deleted by retention. */
  prunedThrough: bigint;
  /** The highest number committed (0: none yet). */
  head: bigint;
}

export interface ChangePage {
  rows: ChangeRow[];
  /** Where the next page starts: the last row's number, or the head when the page was not full. */
  next: bigint;
  /** A full page: more may follow at once. */
  full: boolean;
}

export class ChangeLog {
  constructor(private readonly pool: Pool) {}

  async state(): Promise<LogState> {
    const { rows } = await this.pool.query<{ epoch: string; pruned_through: string; head: string }>(
      `SELECT s.epoch, s.pruned_through::text, coalesce((SELECT max(seq) FROM price_change_log), 0)::text AS head
       FROM price_change_log_state s`,
    );
    const r = rows[0];
    if (!r) throw new Error('price_change_log_state has no row');
    return { epoch: r.epoch, prunedThrough: BigInt(r.pruned_through), head: BigInt(r.head) };
  }

  /**
   * Changes after `after` up to `head` (read before: everything at or below it is committed and
   * final, the log is numbered in commit order), of `markets`, at most `limit`.
   */
  async page(after: bigint, head: bigint, markets: readonly string[], limit: number): Promise<ChangePage> {
    if (after >= head) return { rows: [], next: after, full: false };
    // seq comes back as a string (pg's int8), exact; casting it in the SELECT list would make
    // ORDER BY seq sort the text ('10' < '9').
    const { rows } = await this.pool.query<ChangeRow>(
      `SELECT seq, market, market_hash_name, phase, currency, old_price, new_price, old_count, new_count,
              observed_at, changed_at
       FROM price_change_log
       WHERE seq > $1 AND seq <= $2 AND market = ANY($3)
       ORDER BY seq
       LIMIT $4`,
      [after.toString(), head.toString(), markets, limit],
    );
    const full = rows.length === limit;
    const last = rows.at(-1);
    return { rows, next: full && last ? BigInt(last.seq) : head, full };
  }
}

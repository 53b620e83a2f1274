/**
 * Reads the materializer's committed-change log (the read contract's api_price_changes_v1 and
 * api_price_change_log_v1 views, over migration 0006's tables): the same changes, in the same
 * order, as price-changes.v1. A cursor names the log (its epoch) and a position in it; see cursor.ts.
 */
import type { ReadContractV1 } from '@skinprices/store';
import { sql, type Kysely, type Selectable } from 'kysely';

export type ChangeRow = Selectable<ReadContractV1['api_price_changes_v1']>;

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
  constructor(private readonly db: Kysely<ReadContractV1>) {}

  async state(): Promise<LogState> {
    const r = await this.db
      .selectFrom('api_price_change_log_v1')
      .select((eb) => [
        'epoch',
        'pruned_through',
        eb
          .fn<string>('coalesce', [
            eb.selectFrom('api_price_changes_v1').select((e) => e.fn.max('seq').as('m')),
            sql`0`,
          ])
          .as('head'),
      ])
      .executeTakeFirst();
    if (!r) throw new Error('the change log has no state row');
    return { epoch: r.epoch, prunedThrough: BigInt(r.pruned_through), head: BigInt(String(r.head)) };
  }

  /**
   * Changes after `after` up to `head` (read before: everything at or below it is committed and
   * final, the log is numbered in commit order), of `markets`, at most `limit`.
   */
  async page(after: bigint, head: bigint, markets: readonly string[], limit: number): Promise<ChangePage> {
    if (after >= head) return { rows: [], next: after, full: false };
    // seq comes back as a string (pg's int8), exact; casting it in the SELECT list would make
    // ORDER BY seq sort the text ('10' < '9').
    const rows = await this.db
      .selectFrom('api_price_changes_v1')
      .selectAll()
      .where('seq', '>', after.toString())
      .where('seq', '<=', head.toString())
      .where('market', '=', sql<string>`ANY(${[...markets]})`)
      .orderBy('seq')
      .limit(limit)
      .execute();
    const full = rows.length === limit;
    const last = rows.at(-1);
    return { rows, next: full && last ? BigInt(last.seq) : head, full };
  }
}

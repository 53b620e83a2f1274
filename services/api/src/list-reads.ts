/**
 * What a patched list body reads, and from where: its rows, whole or changed since a position
 * (ListSource), and the liquidity scores that move without their rows, read once for the lists
 * that fall due together (SharedFieldReads) at most every LiquidityLag. The read model answers
 * them (readmodel.ts); the list-body cache (list-cache.ts) asks.
 */
import { parsePosition, type Position } from './changes/position.js';
import type { FieldChange, ListRow, RowChange } from './list-segments.js';

/**
 * Where a patched list body gets its rows: all of them, or those the read model's change journal
 * names since a position (changes/position.ts).
 */
export interface ListSource {
  /**
   * Every row of the list, in its order, the change position they were read at, and when the
   * list was last confirmed complete as of that read (Body.confirmedAt).
   */
  full(): Promise<{ position: string; rows: ListRow[]; confirmedAt?: Date | null }>;
  /**
   * The rows changed since `position` (JSON null: gone) and the position they were read at;
   * `known` tells which keys the list holds, so that only the others are given their place
   * (`after`: a look-up each in the database). Undefined: the journal no longer reaches back to
   * `position`, and the list is read whole.
   */
  since(
    position: string,
    known: (key: string) => boolean,
  ): Promise<{ position: string; changes: RowChange[]; confirmedAt?: Date | null } | undefined>;
  /**
   * The fields that move without their row (liquidity scores) changed since `position`, for every
   * key that has them, and the position they were read at (undefined as for `since`; the read
   * model answers every score instead). Absent: a row shows nothing that moves without it.
   */
  fields?(position: string, notBefore: number): Promise<FieldRead | undefined>;
}

/** A read of the fields: the changes, and the position they were read at. */
export interface FieldRead {
  position: string;
  changes: readonly FieldChange[];
}

/**
 * One read of the fields for the lists that fall due together. Every list's scores fall due on
 * the same derive commit, and each read every score the commit moved: six lists read them six
 * times at once, and those patches held back the price changes behind them. A read answers a
 * list when it started no earlier than `notBefore` (the list's rows were read by then: the read is
 * newer than those rows, and than every commit the list was told of and every score it read
 * before) and from a position of the same journal not after the list's (what it names as changed
 * since is a superset of what the list needs; the patch's digests drop the rest). Otherwise a read
 * of its own, which later lists may share.
 */
export class SharedFieldReads {
  private last: { from: Position; startedAt: number; result: Promise<FieldRead | undefined> } | undefined;

  constructor(private readonly read: (position: string) => Promise<FieldRead | undefined>) {}

  /** Reads made (not shared). */
  reads = 0;

  async since(position: string, notBefore: number): Promise<FieldRead | undefined> {
    const from = parsePosition(position);
    const last = this.last;
    if (last && last.startedAt >= notBefore && last.from.epoch === from.epoch && last.from.pos <= from.pos) {
      const shared = await last.result.catch(() => undefined);
      if (shared) return shared;
    }
    const result = this.read(position);
    this.reads++;
    this.last = { from, startedAt: performance.now(), result };
    return result;
  }
}

/**
 * Liquidity scores in the lists may lag their writes by this long (DERIVED_MAX_LAG_MS): each
 * derive transaction can change the score of thousands of items, in every list, and they are read
 * at most this often (ListSource.fields).
 */
export interface LiquidityLag {
  /**
   * Moves when scores may have been written (the derive path's recomputation committed): read
   * before, a list that is due would find nothing and start its lag again.
   */
  version: () => number;
  lagMs: number;
}

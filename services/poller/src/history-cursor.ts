/**
 * Which day a HISTORY job imports next. Two passes so that what customers see first comes first:
 *
 *   closes ──(caught up with the upstream's last closed day)──▶ hours ──▶ steady
 *
 * - closes: every day from `backfillDays` ago, oldest first, its daily close only. Changes and
 *   averages stand on these; at 400 days × a catalogue this is the quick part.
 * - hours: then the last `hourlyDays` days again, oldest first, their hourly candles only (the
 *   upstream keeps hours for recent days; 24 rows per item and day: the slow part, done while the
 *   platform already serves its statistics).
 * - steady: each newly closed day, its close and its hours together. A day that closes while the
 *   hours pass runs is imported (with its hours) before the pass goes on.
 *
 * Pure state: the poller asks `next(today)` and reports `done(work)` after a cycle that did not
 * fail, so a failed day is asked again. The poller keeps `position()` on poller-cursors.v1 after
 * each such cycle and a restarted poller `resume`s from it, so no day is imported twice (a day
 * whose cycle a crash cut off is imported again: at most one).
 */
export interface HistoryWork {
  /** UTC day, days since epoch. */
  day: number;
  /** Import the day's close. */
  closes: boolean;
  /** Import the day's hourly candles. */
  hourly: boolean;
}

/** Where the passes stand (days since the epoch; null: not begun). */
export interface HistoryPosition {
  closesNext: number | null;
  hoursNext: number | null;
  hoursEnd: number | null;
}

export class HistoryCursor {
  /** The next day whose close is imported. */
  private closesNext: number | undefined;
  /** Hours pass: the next day, and the first day past it (closes from then on carry their hours). */
  private hoursNext: number | undefined;
  private hoursEnd: number | undefined;

  constructor(
    private readonly backfillDays: number,
    private readonly hourlyDays: number,
  ) {}

  /** What to import now, or undefined: nothing until the upstream closes another day. */
  next(today: number): HistoryWork | undefined {
    this.closesNext ??= today - this.backfillDays;
    if (this.closesNext < today) {
      const inline = this.hoursEnd !== undefined && this.hourlyDays > 0 && this.closesNext >= today - this.hourlyDays;
      return { day: this.closesNext, closes: true, hourly: inline };
    }
    if (this.hourlyDays > 0 && this.hoursEnd === undefined) {
      this.hoursEnd = this.closesNext;
      this.hoursNext = Math.max(today - this.hourlyDays, today - this.backfillDays);
    }
    if (this.hoursNext !== undefined && this.hoursEnd !== undefined && this.hoursNext < this.hoursEnd)
      return { day: this.hoursNext, closes: false, hourly: true };
    return undefined;
  }

  /**
   * The next closes day even if our view of the upstream's clock says it has not closed yet (a
   * manual re-poll: the upstream may know better); with its hours once the passes are through.
   */
  nextClose(today: number): HistoryWork {
    this.closesNext ??= today - this.backfillDays;
    return { day: this.closesNext, closes: true, hourly: this.hoursEnd !== undefined && this.hourlyDays > 0 };
  }

  /** A cycle of `work` finished without failing: move past it. */
  done(work: HistoryWork): void {
    if (work.closes && work.day === this.closesNext) this.closesNext++;
    else if (!work.closes && work.day === this.hoursNext) this.hoursNext++;
  }

  position(): HistoryPosition {
    return { closesNext: this.closesNext ?? null, hoursNext: this.hoursNext ?? null, hoursEnd: this.hoursEnd ?? null };
  }

  /**
   * Continues from a position kept before a restart. A backfill configured further back since is
   * not gone back for: the days before the kept position were imported, or chosen not to be.
   */
  resume(p: HistoryPosition): void {
    this.closesNext = p.closesNext ?? undefined;
    this.hoursNext = p.hoursNext ?? undefined;
    this.hoursEnd = p.hoursEnd ?? undefined;
  }

  /** Whether the passes are through (for the progress line and the poller's waiting). */
  caughtUp(today: number): boolean {
    return this.next(today) === undefined;
  }
}

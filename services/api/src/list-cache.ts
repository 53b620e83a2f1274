/**
 * The cache of whole-list bodies (ListBodyCache): when a list is patched and when rebuilt, which
 * slice of pending scores a patch carries, and the sweeps that refresh the lists asked for ahead
 * of requests. The bodies themselves are list-segments.ts's; what a list reads, list-reads.ts's.
 */
import { VersionedCache, type Body, type VersionOf } from './bodies.js';
import type { LiquidityLag, ListSource } from './list-reads.js';
import { SegmentedList, type FieldChange } from './list-segments.js';
import type { Slots } from './slots.js';

/** What a patched list keeps beside its body. */
interface ListState {
  list: SegmentedList;
  /** The change position the list's rows reflect: the next patch reads the changes after it. */
  position: string;
  /**
   * The position of the last read of the fields (ListSource.fields), when that was, and the
   * derived version as of then: the next read of them reads the changes after it.
   */
  liquidity: { position: string; at: number; derived: number };
  /**
   * Field changes read and not yet applied (at most FIELD_SEGMENTS segments' worth per refresh),
   * by key. A row read after them shows its fields as of its own read, which is newer: its entry
   * is dropped.
   */
  pending: ReadonlyMap<string, FieldChange>;
  /** The resets count (untagged notifications, reconnections) as of the last full build. */
  resets: number;
  /** How long this refresh waited for a whole-read slot (a patch: 0). */
  queuedMs: number;
}

/**
 * Why a list was refreshed the way it was: `patch`, the changed rows only; the rest rebuilt it from
 * every row — `first` (nothing cached), `reset` (the read model said anything may have changed:
 * ReadModelVersion.resets), `behind` (the change journal no longer reaches back to the list's
 * position), `refused` (a patch it could not apply, SegmentedList.patch).
 */
type RefreshHow = 'patch' | 'first' | 'reset' | 'behind' | 'refused';

/**
 * Where a patch's time went, for a slow refresh's log line: on a loaded machine it is mostly the
 * reads, not the recompression (bench/bottlenecks.md, Freshness).
 */
export interface PatchDetail {
  /** Reading the rows written since the last read (ListSource.since), seconds. */
  readSeconds: number;
  /** Reading the scores (ListSource.fields, perhaps a read shared with other lists), seconds; 0: not read. */
  fieldsSeconds: number;
  /** Applying and recompressing (SegmentedList.patch), seconds. */
  patchSeconds: number;
  /** Segments the patch's slice of scores touched (FIELD_SEGMENTS at most). */
  scoreSegments: number;
}

/** Told of every refresh: how, how long it took, how many rows the read returned, and a patch's detail. */
export type RefreshObserver = (
  name: string,
  how: RefreshHow,
  seconds: number,
  rows: number,
  detail?: PatchDetail,
) => void;

/**
 * After a refresh, a list waits at least this many times as long as it took (VersionedCache): at
 * most half of the process refreshing one list. 4 (a fifth) is worse: on a saturated machine a
 * long patch holds its list four times as long, the next patch then has more rows to read, and
 * committed → visible reaches minutes (bench/bottlenecks.md, Freshness).
 */
const COST_FACTOR = 1;

/**
 * Segments of field changes (scores) one refresh applies at most. A score round touches every
 * segment of a list (130 at 33k rows); carried whole by the patch of a price change, it makes that
 * patch seconds long on a loaded machine, and the price changes after it wait for it and then as
 * long again (COST_FACTOR). In slices, a price change waits for one slice at most; a round takes a
 * few refreshes.
 */
const FIELD_SEGMENTS = 24;

/** A list asked for within this long is kept current ahead of requests (see ListBodyCache.changed). */
const AHEAD_FOR_MS = 120_000;

/**
 * Whole-list bodies patched in place (SegmentedList): when what the list depends on moved, only
 * the rows the change journal names since the position of its last read are fetched and their
 * segments recompressed, so a body follows every commit of its marketplace, and every derive transaction's
 * statistics and outlier verdicts (in the listing rows), within about `minAgeMs`. Liquidity
 * scores, which move without their rows, are read on their own (ListSource.fields: the score
 * alone, not the row) at most every LiquidityLag, and applied a slice of segments per refresh
 * (FIELD_SEGMENTS) beside whatever rows changed. It is rebuilt from every row the first time, when
 * the read model said anything may have changed (ReadModelVersion.resets), when the journal no
 * longer reaches back to its position, and when a patch is refused (SegmentedList.patch).
 * When to refresh and what to serve meanwhile is VersionedCache's (single-flight, the previous
 * body served while it runs).
 */
export class ListBodyCache {
  private readonly cache: VersionedCache<ListState>;
  /** `rowsPatched`: rows patches read; `rowsUnchanged`: of those, rows whose JSON had not changed. */
  private readonly refreshes = { patches: 0, rebuilds: 0, ahead: 0, rowsPatched: 0, rowsUnchanged: 0 };
  /** Lists asked for recently: their source and when they were last asked for. */
  private readonly asked = new Map<string, { source: ListSource; at: number }>();
  private sweepTimer: NodeJS.Timeout | undefined;
  private sweepAt = Infinity;
  /**
   * Lists owed a refresh with no change of their own: liquidity scores moved and fall due then
   * (LiquidityLag), or the next slice of scores read and not yet applied (now).
   */
  private readonly owed = new Map<string, number>();
  /** Per list, moved when its owed scores fell due: part of its version, so it is refreshed. */
  private readonly nudges = new Map<string, number>();
  private stopped = false;

  constructor(
    /** The version of what a list depends on (its tags and the derived values). */
    version: VersionOf,
    /** Untagged notifications and reconnections (ReadModelVersion.resets): rebuild when it moved. */
    private readonly resets: () => number,
    minAgeMs = 1_000,
    private readonly observe: RefreshObserver = () => undefined,
    /** Absent: every refresh with no scores left to apply reads those changed since the last read. */
    private readonly liquidity?: LiquidityLag,
    /** Whole-list reads (first builds, rebuilds) share these (slots.ts); patches never wait for one. @default no limit */
    private readonly builds?: Slots,
  ) {
    // A refresh that took long (a saturated machine, a patch of most of the list) is not started
    // again at once: back to back, six lists' patches would take every CPU the process gets.
    this.cache = new VersionedCache(
      (name) => version(name) + (this.nudges.get(name) ?? 0),
      minAgeMs,
      undefined,
      COST_FACTOR,
      // A list that waited for a whole-read slot is not held back for that wait as well.
      (state) => state.queuedMs,
    );
  }

  get stats(): {
    hits: number;
    misses: number;
    patches: number;
    rebuilds: number;
    ahead: number;
    rowsPatched: number;
    rowsUnchanged: number;
  } {
    return { ...this.cache.stats, ...this.refreshes };
  }

  /** The list's body; `fresh`: never an outdated one (waits for the refresh), as VersionedCache.fresh. */
  async get(name: string, source: ListSource, fresh = false): Promise<Body> {
    this.asked.set(name, { source, at: Date.now() });
    const build = (previous: ListState | undefined) => this.refresh(name, source, previous);
    const state = await (fresh ? this.cache.fresh(name, build) : this.cache.get(name, build));
    return state.list.body;
  }

  /**
   * The read model moved: patch, without waiting for a request, every list asked for in the last
   * two minutes whose version moved. Served stale-while-refreshing alone, a change would reach a
   * client one poll late (the poll that finds the version moved gets the previous body and starts
   * the patch) and the patch's read and recompression would be on the request's way; ahead, they
   * run as the notification arrives, at most every `minAgeMs` per list, one at a time per list.
   */
  changed(): void {
    this.schedule(0);
  }

  private schedule(delayMs: number): void {
    // A refresh still running when the process closes must not start the sweeps again.
    if (this.stopped) return;
    const at = Date.now() + delayMs;
    if (this.sweepTimer && this.sweepAt <= at) return;
    clearTimeout(this.sweepTimer);
    this.sweepAt = at;
    this.sweepTimer = setTimeout(() => this.sweep(), delayMs);
    this.sweepTimer.unref();
  }

  private sweep(): void {
    this.sweepTimer = undefined;
    this.sweepAt = Infinity;
    let next = Infinity;
    for (const [name, due] of this.owed) {
      if (due > Date.now()) {
        next = Math.min(next, due - Date.now());
        continue;
      }
      this.owed.delete(name);
      this.nudges.set(name, (this.nudges.get(name) ?? 0) + 1);
    }
    for (const [name, { source, at }] of this.asked) {
      if (Date.now() - at > AHEAD_FOR_MS) {
        this.asked.delete(name);
        continue;
      }
      const wait = this.cache.ahead(name, (previous) => {
        this.refreshes.ahead++;
        return this.refresh(name, source, previous);
      });
      if (wait > 0) next = Math.min(next, wait);
    }
    if (next < Infinity) this.schedule(next);
  }

  /** Stops refreshing ahead (the process is closing). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.sweepTimer);
    this.asked.clear();
    this.owed.clear();
  }

  private async refresh(name: string, source: ListSource, previous: ListState | undefined): Promise<ListState> {
    const started = performance.now();
    const resets = this.resets();
    // Read before the rows and the fields: a derive transaction committing meanwhile moves it again.
    const derived = this.liquidity?.version() ?? 0;
    let how: RefreshHow = previous ? 'reset' : 'first';
    if (previous && previous.resets === resets) {
      const patched = await this.patch(name, source, previous, started, derived);
      if (typeof patched !== 'string') return patched;
      how = patched;
    }
    const asked = performance.now();
    const build = async () => {
      const queuedMs = performance.now() - asked;
      const { position, rows, confirmedAt } = await source.full();
      const list = await SegmentedList.build(rows);
      list.body.confirmedAt = confirmedAt;
      return { position, list, rows: rows.length, queuedMs };
    };
    const { position, list, rows, queuedMs } = await (this.builds ? this.builds.run(build) : build());
    this.refreshes.rebuilds++;
    this.observe(name, how, (performance.now() - started) / 1000, rows);
    this.lookAgain();
    return { list, position, liquidity: { position, at: Date.now(), derived }, pending: new Map(), resets, queuedMs };
  }

  /**
   * Applies to `previous` what the change journal names since its position (and a slice of the
   * fields due), or says why the list must be read whole instead: `behind`, the journal no longer
   * reaches back to the list's position; `refused`, the patch could not be applied.
   */
  private async patch(
    name: string,
    source: ListSource,
    previous: ListState,
    started: number,
    derived: number,
  ): Promise<ListState | 'behind' | 'refused'> {
    const list = previous.list;
    const read = await source.since(previous.position, (key) => list.has(key));
    if (read === undefined) return 'behind';
    const { position, changes } = read;
    // A fields read shared with other lists must have started after this read of the rows, so
    // that it is newer than they are (SharedFieldReads).
    const rowsRead = performance.now();
    let fieldsRead = rowsRead;
    // A row read now shows its fields as of this read: newer than those read before it.
    const pending = new Map(previous.pending);
    for (const c of changes) pending.delete(c.key);
    let liquidity = previous.liquidity;
    const moved = liquidity.derived !== derived;
    const lagMs = this.liquidity?.lagMs;
    // Fields are read once the last read's are all applied, when they may have moved and are due
    // (or every time, without a lag), from the position of that read, so none is skipped.
    const due = lagMs === undefined || (moved && Date.now() - liquidity.at >= lagMs);
    if (source.fields && pending.size === 0 && due) {
      const fields = await source.fields(liquidity.position, rowsRead);
      if (fields === undefined) return 'behind';
      fieldsRead = performance.now();
      const placed = new Set(changes.map((c) => c.key));
      // Read after the rows: newer than theirs, so they apply to this patch's rows too.
      for (const c of fields.changes) if (list.has(c.key) || placed.has(c.key)) pending.set(c.key, c);
      liquidity = { position: fields.position, at: Date.now(), derived };
    }
    const { slice, segments } = fieldSlice(list, pending);
    const patchStarted = performance.now();
    if (!(await list.patch(changes, slice))) return 'refused';
    list.body.confirmedAt = read.confirmedAt;
    for (const c of slice) pending.delete(c.key);
    this.refreshes.patches++;
    this.refreshes.rowsPatched += changes.length + slice.length;
    this.refreshes.rowsUnchanged += list.lastUnchanged;
    this.observe(name, 'patch', (performance.now() - started) / 1000, changes.length + slice.length, {
      readSeconds: (rowsRead - started) / 1000,
      fieldsSeconds: (fieldsRead - rowsRead) / 1000,
      patchSeconds: (performance.now() - patchStarted) / 1000,
      scoreSegments: segments,
    });
    // The next slice as soon as the list may refresh again (minAgeMs, a slice's own cost).
    if (pending.size > 0) this.owe(name, Date.now());
    // Moved and not read (not due yet): read once they are, even if nothing else moves.
    else if (source.fields && lagMs !== undefined && liquidity.derived !== derived)
      this.owe(name, liquidity.at + lagMs);
    this.lookAgain();
    return { ...previous, position, liquidity, pending, queuedMs: 0 };
  }

  /** The list's scores fall due at `at`: it is refreshed then, even if nothing else moves. */
  private owe(name: string, at: number): void {
    if ((this.owed.get(name) ?? Infinity) <= at) return;
    this.owed.set(name, at);
    this.schedule(Math.max(0, at - Date.now()));
  }

  /**
   * After a refresh (ahead or asked for): a notification that came meanwhile is for rows it may
   * not have seen, and the sweep then skipped the list (a refresh was running); look again once
   * the result is stored (a timer runs after the cache's own continuation). Not after a failure:
   * that would retry at once, in a loop while PostgreSQL is away; the next notification or
   * request retries instead.
   */
  private lookAgain(): void {
    if (this.asked.size > 0) this.schedule(0);
  }
}

/**
 * The field changes of at most FIELD_SEGMENTS of the list's segments, in the order they were read,
 * and how many segments they touch; those of keys the list does not hold yet (rows this patch
 * places) come along.
 */
function fieldSlice(
  list: SegmentedList,
  pending: ReadonlyMap<string, FieldChange>,
): { slice: FieldChange[]; segments: number } {
  const slice: FieldChange[] = [];
  const segments = new Set<number>();
  for (const c of pending.values()) {
    const at = list.segmentOf(c.key);
    if (at !== undefined && !segments.has(at)) {
      if (segments.size >= FIELD_SEGMENTS) continue;
      segments.add(at);
    }
    slice.push(c);
  }
  return { slice, segments: segments.size };
}

/**
 * A whole-list body (`{"data":[row,row,…]`, the head of a bodies.ts Body) kept as segments of
 * rows, each compressed on its own, so that a change of a few rows recompresses their segments
 * and nothing else: rebuilding a 33k-row list costs about a CPU-second (query, JSON, gzip), and
 * every commit of the marketplace would ask for one.
 *
 *   gzip header │ deflate('{"data":[') │ deflate(seg 0) │ deflate(',' seg 1) │ … │ deflate(']') │ ← tail (bodies.ts)
 *
 * Every piece is an independent raw deflate stream ended by a sync flush and never marked final,
 * the construction bodies.ts already uses for head and tail: a stream that starts fresh never refers
 * back into the one before it, so the concatenation inflates to the concatenated JSON. The head's
 * CRC-32 is combined from the pieces' CRCs (crc32Combine) and its content hash from their hashes,
 * so nothing re-reads the whole body.
 *
 * A row new to the list is placed after its predecessor as the database orders them (its
 * collation is not this process's to reproduce): the read that names the changes names it too.
 * A patch that cannot place a row, or would empty a segment, is refused: the caller rebuilds.
 */
import { createHash, hash as oneShot } from 'node:crypto';
import { promisify } from 'node:util';
import { constants, crc32, deflateRaw, inflateRawSync } from 'node:zlib';
import { GZIP_HEADER, VersionedCache, type Body, type VersionOf } from './bodies.js';
import { parsePosition, type Position } from './changes/position.js';
import type { Slots } from './slots.js';

const deflateRawAsync = promisify(deflateRaw);

/** A row of a list: its identity (unique in the list) and its JSON. */
export interface ListRow {
  key: string;
  json: string;
}

/** A row changed since the list was read: its JSON now, or null when it is no longer listed. */
export interface RowChange {
  key: string;
  json: string | null;
  /**
   * For a listed row: the key of the row before it in the list's order, as of the same read
   * (null: it is the first). Needed to place a row the list does not hold yet.
   */
  after?: string | null;
}

/**
 * New values for some fields of a row the list holds, the rest of the row as held: a liquidity
 * score, which moves without its listing row (the derive path writes thousands at once). Applied
 * as JSON.parse, assignment, JSON.stringify, which gives the bytes a row read anew would have: the
 * keys keep their order, and every value was itself written by JSON.stringify.
 */
export interface FieldChange {
  key: string;
  fields: Readonly<Record<string, string | null>>;
}

/** Rows per segment: ~100 KB of JSON at ~350 bytes a row, a few milliseconds to recompress. */
export const ROWS_PER_SEGMENT = 256;
/** A segment grown by insertions past this is left to the next rebuild to split. */
const MAX_SEGMENT_ROWS = 4 * ROWS_PER_SEGMENT;

/** One compressed piece of the head and what a patch or the assembly needs to know of it. */
interface Piece {
  /** Raw deflate data, sync-flushed, not final. */
  deflated: Buffer;
  /** Uncompressed bytes. */
  length: number;
  crc: number;
  /** Content hash: SHA-1 of a segment's row digests in order, of a fixed piece's bytes. */
  hash: Buffer;
}

interface Segment extends Piece {
  keys: string[];
  /** Byte length of each row's JSON, in `keys` order (the separating commas excluded). */
  lengths: number[];
}

/**
 * Deflate level of a piece. A full build and a patch of a few segments compress at 6; a patch that
 * touches more than BURST_SEGMENTS at 1, about a third of the CPU for ~20% more bytes. Such patches
 * come in bursts (a fifth of all listed prices changed at once, bench/bottlenecks.md, Freshness),
 * when every list's patches recompress it whole and the changes wait behind them; a segment goes
 * back to 6 when a calm patch or the next rebuild touches it. A slice of liquidity scores
 * (FIELD_SEGMENTS, more than this) is compressed at 1 too, and a round of scores touches every
 * segment every DERIVED_MAX_LAG_MS or so: while scores keep moving, most segments stay at 1.
 */
const LEVEL = 6;
const BURST_LEVEL = 1;
/** See BURST_LEVEL: 16 of a 33k-row list's 130 segments is already a patch of ~100 ms. */
const BURST_SEGMENTS = 16;

async function piece(plain: Buffer, hash: Buffer, level = LEVEL): Promise<Piece> {
  return {
    deflated: await deflateRawAsync(plain, { level, finishFlush: constants.Z_SYNC_FLUSH }),
    length: plain.length,
    crc: crc32(plain),
    hash,
  };
}

const sha1 = (data: string | Buffer): Buffer => createHash('sha1').update(data).digest();

/**
 * Segment `index` of rows: a leading comma unless it is the first. Its hash is taken over its rows'
 * digests, which build and patch compute anyway, not over its bytes again (a tenth of a patch's CPU).
 */
async function segment(
  index: number,
  keys: string[],
  rows: Buffer[],
  digests: string[],
  level?: number,
): Promise<Segment> {
  const parts: Buffer[] = [];
  for (const [i, r] of rows.entries()) {
    if (i > 0 || index > 0) parts.push(COMMA);
    parts.push(r);
  }
  const hash = sha1(digests.join(''));
  return { ...(await piece(Buffer.concat(parts), hash, level)), keys, lengths: rows.map((r) => r.length) };
}

/** The rows of a segment, uncompressed again. */
function rowsOf(index: number, s: Segment): Buffer[] {
  const plain = inflateRawSync(s.deflated, { finishFlush: constants.Z_SYNC_FLUSH });
  const rows: Buffer[] = [];
  let at = index > 0 ? 1 : 0;
  for (const len of s.lengths) {
    rows.push(plain.subarray(at, at + len));
    at += len + 1;
  }
  return rows;
}

const COMMA = Buffer.from(',');

/**
 * A row's JSON as 72 bits of its SHA-1: what a patch compares to skip a row written again with
 * the same content. A liquidity row rewritten for its best bid or lowest ask (not in the lists)
 * and statistics recomputed to equal values are new row versions all the same: without the
 * digest a patch would carry thousands of rows, most of them unchanged, and recompress every
 * segment. The one-shot hash: half the cost of a Hash object per row, and a build takes 33k.
 */
const digest = (json: string): string => oneShot('sha1', json, 'base64url').slice(0, 12);
const fixedPiece = (text: string) => piece(Buffer.from(text), sha1(text));
let openPiece: Promise<Piece> | undefined;
let closePiece: Promise<Piece> | undefined;

export class SegmentedList {
  /** The body as of the last build or patch. */
  body: Body;

  private constructor(
    private readonly segments: Segment[],
    /** Key → index of its segment. */
    private readonly index: Map<string, number>,
    /** Key → digest of its row's JSON. */
    private readonly digests: Map<string, string>,
    private readonly open: Piece,
    private readonly close: Piece,
  ) {
    this.body = this.assemble();
  }

  /** A list of `rows`, in the order given (the database's). */
  static async build(rows: readonly ListRow[], rowsPerSegment = ROWS_PER_SEGMENT): Promise<SegmentedList> {
    const pending: Promise<Segment>[] = [];
    const index = new Map<string, number>();
    const digests = new Map<string, string>();
    for (let at = 0; at < rows.length; at += rowsPerSegment) {
      const slice = rows.slice(at, at + rowsPerSegment);
      const n = pending.length;
      const sliceDigests = slice.map((r) => digest(r.json));
      for (const [i, r] of slice.entries()) {
        index.set(r.key, n);
        digests.set(r.key, sliceDigests[i] as string);
      }
      // Compressed on libuv's thread pool, in parallel: a full build must not stall requests.
      pending.push(
        segment(
          n,
          slice.map((r) => r.key),
          slice.map((r) => Buffer.from(r.json)),
          sliceDigests,
        ),
      );
    }
    openPiece ??= fixedPiece('{"data":[');
    closePiece ??= fixedPiece(']');
    const [open, close, segments] = await Promise.all([openPiece, closePiece, Promise.all(pending)]);
    return new SegmentedList(segments, index, digests, open, close);
  }

  /** Rows the last applied patch named whose JSON was the same as held (nothing rewritten for them). */
  lastUnchanged = 0;

  get size(): number {
    return this.index.size;
  }

  /** Whether the list holds `key` (a change of it needs no place). */
  has(key: string): boolean {
    return this.index.has(key);
  }

  /** The segment that holds `key` (undefined: not in the list). */
  segmentOf(key: string): number | undefined {
    return this.index.get(key);
  }

  /**
   * Applies `changes`, then `fields` (to rows the list holds after the changes; others are
   * skipped), and returns true, or returns false and changes nothing when the list must be rebuilt
   * instead: a new row without its predecessor (`after`), or whose predecessor is not in the list;
   * a segment left empty, or grown past MAX_SEGMENT_ROWS; a field the row does not have. A change
   * that removes a key the list does not hold is already done.
   */
  async patch(changes: readonly RowChange[], fields: readonly FieldChange[] = []): Promise<boolean> {
    /** Working copies of the segments read: keys and rows (JSON bytes) after the changes. */
    const work = new Map<number, { keys: string[]; rows: Buffer[] }>();
    /** Of those, the segments whose rows differ from what they hold: only these are recompressed. */
    const dirty = new Set<number>();
    const open = (at: number) => {
      let w = work.get(at);
      if (!w) {
        const s = this.segments[at] as Segment;
        work.set(at, (w = { keys: [...s.keys], rows: rowsOf(at, s) }));
      }
      return w;
    };
    const removed: string[] = [];
    const added: RowChange[] = [];
    /** Digests of the rows written or placed, recorded if the patch is applied. */
    const written = new Map<string, string>();
    let unchanged = 0;
    // One change per key, the last (a read names each row once; this keeps a patch well defined).
    for (const c of new Map(changes.map((x) => [x.key, x])).values()) {
      const at = this.index.get(c.key);
      const d = c.json === null ? undefined : digest(c.json);
      if (d !== undefined) written.set(c.key, d);
      if (at === undefined) {
        if (c.json !== null) added.push(c);
        continue;
      }
      // Written again with the same content: nothing to recompress.
      if (d !== undefined && this.digests.get(c.key) === d) {
        unchanged++;
        continue;
      }
      const w = open(at);
      dirty.add(at);
      const i = w.keys.indexOf(c.key);
      if (c.json === null) {
        w.keys.splice(i, 1);
        w.rows.splice(i, 1);
        removed.push(c.key);
      } else w.rows[i] = Buffer.from(c.json);
    }
    // New rows go right after their predecessor in the database's order (read in the same
    // transaction, so it is in the list or is itself one of the new rows): placed in rounds until
    // every one has found its predecessor.
    const placed = new Map<string, number>();
    const gone = new Set(removed);
    const where = (key: string) => placed.get(key) ?? (gone.has(key) ? undefined : this.index.get(key));
    let waiting = added;
    while (waiting.length > 0) {
      const next: RowChange[] = [];
      for (const c of waiting) {
        if (c.after === undefined) return false;
        const at = c.after === null ? (this.segments.length > 0 ? 0 : undefined) : where(c.after);
        if (at === undefined) {
          next.push(c);
          continue;
        }
        const w = open(at);
        dirty.add(at);
        const i = c.after === null ? 0 : w.keys.indexOf(c.after) + 1;
        w.keys.splice(i, 0, c.key);
        w.rows.splice(i, 0, Buffer.from(c.json as string));
        placed.set(c.key, at);
      }
      if (next.length === waiting.length) return false;
      waiting = next;
    }
    const same = applyFields(fields, { where, open, written, dirty, held: this.digests });
    if (same === undefined) return false;
    this.lastUnchanged = unchanged + same;
    if (dirty.size === 0) return true;
    const changed = [...work].filter(([at]) => dirty.has(at));
    if (changed.some(([, w]) => w.rows.length === 0 || w.rows.length > MAX_SEGMENT_ROWS)) return false;
    const level = dirty.size > BURST_SEGMENTS ? BURST_LEVEL : LEVEL;
    const digestOf = (key: string) => written.get(key) ?? (this.digests.get(key) as string);
    const rebuilt = changed.map(([at, w]) =>
      segment(at, w.keys, w.rows, w.keys.map(digestOf), level).then((seg): [number, Segment] => [at, seg]),
    );
    // Everything above could still refuse; from here on the list changes.
    for (const [at, seg] of await Promise.all(rebuilt)) this.segments[at] = seg;
    for (const key of removed) {
      this.index.delete(key);
      this.digests.delete(key);
    }
    for (const [key, at] of placed) this.index.set(key, at);
    for (const [key, d] of written) this.digests.set(key, d);
    this.body = this.assemble();
    return true;
  }

  private assemble(): Body {
    const pieces: Piece[] = [this.open, ...this.segments, this.close];
    let crc = 0;
    let length = 0;
    const hash = createHash('sha1');
    for (const p of pieces) {
      crc = crc32Combine(crc, p.crc, p.length);
      length += p.length;
      hash.update(p.hash);
    }
    return {
      headGzip: Buffer.concat([GZIP_HEADER, ...pieces.map((p) => p.deflated)]),
      headLength: length,
      headCrc: crc,
      hash: hash.digest('base64url').slice(0, 20),
      builtAt: Date.now(),
      tails: new Map(),
    };
  }
}

/**
 * Applies `fields` to the working copies of a patch (SegmentedList.patch) and returns how many
 * changed nothing, or undefined when a row lacks a field (the patch is refused).
 */
function applyFields(
  fields: readonly FieldChange[],
  patch: {
    /** The segment of a key after the patch's row changes (undefined: not in the list). */
    where: (key: string) => number | undefined;
    open: (at: number) => { keys: string[]; rows: Buffer[] };
    /** Digests of rows the patch writes, and of the rows held. */
    written: Map<string, string>;
    held: ReadonlyMap<string, string>;
    dirty: Set<number>;
  },
): number | undefined {
  let unchanged = 0;
  for (const f of fields) {
    const at = patch.where(f.key);
    if (at === undefined) continue;
    const w = patch.open(at);
    const i = w.keys.indexOf(f.key);
    const row = JSON.parse((w.rows[i] as Buffer).toString()) as Record<string, unknown>;
    for (const [name, value] of Object.entries(f.fields)) {
      // A field the row lacks would be appended out of the shape's order: rebuild instead.
      if (!Object.hasOwn(row, name)) return undefined;
      row[name] = value;
    }
    const json = JSON.stringify(row);
    const d = digest(json);
    if ((patch.written.get(f.key) ?? patch.held.get(f.key)) === d) {
      unchanged++;
      continue;
    }
    w.rows[i] = Buffer.from(json);
    patch.written.set(f.key, d);
    patch.dirty.add(at);
  }
  return unchanged;
}

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

/*
 * CRC-32 of the concatenation A‖B from crc(A), crc(B) and B's length (zlib's crc32_combine):
 * appending n zero bytes to A is a linear map over GF(2), a 32×32 bit matrix. ZEROS[k] is the map
 * for 2^k zero bytes, computed once by squaring; a combine applies those of the bits of n
 * (a matrix-vector product each) instead of squaring matrices per call (zlib's older
 * crc32_combine), which would cost milliseconds on every patch of 130 segments.
 */
function gf2Times(mat: Uint32Array, vec: number): number {
  let sum = 0;
  for (let i = 0; vec !== 0; i++, vec >>>= 1) if (vec & 1) sum ^= mat[i] as number;
  return sum >>> 0;
}

function gf2Square(mat: Uint32Array): Uint32Array {
  const square = new Uint32Array(32);
  for (let n = 0; n < 32; n++) square[n] = gf2Times(mat, mat[n] as number);
  return square;
}

/** ZEROS[k] appends 2^k zero bytes; 48 entries cover any length a Buffer can have. */
const ZEROS: readonly Uint32Array[] = (() => {
  let op: Uint32Array = new Uint32Array(32);
  op[0] = 0xedb88320; // the CRC-32 polynomial: the map for one zero bit
  for (let n = 1; n < 32; n++) op[n] = 1 << (n - 1);
  for (let bit = 0; bit < 3; bit++) op = gf2Square(op); // one zero byte
  const table = [op];
  for (let k = 1; k < 48; k++) table.push((op = gf2Square(op)));
  return table;
})();

export function crc32Combine(crc1: number, crc2: number, len2: number): number {
  let c = crc1 >>> 0;
  for (let k = 0, len = len2; len > 0; k++, len = Math.floor(len / 2))
    if (len % 2 === 1) c = gf2Times(ZEROS[k] as Uint32Array, c);
  return (c ^ crc2) >>> 0;
}

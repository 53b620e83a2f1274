/**
 * A whole-list body (`{"data":[row,row,…]`, the head of a bodies.ts Body) kept as segments of
 * rows, each compressed on its own, so that a change of a few rows recompresses their segments
 * and nothing else (issue 12: rebuilding a 33k-row list cost about a CPU-second - query, JSON,
 * gzip - and every commit of the marketplace asked for one).
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
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { constants, crc32, deflateRaw, inflateRawSync } from 'node:zlib';
import { GZIP_HEADER, type Body, type VersionOf } from './bodies.js';

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
   * For a listed row: the key of the row before it in the list's order, as of the same snapshot
   * (null: it is the first). Needed to place a row the list does not hold yet.
   */
  after?: string | null;
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
  /** SHA-1 of the uncompressed bytes. */
  hash: Buffer;
}

interface Segment extends Piece {
  keys: string[];
  /** Byte length of each row's JSON, in `keys` order (the separating commas excluded). */
  lengths: number[];
}

async function piece(plain: Buffer): Promise<Piece> {
  return {
    deflated: await deflateRawAsync(plain, { level: 6, finishFlush: constants.Z_SYNC_FLUSH }),
    length: plain.length,
    crc: crc32(plain),
    hash: createHash('sha1').update(plain).digest(),
  };
}

/** Segment `index` of rows: a leading comma unless it is the first. */
async function segment(index: number, keys: string[], rows: Buffer[]): Promise<Segment> {
  const parts: Buffer[] = [];
  for (const [i, r] of rows.entries()) {
    if (i > 0 || index > 0) parts.push(COMMA);
    parts.push(r);
  }
  return { ...(await piece(Buffer.concat(parts))), keys, lengths: rows.map((r) => r.length) };
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
let openPiece: Promise<Piece> | undefined;
let closePiece: Promise<Piece> | undefined;

export class SegmentedList {
  /** The body as of the last build or patch. */
  body: Body;

  private constructor(
    private readonly segments: Segment[],
    /** Key → index of its segment. */
    private readonly index: Map<string, number>,
    private readonly open: Piece,
    private readonly close: Piece,
  ) {
    this.body = this.assemble();
  }

  /** A list of `rows`, in the order given (the database's). */
  static async build(rows: readonly ListRow[], rowsPerSegment = ROWS_PER_SEGMENT): Promise<SegmentedList> {
    const pending: Promise<Segment>[] = [];
    const index = new Map<string, number>();
    for (let at = 0; at < rows.length; at += rowsPerSegment) {
      const slice = rows.slice(at, at + rowsPerSegment);
      const n = pending.length;
      for (const r of slice) index.set(r.key, n);
      // Compressed on libuv's thread pool, in parallel: a full build must not stall requests.
      pending.push(
        segment(
          n,
          slice.map((r) => r.key),
          slice.map((r) => Buffer.from(r.json)),
        ),
      );
    }
    openPiece ??= piece(Buffer.from('{"data":['));
    closePiece ??= piece(Buffer.from(']'));
    const [open, close, segments] = await Promise.all([openPiece, closePiece, Promise.all(pending)]);
    return new SegmentedList(segments, index, open, close);
  }

  get size(): number {
    return this.index.size;
  }

  /**
   * Applies `changes` and returns true, or returns false and changes nothing when the list must
   * be rebuilt instead: a new row without its predecessor (`after`), or whose predecessor is not
   * in the list; a segment left empty, or grown past MAX_SEGMENT_ROWS. A change that removes a
   * key the list does not hold is already done.
   */
  async patch(changes: readonly RowChange[]): Promise<boolean> {
    /** Working copies of the touched segments: keys and rows (JSON bytes) after the changes. */
    const work = new Map<number, { keys: string[]; rows: Buffer[] }>();
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
    // One change per key, the last (a read names each row once; this keeps a patch well defined).
    for (const c of new Map(changes.map((x) => [x.key, x])).values()) {
      const at = this.index.get(c.key);
      if (at === undefined) {
        if (c.json !== null) added.push(c);
        continue;
      }
      const w = open(at);
      const i = w.keys.indexOf(c.key);
      if (c.json === null) {
        w.keys.splice(i, 1);
        w.rows.splice(i, 1);
        removed.push(c.key);
      } else w.rows[i] = Buffer.from(c.json);
    }
    // New rows go right after their predecessor in the database's order (read in the same
    // snapshot, so it is in the list or is itself one of the new rows): placed in rounds until
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
        const i = c.after === null ? 0 : w.keys.indexOf(c.after) + 1;
        w.keys.splice(i, 0, c.key);
        w.rows.splice(i, 0, Buffer.from(c.json as string));
        placed.set(c.key, at);
      }
      if (next.length === waiting.length) return false;
      waiting = next;
    }
    if (work.size === 0) return true;
    for (const w of work.values()) if (w.rows.length === 0 || w.rows.length > MAX_SEGMENT_ROWS) return false;
    const rebuilt = [...work].map(([at, w]) => segment(at, w.keys, w.rows).then((seg): [number, Segment] => [at, seg]));
    // Everything above could still refuse; from here on the list changes.
    for (const [at, seg] of await Promise.all(rebuilt)) this.segments[at] = seg;
    for (const key of removed) this.index.delete(key);
    for (const [key, at] of placed) this.index.set(key, at);
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

/** Where a patched list body gets its rows: all of them, or those changed since a snapshot. */
export interface ListSource {
  /** Every row of the list, in its order, and the snapshot they were read in. */
  full(): Promise<{ snapshot: string; rows: ListRow[] }>;
  /** The rows written by transactions `snapshot` did not see (or null: gone), and the new snapshot. */
  since(snapshot: string): Promise<{ snapshot: string; changes: RowChange[] }>;
}

interface ListEntry {
  list: SegmentedList;
  /** The snapshot the list reflects: the next patch reads what it did not see. */
  snapshot: string;
  version: number;
  /** The resets count (untagged notifications, reconnections) as of the last full build. */
  resets: number;
  at: number;
}

/**
 * Whole-list bodies patched in place (SegmentedList): when what the list depends on moved, only
 * the rows written since the snapshot of its last read are fetched and their segments
 * recompressed, so a body follows every commit of its marketplace, and every derive transaction
 * (statistics, outlier verdicts, liquidity: all in the rows the view joins), within about
 * `minAgeMs`. It is rebuilt from every row the first time, when an untagged notification or a
 * reconnection said anything may have changed (rows deleted included: a patch sees only rows
 * that exist), and when a patch is refused (SegmentedList.patch). Serving rules as
 * VersionedCache's: single-flight per list, the previous body served while a refresh runs.
 */
export class ListBodyCache {
  readonly stats = { hits: 0, misses: 0, patches: 0, rebuilds: 0 };
  private readonly entries = new Map<string, ListEntry>();
  private readonly building = new Map<string, Promise<Body>>();

  constructor(
    /** The version of what a list depends on (its tags and the derived values). */
    private readonly version: VersionOf,
    /** Untagged notifications and reconnections (ReadModelVersion.resets): rebuild when it moved. */
    private readonly resets: () => number,
    private readonly minAgeMs = 1_000,
  ) {}

  /** The list's body; `fresh`: never an outdated one (waits for the refresh), as VersionedCache.fresh. */
  async get(name: string, source: ListSource, fresh = false): Promise<Body> {
    const e = this.entries.get(name);
    const v = this.version(name);
    if (e && (e.version === v || Date.now() - e.at < this.minAgeMs)) {
      this.stats.hits++;
      return e.list.body;
    }
    this.stats.misses++;
    let p = this.building.get(name);
    if (!p) {
      p = this.refresh(name, source, e, v).finally(() => this.building.delete(name));
      this.building.set(name, p);
    }
    if (!e || fresh) return p;
    // A failed refresh is retried by the next request.
    p.catch(() => undefined);
    return e.list.body;
  }

  private async refresh(name: string, source: ListSource, e: ListEntry | undefined, version: number): Promise<Body> {
    const resets = this.resets();
    if (e && e.resets === resets) {
      const { snapshot, changes } = await source.since(e.snapshot);
      if (await e.list.patch(changes)) {
        this.stats.patches++;
        this.entries.set(name, { ...e, snapshot, version, at: Date.now() });
        return e.list.body;
      }
    }
    const { snapshot, rows } = await source.full();
    const list = await SegmentedList.build(rows);
    this.stats.rebuilds++;
    this.entries.set(name, { list, snapshot, version, resets, at: Date.now() });
    return list.body;
  }
}

/*
 * CRC-32 of the concatenation A‖B from crc(A), crc(B) and B's length (zlib's crc32_combine):
 * appending len(B) zero bytes to A is a linear map over GF(2), applied by squaring the one-zero-bit
 * operator matrix log2(len) times.
 */
function gf2Times(mat: Uint32Array, vec: number): number {
  let sum = 0;
  for (let i = 0; vec !== 0; i++, vec >>>= 1) if (vec & 1) sum ^= mat[i] as number;
  return sum >>> 0;
}

function gf2Square(square: Uint32Array, mat: Uint32Array): void {
  for (let n = 0; n < 32; n++) square[n] = gf2Times(mat, mat[n] as number);
}

export function crc32Combine(crc1: number, crc2: number, len2: number): number {
  if (len2 <= 0) return crc1 >>> 0;
  const even = new Uint32Array(32);
  const odd = new Uint32Array(32);
  odd[0] = 0xedb88320; // the CRC-32 polynomial: the operator for one zero bit
  for (let n = 1, row = 1; n < 32; n++, row <<= 1) odd[n] = row;
  gf2Square(even, odd); // two zero bits
  gf2Square(odd, even); // four zero bits
  let c = crc1 >>> 0;
  let len = len2;
  // The first squaring below gives the operator for one zero byte, then two, four, …
  for (;;) {
    gf2Square(even, odd);
    if (len % 2 === 1) c = gf2Times(even, c);
    len = Math.floor(len / 2);
    if (len === 0) break;
    gf2Square(odd, even);
    if (len % 2 === 1) c = gf2Times(odd, c);
    len = Math.floor(len / 2);
    if (len === 0) break;
  }
  return (c ^ crc2) >>> 0;
}

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
import { GZIP_HEADER, type Body } from './bodies.js';
import { crc32Combine } from './crc32-combine.js';

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
  /** Its rows' digests joined in order: what the body's content hash is taken over (assemble). */
  digests: string;
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
  const joined = digests.join('');
  const hash = sha1(joined);
  return {
    ...(await piece(Buffer.concat(parts), hash, level)),
    keys,
    digests: joined,
    lengths: rows.map((r) => r.length),
  };
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
    for (const p of pieces) {
      crc = crc32Combine(crc, p.crc, p.length);
      length += p.length;
    }
    // Over every row's digest in list order, not over the segments' hashes: a list built at once
    // and one grown by patches split the same rows into other segments, and two API processes
    // holding the same rows must give them the same ETag.
    const hash = createHash('sha1').update(this.open.hash);
    for (const seg of this.segments) hash.update(seg.digests);
    hash.update(this.close.hash);
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

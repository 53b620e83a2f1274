/**
 * The combined catalogue (spec 4.3/4.4) held as bytes. Twelve marketplaces × 35k entries as JS
 * objects were 400k+ objects for the garbage collector to walk on every major collection, and
 * re-serialising a hundred items per POST cost more than sending them. So the catalogue is one
 * Buffer whose entry per key is that item's whole member of `items`, `"<key>":{"<market>": …}`,
 * with an offset table, the place of each marketplace's object inside each member, and a Map from
 * key to entry number (small integers, nothing to trace): the common POST of 100 items is 100
 * slices, a selection of marketplaces is assembled from the places, nothing is serialised per
 * request. The marketplaces are not held a second time on their own: a change of one marketplace
 * reads it (a transient CatalogueShard) and splices it into a new catalogue.
 */

/** One marketplace's entries, while it is spliced into a Catalogue. */
export class CatalogueShard {
  constructor(
    private readonly index: Map<string, number>,
    readonly bytes: Buffer,
    readonly offsets: Uint32Array,
  ) {}

  /** Entries as (key, JSON of that marketplace's object); a repeated key keeps its last entry. */
  static from(entries: Iterable<readonly [string, string]>): CatalogueShard {
    const index = new Map<string, number>();
    const texts: string[] = [];
    for (const [key, json] of entries) {
      const at = index.get(key);
      if (at === undefined) {
        index.set(key, texts.length);
        texts.push(json);
      } else texts[at] = json;
    }
    const offsets = new Uint32Array(texts.length + 1);
    let end = 0;
    texts.forEach((t, i) => {
      end += Buffer.byteLength(t);
      offsets[i + 1] = end;
    });
    return new CatalogueShard(index, Buffer.from(texts.join('')), offsets);
  }

  get size(): number {
    return this.index.size;
  }

  keys(): IterableIterator<string> {
    return this.index.keys();
  }

  /** The entry number of `key` (its bytes: `offsets[i]` to `offsets[i + 1]`). */
  entryOf(key: string): number | undefined {
    return this.index.get(key);
  }

  /** The entry's JSON bytes (a view, not a copy). */
  get(key: string): Buffer | undefined {
    const i = this.index.get(key);
    return i === undefined ? undefined : this.bytes.subarray(this.offsets[i], this.offsets[i + 1]);
  }

  /** Bytes held (for the memory budget). */
  byteSize(): number {
    return this.bytes.length + this.offsets.byteLength;
  }
}

const OPEN = Buffer.from('{');
const CLOSE = Buffer.from('}');
const COMMA = Buffer.from(',');
const EMPTY = Buffer.alloc(0);
const BRACE = 0x7b;

/**
 * Every marketplace's catalogue as one: the members of `items` in key order (UTF-16 code units,
 * so that every process holding the same data holds the same bytes), each with its marketplaces
 * in `markets` order.
 */
export class Catalogue {
  private constructor(
    readonly markets: readonly string[],
    private readonly keyList: readonly string[],
    private readonly index: Map<string, number>,
    private readonly bytes: Buffer,
    /** Member i is bytes[ends[i], ends[i + 1]). */
    private readonly ends: Uint32Array,
    /** At (i × markets + m) × 2: start and end of marketplace m's object in member i; equal: absent. */
    private readonly places: Uint32Array,
  ) {}

  static empty(markets: readonly string[]): Catalogue {
    return new Catalogue(markets, [], new Map(), EMPTY, new Uint32Array(1), new Uint32Array(0));
  }

  get size(): number {
    return this.keyList.length;
  }

  keys(): Iterable<string> {
    return this.keyList;
  }

  /** The member `"<key>":{…}` with every marketplace that lists the item (a view, not a copy). */
  member(key: string): Buffer | undefined {
    const i = this.index.get(key);
    return i === undefined ? undefined : this.bytes.subarray(this.ends[i], this.ends[i + 1]);
  }

  /**
   * The member of `key` with only the marketplaces `at` (indexes into `markets`), in that order;
   * undefined when none of them lists the item.
   */
  memberOf(key: string, at: readonly number[]): Buffer | undefined {
    const i = this.index.get(key);
    if (i === undefined) return undefined;
    const parts: Buffer[] = [];
    for (const m of at) {
      const p = (i * this.markets.length + m) * 2;
      const start = this.places[p] as number;
      const end = this.places[p + 1] as number;
      if (start === end) continue;
      parts.push(Buffer.from(`${parts.length === 0 ? '' : ','}${JSON.stringify(this.markets[m])}:`));
      parts.push(this.bytes.subarray(start, end));
    }
    if (parts.length === 0) return undefined;
    return Buffer.concat([Buffer.from(`${JSON.stringify(key)}:{`), ...parts, CLOSE]);
  }

  /**
   * This catalogue with `market`'s entries replaced by `shard`'s: the other marketplaces' objects
   * are copied from this one's bytes, an item no marketplace lists any more is left out.
   */
  with(market: string, shard: CatalogueShard): Catalogue {
    const M = this.markets.length;
    const at = this.markets.indexOf(market);
    if (at < 0) throw new Error(`catalogue: unknown marketplace ${market}`);
    const keys = new Set<string>();
    for (const [i, k] of this.keyList.entries()) {
      for (let m = 0; m < M; m++) {
        const p = (i * M + m) * 2;
        if (m !== at && this.places[p] !== this.places[p + 1]) {
          keys.add(k);
          break;
        }
      }
    }
    for (const k of shard.keys()) keys.add(k);
    const keyList = [...keys].sort();
    const n = keyList.length;
    const keyJson = keyList.map((k) => Buffer.from(`${JSON.stringify(k)}:`));
    const names = this.markets.map((m) => Buffer.from(`${JSON.stringify(m)}:`));
    // Where each object comes from: this catalogue's bytes or the shard's, [start, end).
    const fromShard = new Uint8Array(n * M);
    const source = new Uint32Array(n * M * 2);
    let total = 0;
    for (let i = 0; i < n; i++) {
      const k = keyList[i] as string;
      const old = this.index.get(k);
      let size = (keyJson[i] as Buffer).length + 2;
      let held = 0;
      for (let m = 0; m < M; m++) {
        const q = i * M + m;
        let start = 0;
        let end = 0;
        if (m === at) {
          const e = shard.entryOf(k);
          if (e !== undefined) {
            start = shard.offsets[e] as number;
            end = shard.offsets[e + 1] as number;
            fromShard[q] = 1;
          }
        } else if (old !== undefined) {
          const p = (old * M + m) * 2;
          start = this.places[p] as number;
          end = this.places[p + 1] as number;
        }
        source[q * 2] = start;
        source[q * 2 + 1] = end;
        if (start === end) continue;
        size += (held++ > 0 ? 1 : 0) + (names[m] as Buffer).length + end - start;
      }
      total += size;
    }
    const bytes = Buffer.allocUnsafe(total);
    const ends = new Uint32Array(n + 1);
    const places = new Uint32Array(n * M * 2);
    const index = new Map<string, number>();
    let w = 0;
    for (let i = 0; i < n; i++) {
      index.set(keyList[i] as string, i);
      w += (keyJson[i] as Buffer).copy(bytes, w);
      bytes[w++] = BRACE;
      let held = 0;
      for (let m = 0; m < M; m++) {
        const q = i * M + m;
        const start = source[q * 2] as number;
        const end = source[q * 2 + 1] as number;
        if (start === end) continue;
        if (held++ > 0) bytes[w++] = COMMA[0] as number;
        w += (names[m] as Buffer).copy(bytes, w);
        places[q * 2] = w;
        w += (fromShard[q] ? shard.bytes : this.bytes).copy(bytes, w, start, end);
        places[q * 2 + 1] = w;
      }
      bytes[w++] = CLOSE[0] as number;
      ends[i + 1] = w;
    }
    return new Catalogue(this.markets, keyList, index, bytes, ends, places);
  }
}

/**
 * The `items` object as JSON bytes: every member of `catalogue` (or only those of `only` it
 * holds), with every marketplace or only those at `markets` (indexes into its marketplaces),
 * between `head` and `tail` (an answer's envelope): one copy of the answer's bytes per request.
 */
export function itemsJson(
  catalogue: Catalogue,
  only?: Iterable<string>,
  head: Buffer = EMPTY,
  tail: Buffer = EMPTY,
  markets?: readonly number[],
): Buffer {
  const parts: Buffer[] = [head, OPEN];
  let n = 0;
  for (const k of only ?? catalogue.keys()) {
    const member = markets ? catalogue.memberOf(k, markets) : catalogue.member(k);
    if (member === undefined) continue;
    if (n++ > 0) parts.push(COMMA);
    parts.push(member);
  }
  parts.push(CLOSE, tail);
  return Buffer.concat(parts);
}

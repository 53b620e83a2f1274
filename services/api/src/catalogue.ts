/**
 * The combined catalogue (spec 4.3/4.4) held as bytes. Twelve marketplaces × 35k entries as JS
 * objects were 400k+ objects for the garbage collector to walk on every major collection, and
 * re-serialising a hundred items per POST cost more than sending them. Here one marketplace is one
 * Buffer of concatenated JSON entries, an offset table, and a Map from key to entry number (small
 * integers, nothing to trace). The marketplaces of one request are combined into one shard whose
 * entry per key is that item's whole member of `items`, `"<key>":{"<market>": …}`, so the common
 * POST of 100 items is 100 slices, not 1,200, with nothing serialised per request; the combination
 * of every marketplace is cached per data version.
 */

export class CatalogueShard {
  constructor(
    private readonly index: Map<string, number>,
    private readonly bytes: Buffer,
    private readonly offsets: Uint32Array,
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

/**
 * The shards of several marketplaces as one: each key (of `only`, or of any shard in shard order)
 * → the member `"<key>":{"<market>": entry, …}` for the shards that hold it; keys held by none are
 * left out.
 */
export function combine(
  shards: readonly { market: string; shard: CatalogueShard }[],
  only?: Iterable<string>,
): CatalogueShard {
  let keys = only;
  if (!keys) {
    const all = new Set<string>();
    for (const { shard } of shards) for (const k of shard.keys()) all.add(k);
    keys = all;
  }
  const first = shards.map(({ market }) => Buffer.from(`{${JSON.stringify(market)}:`));
  const next = shards.map(({ market }) => Buffer.from(`,${JSON.stringify(market)}:`));
  const index = new Map<string, number>();
  const parts: Buffer[] = [];
  const ends: number[] = [0];
  let end = 0;
  for (const k of keys) {
    if (index.has(k)) continue;
    let held = 0;
    for (let i = 0; i < shards.length; i++) {
      const entry = (shards[i] as { shard: CatalogueShard }).shard.get(k);
      if (entry === undefined) continue;
      if (held === 0) {
        const name = Buffer.from(`${JSON.stringify(k)}:`);
        parts.push(name);
        end += name.length;
      }
      const prefix = (held++ === 0 ? first[i] : next[i]) as Buffer;
      parts.push(prefix, entry);
      end += prefix.length + entry.length;
    }
    if (held === 0) continue;
    parts.push(CLOSE);
    end += 1;
    index.set(k, ends.length - 1);
    ends.push(end);
  }
  return new CatalogueShard(index, Buffer.concat(parts, end), Uint32Array.from(ends));
}

/**
 * The `items` object as JSON bytes: every member of `combined` (or only those of `only` it holds),
 * between `head` and `tail` (an answer's envelope): one copy of the answer's bytes per request.
 */
export function itemsJson(
  combined: CatalogueShard,
  only?: Iterable<string>,
  head: Buffer = EMPTY,
  tail: Buffer = EMPTY,
): Buffer {
  const parts: Buffer[] = [head, OPEN];
  let n = 0;
  for (const k of only ?? combined.keys()) {
    const member = combined.get(k);
    if (member === undefined) continue;
    if (n++ > 0) parts.push(COMMA);
    parts.push(member);
  }
  parts.push(CLOSE, tail);
  return Buffer.concat(parts);
}

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
const COMMA_BYTE = 0x2c;
const OPEN_BYTE = 0x7b;

/** How one member of a splice is made: its head, the runs it keeps, the shard's entry (-1: none), its size. */
interface MemberPlan {
  head: Buffer;
  /** Before `at` and after it, [start, end) each in the old bytes; equal: none. */
  runs: Uint32Array;
  entry: number;
  size: number;
}
const CLOSE_BYTE = 0x7d;

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

  /** The position of `key`'s member, for memberLength and copyMember; undefined: no such item. */
  positionOf(key: string): number | undefined {
    return this.index.get(key);
  }

  memberLength(i: number): number {
    return (this.ends[i + 1] as number) - (this.ends[i] as number);
  }

  /** Copies member `i` into `target` at `at`; returns where it ends there. */
  copyMember(i: number, target: Buffer, at: number): number {
    return at + this.bytes.copy(target, at, this.ends[i], this.ends[i + 1]);
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
   * are copied from this one's bytes, an item no marketplace lists any more is left out. Per
   * member, the marketplaces before and after `market` are one run of bytes each; when no item
   * comes or goes, the members whose entry did not change are copied as whole stretches, so a
   * splice after a few changes is a few copies, not one per item.
   */
  with(market: string, shard: CatalogueShard): Catalogue {
    const at = this.markets.indexOf(market);
    if (at < 0) throw new Error(`catalogue: unknown marketplace ${market}`);
    const names = this.markets.map((m) => Buffer.from(`${JSON.stringify(m)}:`));
    const keys = this.keysWith(at, shard);
    if (!keys) return this.withSameKeys(at, shard, names);
    const { keyList, index, fromOld } = keys;
    const M = this.markets.length;
    const n = keyList.length;
    const members = keyList.map((k, i) => this.memberPlan(fromOld[i] as number, k, at, shard, names));
    const bytes = Buffer.allocUnsafe(members.reduce((t, m) => t + m.size, 0));
    const ends = new Uint32Array(n + 1);
    const places = new Uint32Array(n * M * 2);
    let w = 0;
    for (let i = 0; i < n; i++) {
      w = this.writeMember(
        members[i] as MemberPlan,
        fromOld[i] as number,
        i,
        at,
        shard,
        names[at] as Buffer,
        bytes,
        w,
        places,
      );
      ends[i + 1] = w;
    }
    return new Catalogue(this.markets, keyList, index, bytes, ends, places);
  }

  /** `with` when every key stays: unchanged members are copied in stretches, their places moved. */
  private withSameKeys(at: number, shard: CatalogueShard, names: readonly Buffer[]): Catalogue {
    const M = this.markets.length;
    const n = this.keyList.length;
    const plans: (MemberPlan | undefined)[] = new Array<MemberPlan | undefined>(n);
    let total = this.bytes.length;
    for (let i = 0; i < n; i++) {
      const k = this.keyList[i] as string;
      const e = shard.entryOf(k);
      const p = (i * M + at) * 2;
      const xs = this.places[p] as number;
      const xe = this.places[p + 1] as number;
      if (e === undefined && xs === xe) continue;
      if (e !== undefined && xs !== xe) {
        const ns = shard.offsets[e] as number;
        const ne = shard.offsets[e + 1] as number;
        if (ne - ns === xe - xs && shard.bytes.compare(this.bytes, xs, xe, ns, ne) === 0) continue;
      }
      const plan = this.memberPlan(i, k, at, shard, names);
      plans[i] = plan;
      total += plan.size - ((this.ends[i + 1] as number) - (this.ends[i] as number));
    }
    const bytes = Buffer.allocUnsafe(total);
    const ends = new Uint32Array(n + 1);
    const places = this.places.slice();
    let w = 0;
    let from = 0;
    for (let i = 0; i < n; i++) {
      const plan = plans[i];
      const start = this.ends[i] as number;
      if (!plan) {
        const delta = w + (start - from) - start;
        // Absent pairs (start = end) stay as they are: only the places of present objects move.
        if (delta !== 0)
          for (let q = i * M * 2; q < (i + 1) * M * 2; q += 2)
            if (places[q] !== places[q + 1]) {
              places[q] = (places[q] as number) + delta;
              places[q + 1] = (places[q + 1] as number) + delta;
            }
        ends[i + 1] = (this.ends[i + 1] as number) + delta;
        continue;
      }
      w += this.bytes.copy(bytes, w, from, start);
      places.fill(0, i * M * 2, (i + 1) * M * 2);
      w = this.writeMember(plan, i, i, at, shard, names[at] as Buffer, bytes, w, places);
      ends[i + 1] = w;
      from = this.ends[i + 1] as number;
    }
    this.bytes.copy(bytes, w, from);
    return new Catalogue(this.markets, this.keyList, this.index, bytes, ends, places);
  }

  /** How member `k` is made (o: its member here, -1: none) and its size in bytes. */
  private memberPlan(o: number, k: string, at: number, shard: CatalogueShard, names: readonly Buffer[]): MemberPlan {
    const runs = new Uint32Array(4);
    let head: Buffer;
    if (o >= 0) {
      const first = this.ends[o] as number;
      head = this.bytes.subarray(first, first + this.headOf(o, names));
      this.runsOf(o, at, names, runs, 0);
    } else head = Buffer.from(`${JSON.stringify(k)}:{`);
    const entry = shard.entryOf(k) ?? -1;
    const before = runs[0] !== runs[1];
    const after = runs[2] !== runs[3];
    let size = head.length + (runs[1] as number) - (runs[0] as number) + (runs[3] as number) - (runs[2] as number) + 1;
    if (entry >= 0)
      size +=
        (before ? 1 : 0) +
        (names[at] as Buffer).length +
        (shard.offsets[entry + 1] as number) -
        (shard.offsets[entry] as number);
    if (after && (before || entry >= 0)) size += 1;
    return { head, runs, entry, size };
  }

  /** Writes member i (o: its member here) into `bytes` at `w`, its places into `places`; returns the end. */
  private writeMember(
    plan: MemberPlan,
    o: number,
    i: number,
    at: number,
    shard: CatalogueShard,
    name: Buffer,
    bytes: Buffer,
    w: number,
    places: Uint32Array,
  ): number {
    const M = this.markets.length;
    const [bs, be, as, ae] = plan.runs as unknown as [number, number, number, number];
    w += plan.head.copy(bytes, w);
    // Places move with their run: by how far the run's first byte moved.
    if (bs !== be) {
      this.movePlaces(o, 0, at, bs, w, places, i);
      w += this.bytes.copy(bytes, w, bs, be);
    }
    const e = plan.entry;
    if (e >= 0) {
      if (bs !== be) bytes[w++] = COMMA_BYTE;
      w += name.copy(bytes, w);
      places[(i * M + at) * 2] = w;
      w += shard.bytes.copy(bytes, w, shard.offsets[e], shard.offsets[e + 1]);
      places[(i * M + at) * 2 + 1] = w;
    }
    if (as !== ae) {
      if (bs !== be || e >= 0) bytes[w++] = COMMA_BYTE;
      this.movePlaces(o, at + 1, M, as, w, places, i);
      w += this.bytes.copy(bytes, w, as, ae);
    }
    bytes[w++] = CLOSE_BYTE;
    return w;
  }

  /** The keys after replacing marketplace `at` by `shard`, and each one's member here (-1: new); undefined: the same keys. */
  private keysWith(
    at: number,
    shard: CatalogueShard,
  ): { keyList: readonly string[]; index: Map<string, number>; fromOld: Int32Array } | undefined {
    const M = this.markets.length;
    /** Whether member i lists a marketplace other than `at`. */
    const othersHold = (i: number) => {
      for (let m = 0; m < M; m++) {
        const p = (i * M + m) * 2;
        if (m !== at && this.places[p] !== this.places[p + 1]) return true;
      }
      return false;
    };
    let same = true;
    for (const k of shard.keys())
      if (!this.index.has(k)) {
        same = false;
        break;
      }
    if (same)
      for (let i = 0; i < this.keyList.length; i++)
        if (!othersHold(i) && shard.entryOf(this.keyList[i] as string) === undefined) {
          same = false;
          break;
        }
    if (same) return undefined;
    const keys = new Set<string>();
    this.keyList.forEach((k, i) => {
      if (othersHold(i)) keys.add(k);
    });
    for (const k of shard.keys()) keys.add(k);
    const keyList = [...keys].sort();
    const index = new Map<string, number>();
    keyList.forEach((k, i) => index.set(k, i));
    return { keyList, index, fromOld: Int32Array.from(keyList, (k) => this.index.get(k) ?? -1) };
  }

  /** Bytes of member o's head, `"<key>":{`: up to its first marketplace's name. */
  private headOf(o: number, names: readonly Buffer[]): number {
    const M = this.markets.length;
    for (let m = 0; m < M; m++) {
      const p = (o * M + m) * 2;
      if (this.places[p] !== this.places[p + 1])
        return (this.places[p] as number) - (names[m] as Buffer).length - (this.ends[o] as number);
    }
    throw new Error('catalogue: a member without a marketplace');
  }

  /**
   * Into out[at4 … at4 + 3]: the byte runs of member o's marketplaces before `at` (from the first
   * one's name to the last one's end) and after it; a run with none is [0, 0).
   */
  private runsOf(o: number, at: number, names: readonly Buffer[], out: Uint32Array, at4: number): void {
    const M = this.markets.length;
    const run = (from: number, to: number, slot: number) => {
      let start = -1;
      let end = 0;
      for (let m = from; m < to; m++) {
        const p = (o * M + m) * 2;
        if (this.places[p] === this.places[p + 1]) continue;
        if (start < 0) start = (this.places[p] as number) - (names[m] as Buffer).length;
        end = this.places[p + 1] as number;
      }
      out[slot] = start < 0 ? 0 : start;
      out[slot + 1] = start < 0 ? 0 : end;
    };
    run(0, at, at4);
    run(at + 1, M, at4 + 2);
  }

  /** Places of member o's marketplaces [from, to) into new member i, their run moved from `oldStart` to `newStart`. */
  private movePlaces(
    o: number,
    from: number,
    to: number,
    oldStart: number,
    newStart: number,
    places: Uint32Array,
    i: number,
  ): void {
    const M = this.markets.length;
    for (let m = from; m < to; m++) {
      const p = (o * M + m) * 2;
      if (this.places[p] === this.places[p + 1]) continue;
      const q = (i * M + m) * 2;
      places[q] = (this.places[p] as number) - oldStart + newStart;
      places[q + 1] = (this.places[p + 1] as number) - oldStart + newStart;
    }
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
  if (!markets) return membersInto(catalogue, only ?? catalogue.keys(), head, tail);
  const parts: Buffer[] = [head, OPEN];
  let n = 0;
  for (const k of only ?? catalogue.keys()) {
    const member = catalogue.memberOf(k, markets);
    if (member === undefined) continue;
    if (n++ > 0) parts.push(COMMA);
    parts.push(member);
  }
  parts.push(CLOSE, tail);
  return Buffer.concat(parts);
}

/**
 * itemsJson with every marketplace: the members are copied straight from the catalogue's bytes,
 * sized first, so the answer costs one allocation and one copy.
 */
export function membersInto(catalogue: Catalogue, keys: Iterable<string>, head: Buffer, tail: Buffer): Buffer {
  const found: number[] = [];
  let size = head.length + 2 + tail.length;
  for (const k of keys) {
    const i = catalogue.positionOf(k);
    if (i === undefined) continue;
    size += catalogue.memberLength(i) + (found.length > 0 ? 1 : 0);
    found.push(i);
  }
  const out = Buffer.allocUnsafe(size);
  let at = head.copy(out, 0);
  out[at++] = OPEN_BYTE;
  for (let j = 0; j < found.length; j++) {
    if (j > 0) out[at++] = COMMA_BYTE;
    at = catalogue.copyMember(found[j] as number, out, at);
  }
  out[at++] = CLOSE_BYTE;
  at += tail.copy(out, at);
  return out.subarray(0, at);
}

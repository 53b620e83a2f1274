/**
 * Large bodies are serialised once per data change and kept compressed; a request serves bytes.
 * The envelope's per-key fields (requestor, plan) end every body, so each answer is the shared
 * head plus a per-request tail, sent as ONE gzip member (RFC 1952):
 *
 *   gzip header │ deflate(head), sync-flushed, no final block │ deflate(tail), final │ CRC-32, ISIZE
 *   └──────────── cached per body version ────────────────────┘ └─ memoised per key tail ─┘
 *
 * A sync flush ends the head's deflate data on a byte boundary without closing the stream, so a
 * second, independent deflate stream (it never refers back into the head) simply continues it;
 * the trailer's CRC-32 continues the head's CRC over the tail. Two gzip members, which RFC 1952
 * allows, were what we sent before: curl and Chromium decode only the first and cut the JSON.
 *
 * Only the compressed head is kept: the plain JSON of the catalogue and the six lists was three
 * quarters of the API's memory. A client that does not accept gzip gets the head inflated as a
 * stream while it is sent (CPU for the rare client, not memory for every one).
 */
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { constants, crc32, createInflateRaw, deflateRaw, deflateRawSync, type InflateRaw } from 'node:zlib';

const deflateRawAsync = promisify(deflateRaw);

/** gzip member header: magic, CM=deflate, no flags, no mtime, XFL 0, OS unknown (RFC 1952 §2.3). */
export const GZIP_HEADER = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
/** An empty final deflate block (fixed Huffman, end-of-block only): closes a sync-flushed stream. */
const EMPTY_FINAL_BLOCK = Buffer.from([0x03, 0x00]);

export interface Body {
  /** gzip header + the head's deflate data, sync-flushed and not final: the start of one member. */
  headGzip: Buffer;
  /** Bytes of the head uncompressed. */
  headLength: number;
  /** CRC-32 of the uncompressed head, continued over each tail for the member's trailer. */
  headCrc: number;
  /** Content hash of the head, the base of the ETag. */
  hash: string;
  builtAt: number;
  /** Per-request tails already seen for this body (see `tailOf`). */
  tails: Map<string, Tail>;
  /**
   * For a marketplace's list: when its upstream list was last confirmed complete (the last
   * complete listings cycle's end, upstream time), as of the data in the body; null: never.
   */
  confirmedAt?: Date | null;
}

/** The per-key end of a body: plain, and as the rest of the body's gzip member; the ETag of head + tail. */
export interface Tail {
  plain: Buffer;
  /** Final deflate data of the tail plus the member's trailer (CRC-32 and length of head + tail). */
  gzip: Buffer;
  etag: string;
}

const TIMESTAMP = /"timestamp":"[^"]*"/;

/** At most this many distinct tails per body version; then the memo starts over. */
const MAX_TAILS = 4_096;

/**
 * A tail depends only on the key's customer and plan and the body's build time, so a body version
 * meets each key's tail many times: it is hashed and compressed once, not per request (a zlib
 * stream per request cost more than serving the megabyte it trails).
 */
export function tailOf(body: Body, tail: string): Tail {
  let t = body.tails.get(tail);
  if (t) return t;
  if (body.tails.size >= MAX_TAILS) body.tails.clear();
  const plain = Buffer.from(tail);
  const trailer = Buffer.alloc(8);
  trailer.writeUInt32LE(crc32(plain, body.headCrc) >>> 0, 0);
  // ISIZE is the length modulo 2^32 (RFC 1952 §2.3.1).
  trailer.writeUInt32LE((body.headLength + plain.length) % 0x1_0000_0000, 4);
  t = {
    plain,
    gzip: Buffer.concat([deflateRawSync(plain, { level: 1 }), trailer]),
    // Without the envelope's timestamp (when this process built the body), the tag names the
    // content: every API process serving the same data gives the same tag, so a client behind a
    // load balancer keeps its 304s. Weak, as the bytes differ by that timestamp.
    etag: `W/"${body.hash}.${createHash('sha1').update(tail.replace(TIMESTAMP, '')).digest('base64url').slice(0, 10)}"`,
  };
  body.tails.set(tail, t);
  return t;
}

/** Compresses on libuv's thread pool: a 5 MB body must not stall every other request. */
export async function makeBody(head: string | Buffer): Promise<Body> {
  const buf = typeof head === 'string' ? Buffer.from(head) : head;
  const deflated = await deflateRawAsync(buf, { level: 6, finishFlush: constants.Z_SYNC_FLUSH });
  return {
    headGzip: Buffer.concat([GZIP_HEADER, deflated]),
    headLength: buf.length,
    headCrc: crc32(buf),
    hash: createHash('sha1').update(buf).digest('base64url').slice(0, 20),
    builtAt: Date.now(),
    tails: new Map(),
  };
}

/** The head uncompressed, as a stream (for clients that do not accept gzip). */
export function inflateHead(body: Body): InflateRaw {
  const inflate = createInflateRaw();
  inflate.write(body.headGzip.subarray(GZIP_HEADER.length));
  inflate.end(EMPTY_FINAL_BLOCK);
  return inflate;
}

/** The read-model version a cached value of `name` depends on (see ReadModelVersion). */
export type VersionOf = (name: string) => number;

/**
 * The derived values' version (ReadModelVersion.derived) and how long a cached value may lag
 * behind it: statistics, liquidity and the market cap move with every applied cycle marker, and
 * rebuilding every body for each was the API's largest cost under load.
 */
export interface DerivedVersion {
  version: () => number;
  maxLagMs: number;
  /** How often liquidity scores moved (ReadModelVersion.scores). @default version */
  scores?: () => number;
}

/** Whether a value built at `at` for versions (`version`, `derived`) may still be served. */
function current(
  e: { version: number; derived: number; at: number },
  v: number,
  d: number,
  minAgeMs: number,
  maxLagMs: number,
): boolean {
  const age = Date.now() - e.at;
  return (e.version === v || age < minAgeMs) && (e.derived === d || age < maxLagMs);
}

/**
 * Values by name (bodies, catalogue shards), rebuilt when the read model's version moved, and at
 * most every `minAgeMs`: a burst of batches must not rebuild megabytes per batch; when only the
 * derived values moved, at most every `derived.maxLagMs`. Single-flight per name; while a rebuild
 * runs, the previous value is served (it is at most seconds old).
 */
export class VersionedCache<T> {
  /** Lookups answered from the cache and lookups that had to build (for /metrics). */
  readonly stats = { hits: 0, misses: 0 };
  private readonly entries = new Map<
    string,
    { value: T; version: number; derived: number; at: number; cost: number }
  >();
  private readonly building = new Map<string, Promise<T>>();

  constructor(
    private readonly version: VersionOf,
    private readonly minAgeMs = 1_000,
    /** Absent: derived values are part of `version` (tests with a constant version). */
    private readonly derived?: DerivedVersion,
    /**
     * A value is also kept for this many times as long as its build took (0: not): on a saturated
     * machine a build that took seconds is not started again at once, so rebuilding stays a bounded
     * share of the process (1 / (1 + costFactor)) instead of all of it.
     */
    private readonly costFactor = 0,
    /** Of a build's time, the part it spent queued (not its cost: slots.ts). @default none */
    private readonly queuedMs: (value: T) => number = () => 0,
  ) {}

  /** How long a value must be kept before it is rebuilt: minAgeMs, or longer after a costly build. */
  private keepMs(e: { cost: number }): number {
    return Math.max(this.minAgeMs, this.costFactor * e.cost);
  }

  /** `build` gets the value it replaces (undefined the first time): a builder may update it. */
  async get(name: string, build: (previous: T | undefined) => Promise<T>): Promise<T> {
    return this.lookup(name, build, false);
  }

  /**
   * As get, but never an outdated value: waits for the rebuild instead. For builders of other
   * cached values (the combined catalogue body from its per-marketplace shards): an outer value
   * built from an inner one served stale would be stored under the new version and keep the old
   * data until the next change (seen: a catalogue body empty for 10 s after its data committed).
   */
  async fresh(name: string, build: (previous: T | undefined) => Promise<T>): Promise<T> {
    return this.lookup(name, build, true);
  }

  /**
   * Starts the rebuild of `name` now if its version moved, without a request waiting for it (the
   * next request finds the value current). Returns the milliseconds until it may rebuild when the
   * version moved but the value must still be kept (`minAgeMs`, `costFactor`), else 0 (current, already rebuilding,
   * started now, or never built: a value nobody asked for is not built ahead).
   */
  ahead(name: string, build: (previous: T | undefined) => Promise<T>): number {
    const e = this.entries.get(name);
    if (!e || this.building.has(name)) return 0;
    if (current(e, this.version(name), this.derived?.version() ?? 0, 0, this.derived?.maxLagMs ?? 0)) return 0;
    const wait = e.at + this.keepMs(e) - Date.now();
    if (wait > 0) return wait;
    this.lookup(name, build, false).catch(() => undefined);
    return 0;
  }

  private async lookup(name: string, build: (previous: T | undefined) => Promise<T>, fresh: boolean): Promise<T> {
    const e = this.entries.get(name);
    const v = this.version(name);
    const d = this.derived?.version() ?? 0;
    if (e && current(e, v, d, fresh ? 0 : this.keepMs(e), this.derived?.maxLagMs ?? 0)) {
      this.stats.hits++;
      return e.value;
    }
    this.stats.misses++;
    let p = this.building.get(name);
    if (!p) {
      const started = Date.now();
      p = build(e?.value)
        .then((value) => {
          const at = Date.now();
          this.entries.set(name, { value, version: v, derived: d, at, cost: at - started - this.queuedMs(value) });
          return value;
        })
        .finally(() => this.building.delete(name));
      this.building.set(name, p);
    }
    if (!e || fresh) return p;
    // A failed rebuild is retried by the next request (and answered by the route when there is
    // no value at all).
    p.catch(() => undefined);
    return e.value;
  }
}

/** Response bodies by name, serialised once per data change and kept gzip-ready. */
export class BodyCache {
  private readonly cache: VersionedCache<Body>;

  get stats(): { hits: number; misses: number } {
    return this.cache.stats;
  }

  constructor(version: VersionOf, minAgeMs = 1_000, derived?: DerivedVersion) {
    this.cache = new VersionedCache(version, minAgeMs, derived);
  }

  get(name: string, build: () => Promise<string | Buffer>): Promise<Body> {
    return this.cache.get(name, () => build().then(makeBody));
  }
}

/**
 * Small answers (search, history) by request, as JSON, for the current read-model version: a hot
 * item asked by many clients costs one query per data change, not one per request. Like the
 * bodies, an answer up to `minAgeMs` old is still served after the version moved (the catalogue
 * changes every batch; the freshness budget is seconds). Least recently used entries go first
 * once `maxEntries` or `maxBytes` is reached; single-flight per request key.
 */
interface AnswerEntry {
  json: string;
  /** The JSON as UTF-8, once the hot path asked for it (peekBytes). */
  bytes?: Buffer;
  version: number;
  derived: number;
  at: number;
}

export class AnswerCache {
  readonly stats = { hits: 0, misses: 0 };
  private readonly entries = new Map<string, AnswerEntry>();
  private readonly loading = new Map<string, Promise<string>>();
  private bytesHeld = 0;

  constructor(
    private readonly version: () => number,
    private readonly limits = { maxEntries: 20_000, maxBytes: 64 * 1024 * 1024, minAgeMs: 1_000 },
    private readonly derived?: DerivedVersion,
  ) {}

  get(key: string, load: () => Promise<unknown>): Promise<string> {
    const held = this.peek(key);
    if (held !== undefined) return Promise.resolve(held);
    const v = this.version();
    const d = this.derived?.version() ?? 0;
    this.stats.misses++;
    let p = this.loading.get(key);
    if (!p) {
      p = load()
        .then((value) => {
          const json = JSON.stringify(value);
          this.put(key, { json, version: v, derived: d, at: Date.now() });
          return json;
        })
        .finally(() => this.loading.delete(key));
      this.loading.set(key, p);
    }
    return p;
  }

  /** The answer held for `key` if it may still be served (a hit), else undefined (nothing counted). */
  peek(key: string): string | undefined {
    return this.hit(key)?.json;
  }

  /**
   * As peek, as UTF-8 bytes (made at the first such look): a string written to a socket is encoded
   * at every write, which cost more than the rest of a small answer.
   */
  peekBytes(key: string): Buffer | undefined {
    const e = this.hit(key);
    if (!e) return undefined;
    if (!e.bytes) {
      e.bytes = Buffer.from(e.json);
      this.bytesHeld += e.bytes.length;
      this.evict();
    }
    return e.bytes;
  }

  private hit(key: string): AnswerEntry | undefined {
    const e = this.entries.get(key);
    if (
      !e ||
      !current(e, this.version(), this.derived?.version() ?? 0, this.limits.minAgeMs, this.derived?.maxLagMs ?? 0)
    )
      return undefined;
    // Map order is the LRU order: a hit moves the entry to the end.
    this.entries.delete(key);
    this.entries.set(key, e);
    this.stats.hits++;
    return e;
  }

  private put(key: string, entry: AnswerEntry): void {
    const old = this.entries.get(key);
    if (old) {
      this.bytesHeld -= old.json.length + (old.bytes?.length ?? 0);
      this.entries.delete(key);
    }
    this.entries.set(key, entry);
    this.bytesHeld += entry.json.length;
    this.evict();
  }

  /** Least recently used first, until within the limits (the entry just used is last). */
  private evict(): void {
    for (const [k, e] of this.entries) {
      if (this.entries.size <= this.limits.maxEntries && this.bytesHeld <= this.limits.maxBytes) break;
      this.entries.delete(k);
      this.bytesHeld -= e.json.length + (e.bytes?.length ?? 0);
    }
  }
}

/**
 * Large bodies are serialised once per data change and kept gzip-ready; a request serves bytes.
 * The envelope's per-key fields (requestor, plan) are appended per request as a second gzip
 * member: RFC 1952 allows several members in one stream and every gzip decoder reads them as one,
 * so the megabytes are compressed once and a request compresses a few dozen bytes.
 *
 * Only the compressed head is kept: the plain JSON of the catalogue and the six lists was three
 * quarters of the API's memory. A client that does not accept gzip gets the head decompressed as
 * a stream while it is sent (CPU for the rare client, not memory for every one).
 */
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { gzip, gzipSync } from 'node:zlib';

const gzipAsync = promisify(gzip);

export interface Body {
  /** The shared head of the JSON (everything but the per-request tail), gzip-compressed. */
  headGzip: Buffer;
  /** Bytes of the head uncompressed. */
  headLength: number;
  /** Content hash of the head, the base of the ETag. */
  hash: string;
  builtAt: number;
  /** Per-request tails already seen for this body (see `tailOf`). */
  tails: Map<string, Tail>;
}

/** The per-key end of a body: plain and as its own gzip member, and the ETag of head + tail. */
export interface Tail {
  plain: Buffer;
  gzip: Buffer;
  etag: string;
}

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
  t = {
    plain,
    gzip: gzipSync(plain, { level: 1 }),
    etag: `"${body.hash}.${createHash('sha1').update(plain).digest('base64url').slice(0, 10)}"`,
  };
  body.tails.set(tail, t);
  return t;
}

/** Compresses on libuv's thread pool: a 5 MB body must not stall every other request. */
export async function makeBody(head: string | Buffer): Promise<Body> {
  const buf = typeof head === 'string' ? Buffer.from(head) : head;
  return {
    headGzip: await gzipAsync(buf, { level: 6 }),
    headLength: buf.length,
    hash: createHash('sha1').update(buf).digest('base64url').slice(0, 20),
    builtAt: Date.now(),
    tails: new Map(),
  };
}

/**
 * Values by name (bodies, catalogue shards), rebuilt when the read model's version moved, and at
 * most every `minAgeMs`: a burst of batches must not rebuild megabytes per batch. Single-flight
 * per name; while a rebuild runs, the previous value is served (it is at most seconds old).
 */
export class VersionedCache<T> {
  private readonly entries = new Map<string, { value: T; version: number; at: number }>();
  private readonly building = new Map<string, Promise<T>>();

  constructor(
    private readonly version: () => number,
    private readonly minAgeMs = 1_000,
  ) {}

  async get(name: string, build: () => Promise<T>): Promise<T> {
    const e = this.entries.get(name);
    const v = this.version();
    if (e && (e.version === v || Date.now() - e.at < this.minAgeMs)) return e.value;
    let p = this.building.get(name);
    if (!p) {
      p = build()
        .then((value) => {
          this.entries.set(name, { value, version: v, at: Date.now() });
          return value;
        })
        .finally(() => this.building.delete(name));
      this.building.set(name, p);
    }
    if (!e) return p;
    // A failed rebuild is retried by the next request (and answered by the route when there is
    // no value at all).
    p.catch(() => undefined);
    return e.value;
  }
}

/** Response bodies by name, serialised once per data change and kept gzip-ready. */
export class BodyCache {
  private readonly cache: VersionedCache<Body>;

  constructor(version: () => number, minAgeMs = 1_000) {
    this.cache = new VersionedCache(version, minAgeMs);
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
export class AnswerCache {
  private readonly entries = new Map<string, { json: string; version: number; at: number }>();
  private readonly loading = new Map<string, Promise<string>>();
  private bytesHeld = 0;

  constructor(
    private readonly version: () => number,
    private readonly limits = { maxEntries: 20_000, maxBytes: 64 * 1024 * 1024, minAgeMs: 1_000 },
  ) {}

  get(key: string, load: () => Promise<unknown>): Promise<string> {
    const v = this.version();
    const e = this.entries.get(key);
    if (e && (e.version === v || Date.now() - e.at < this.limits.minAgeMs)) {
      // Map order is the LRU order: a hit moves the entry to the end.
      this.entries.delete(key);
      this.entries.set(key, e);
      return Promise.resolve(e.json);
    }
    let p = this.loading.get(key);
    if (!p) {
      p = load()
        .then((value) => {
          const json = JSON.stringify(value);
          this.put(key, { json, version: v, at: Date.now() });
          return json;
        })
        .finally(() => this.loading.delete(key));
      this.loading.set(key, p);
    }
    return p;
  }

  private put(key: string, entry: { json: string; version: number; at: number }): void {
    const old = this.entries.get(key);
    if (old) {
      this.bytesHeld -= old.json.length;
      this.entries.delete(key);
    }
    this.entries.set(key, entry);
    this.bytesHeld += entry.json.length;
    for (const [k, e] of this.entries) {
      if (this.entries.size <= this.limits.maxEntries && this.bytesHeld <= this.limits.maxBytes) break;
      this.entries.delete(k);
      this.bytesHeld -= e.json.length;
    }
  }
}

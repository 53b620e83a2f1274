/**
 * Large bodies are serialised once per data change and kept gzip-ready; a request serves bytes.
 * The envelope's per-key fields (requestor, plan) are appended per request as a second gzip
 * member: RFC 1952 allows several members in one stream and every gzip decoder reads them as one,
 * so the megabytes are compressed once and a request compresses a few dozen bytes.
 */
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';

const gzipAsync = promisify(gzip);

export interface Body {
  /** The shared head of the JSON (everything but the per-request tail). */
  head: Buffer;
  headGzip: Buffer;
  /** Content hash of the head, the base of the ETag. */
  hash: string;
  builtAt: number;
}

/** Compresses on libuv's thread pool: a 5 MB body must not stall every other request. */
export async function makeBody(head: string): Promise<Body> {
  const buf = Buffer.from(head);
  return {
    head: buf,
    headGzip: await gzipAsync(buf, { level: 6 }),
    hash: createHash('sha1').update(buf).digest('base64url').slice(0, 20),
    builtAt: Date.now(),
  };
}

/**
 * Bodies by name, rebuilt when the read model's version moved (and at most every `minAgeMs`, so
 * a burst of batches does not rebuild a 5 MB body per batch), single-flight per name.
 */
export class BodyCache {
  private readonly entries = new Map<string, { body: Body; version: number }>();
  private readonly building = new Map<string, Promise<Body>>();

  constructor(
    private readonly version: () => number,
    private readonly minAgeMs = 1_000,
  ) {}

  async get(name: string, build: () => Promise<string>): Promise<Body> {
    const e = this.entries.get(name);
    const v = this.version();
    if (e && (e.version === v || Date.now() - e.body.builtAt < this.minAgeMs)) return e.body;
    let p = this.building.get(name);
    if (!p) {
      p = build()
        .then(makeBody)
        .then((body) => {
          this.entries.set(name, { body, version: v });
          return body;
        })
        .finally(() => this.building.delete(name));
      this.building.set(name, p);
    }
    if (!e) return p;
    // While a rebuild runs, the previous body is still good enough; a failed rebuild is retried
    // by the next request (and answered by the route when there is no body at all).
    p.catch(() => undefined);
    return e.body;
  }

  /** Approximate bytes held (for the memory benchmark and /v1/status). */
  bytes(): number {
    let n = 0;
    for (const { body } of this.entries.values()) n += body.head.length + body.headGzip.length;
    return n;
  }
}

/**
 * How answers leave: cached bodies as head plus per-request tail (gzip when accepted, ETag, 304),
 * already-serialised JSON, and the envelope tail every answer ends with. Shared by the route modules.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { inflateHead, tailOf, type Body } from '../bodies.js';
import type { ApiKey } from '../keys.js';

/**
 * Spec 2.2 asks for a public 30-second cache hint on price answers. Every answer ends with the
 * caller's customer and plan, so a shared cache must keep one copy per key: hence `Vary` on both
 * key headers (and on Accept-Encoding, for the gzip and plain forms).
 */
export const CACHE_CONTROL = 'public, max-age=30';
export const VARY = 'accept-encoding, x-api-key, authorization';

/**
 * A marketplace list's answer header: when the marketplace's whole list was last confirmed
 * complete upstream (its last complete listings cycle), as of the data in the answer. A row's
 * `updated_at` is when its price or count last changed; this says how recently an unchanged row
 * was seen to be unchanged.
 */
export const CONFIRMED_AT = 'listings-confirmed-at';

/** The key the onRequest hook authenticated (every keyed route runs after it). */
export const keyOf = (req: FastifyRequest): ApiKey => req.apiKey as ApiKey;

/** `"requestor":…,"plan":…,"timestamp":…` of an answer, as an object for the serialised routes. */
export const keyFieldsOf = (req: FastifyRequest, at = Date.now()) => ({
  requestor: keyOf(req).customer,
  plan: keyOf(req).plan,
  timestamp: new Date(at).toISOString(),
});

/** `,"requestor":…,"plan":…` per key object (a key edit loads new objects): serialised once. */
const keyParts = new WeakMap<ApiKey, string>();
/** The last instant's ISO string: requests within one millisecond share it. */
let lastInstant = { at: Number.NaN, iso: '' };

const isoAt = (at: number): string => {
  if (at !== lastInstant.at) lastInstant = { at, iso: JSON.stringify(new Date(at).toISOString()) };
  return lastInstant.iso;
};

/** The end of a cached body's JSON: optional `source`, then who asked and when, and the closing brace. */
export function envelopeTail(key: ApiKey, source: string | undefined, at: number): string {
  let who = keyParts.get(key);
  if (who === undefined) {
    who = `,"requestor":${JSON.stringify(key.customer)},"plan":${JSON.stringify(key.plan)}`;
    keyParts.set(key, who);
  }
  return `${source === undefined ? '' : `,"source":${JSON.stringify(source)}`}${who},"timestamp":${isoAt(at)}}`;
}

/**
 * If-None-Match as RFC 9110 §13.1.2 reads it: a list of tags, or `*`, compared weakly (`W/"x"`
 * and `"x"` are the same tag), so a client or proxy that lists several, or drops the weak prefix,
 * still gets its 304.
 */
export function noneMatch(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  if (header.trim() === '*') return true;
  const opaque = (t: string) => t.trim().replace(/^W\//, '');
  const want = opaque(etag);
  return header.split(',').some((t) => opaque(t) === want);
}

/**
 * Sends a cached head plus a per-request tail; gzip when accepted; ETag and 304. The two parts go
 * to the socket as they are (one writev), not concatenated: copying a megabyte per request was a
 * third of the cost of serving it. The reply is hijacked for that, so the headers are written
 * here. Without gzip, the head is decompressed as a stream (bodies keep only their gzip bytes).
 */
export function sendBody(
  req: FastifyRequest,
  reply: FastifyReply,
  body: Body,
  tailText: string,
): FastifyReply | undefined {
  const tail = tailOf(body, tailText);
  const headers: Record<string, string | number> = {
    etag: tail.etag,
    'cache-control': CACHE_CONTROL,
    vary: VARY,
    'content-type': 'application/json; charset=utf-8',
  };
  if (body.confirmedAt) headers[CONFIRMED_AT] = body.confirmedAt.toISOString();
  if (noneMatch(req.headers['if-none-match'], tail.etag)) return reply.code(304).headers(headers).send();
  const gzip = /\bgzip\b/.test(req.headers['accept-encoding'] ?? '');
  if (gzip) headers['content-encoding'] = 'gzip';
  headers['content-length'] = gzip ? body.headGzip.length + tail.gzip.length : body.headLength + tail.plain.length;
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, headers);
  if (req.method === 'HEAD') res.end();
  else if (gzip) {
    res.write(body.headGzip);
    res.end(tail.gzip);
  } else {
    const plain = inflateHead(body);
    plain.on('error', (err) => res.destroy(err));
    plain.on('end', () => res.end(tail.plain));
    plain.pipe(res, { end: false });
  }
  return undefined;
}

/** A JSON document already serialised (cached parts plus the per-request envelope). */
export const sendJson = (reply: FastifyReply, json: string | Buffer) =>
  reply.header('cache-control', CACHE_CONTROL).header('vary', VARY).type('application/json; charset=utf-8').send(json);

/** An object answer, serialised by the route's response schema; it names its key too, hence `Vary`. */
export const sendObject = (reply: FastifyReply, answer: object, cacheControl = CACHE_CONTROL) =>
  reply.header('cache-control', cacheControl).header('vary', VARY).send(answer);

/**
 * The two most frequent small answers, search (spec 4.5) and history (4.6), served from the answer
 * cache ahead of the framework: on this machine, Fastify's routing, hooks and schema validation
 * cost a small answer more than the rest of the request did (bench/bottlenecks.md).
 *
 * It takes only what it is sure of: a GET of one of the two paths, plain parameters within the
 * route schema's limits, a key already verified and allowed the endpoint, and an answer already
 * cached. Anything else goes to Fastify untouched, so every refusal, every load and every edge case
 * keeps one implementation (the routes'), and an answer served here is byte for byte the route's
 * (both build it with the same function). The rate limit is counted once: here, when the request is
 * answered here; a refusal is handed to Fastify with the verdict already reached (auth.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { MarketSlug } from '@skinprices/domain';
import { parse } from 'fast-querystring';
import { DECIDED, limitRefusal } from './auth.js';
import type { AnswerCache } from './bodies.js';
import { membersInto, type Catalogue } from './catalogue.js';
import type { CatalogueCache } from './catalogue-cache.js';
import type { ApiError } from './errors.js';
import type { KeyStore } from './keys.js';
import type { RateLimiter, Verdict } from './limits.js';
import type { ApiMetrics } from './metrics.js';
import { OutputBuffers } from './out-buffers.js';
import { planFor, planIncludes, type EndpointId } from './plans.js';
import { ITEMS_OPEN, searchEntry, searchHead } from './routes/catalogue.js';
import { HISTORY_MARKETS, LISTING_MARKETS, slugs } from './routes/exposure.js';
import { historyEntry, historyHead } from './routes/history.js';
import { CACHE_CONTROL, envelopeTail, VARY } from './routes/send.js';

export interface HotPathDeps {
  keys: KeyStore;
  limiter: RateLimiter;
  metrics: ApiMetrics;
  answers: AnswerCache;
  catalogues: CatalogueCache;
  /** POST latest's blocks by body (PreparedPosts), made by preparedPosts(). */
  posts: PreparedPosts;
  /**
   * Answers a request whose body this path read and then declined, through the framework in this
   * process (app.ts: Fastify's inject with the same method, URL, headers, body and address).
   */
  replay: (req: IncomingMessage, res: ServerResponse, body: Buffer) => void;
  clock: () => number;
}

type Fallback = (req: IncomingMessage, res: ServerResponse) => void;

/** The process's buffers for hot answers: one set for every app (buffers are not tied to one). */
const OUT = new OutputBuffers();
const EMPTY: Buffer = Buffer.alloc(0);

/** What sendJson sets on an answer, in its order (content-length follows). */
const JSON_HEADERS = {
  'cache-control': CACHE_CONTROL,
  vary: VARY,
  'content-type': 'application/json; charset=utf-8',
} as const;

/** The body limit of every route (app.ts): a longer one is the framework's 413. */
const MAX_BODY = 64 * 1024;

/** A request this path can answer: its endpoint, route pattern, market and answer's cache entry. */
interface Plan {
  endpoint: EndpointId;
  route: string;
  market?: MarketSlug;
  entry: string;
  /** The answer before the cached part (after it: the envelope's tail). */
  head: string;
}

const HISTORY_SLUGS = new Set<string>(slugs(HISTORY_MARKETS));
const SEARCH_SLUGS = slugs(LISTING_MARKETS);
const HISTORY_PATH = /^\/v1\/prices\/([a-z0-9-]{1,40})\/history$/;

/**
 * A text parameter as the route's schema accepts it, or undefined: one value (not repeated), within
 * `max` UTF-16 units (never more code points than that, which is what the schema counts), and
 * without NUL (edge.ts refuses those). `nonBlank`: the name's "\S" pattern.
 */
function text(value: unknown, max: number, nonBlank: boolean): string | undefined {
  if (typeof value !== 'string' || value.length > max || value.includes('\u0000')) return undefined;
  if (nonBlank && !/\S/.test(value)) return undefined;
  return value;
}

/** Only the named parameters, each at most once. */
const onlyKeys = (query: Record<string, unknown>, allowed: readonly string[]) =>
  Object.keys(query).every((k) => allowed.includes(k));

function searchPlan(query: Record<string, unknown>): Plan | undefined {
  const name = text(query.market_hash_name, 300, true);
  if (name === undefined || !onlyKeys(query, ['market_hash_name'])) return undefined;
  return {
    endpoint: 'GET /v1/prices/search',
    route: '/v1/prices/search',
    entry: searchEntry(name, SEARCH_SLUGS),
    head: searchHead(name),
  };
}

function historyPlan(market: MarketSlug, query: Record<string, unknown>): Plan | undefined {
  const name = text(query.market_hash_name, 300, true);
  const phase = query.phase === undefined ? '' : text(query.phase, 100, false);
  const resolution = query.resolution ?? 'daily';
  if (name === undefined || phase === undefined || (resolution !== 'daily' && resolution !== 'hourly'))
    return undefined;
  if (!onlyKeys(query, ['market_hash_name', 'phase', 'resolution'])) return undefined;
  return {
    endpoint: 'GET /v1/prices/{market}/history',
    route: '/v1/prices/:market/history',
    market,
    entry: historyEntry(market, name, phase, resolution),
    head: historyHead(market, name, phase, resolution),
  };
}

/** What this path would answer `req` with, or undefined: Fastify's. */
function planOf(req: IncomingMessage): Plan | undefined {
  if (req.method !== 'GET' || (req.httpVersion === '1.1' && req.headers.host === undefined)) return undefined;
  const url = req.url ?? '';
  const q = url.indexOf('?');
  if (q < 0 || url.includes('%00')) return undefined;
  const path = url.slice(0, q);
  const query = parse(url.slice(q + 1)) as Record<string, unknown>;
  if (path === '/v1/prices/search') return searchPlan(query);
  const market = HISTORY_PATH.exec(path)?.[1];
  return market !== undefined && HISTORY_SLUGS.has(market) ? historyPlan(market as MarketSlug, query) : undefined;
}

/** x-api-key, or Authorization: Bearer (auth.ts's rule; these routes take no cookie). */
function presented(req: IncomingMessage): string | undefined {
  const header = req.headers['x-api-key'];
  if (typeof header === 'string' && header.trim()) return header.trim();
  const auth = req.headers.authorization;
  return auth ? /^Bearer\s+(\S+)\s*$/i.exec(auth)?.[1] : undefined;
}

/** The answering function: true when it took the request (answered it, or will hand it on itself). */
export function hotPath(d: HotPathDeps): (req: IncomingMessage, res: ServerResponse, fallback: Fallback) => boolean {
  return (req, res, fallback) => {
    const t0 = performance.now();
    if (req.method === 'POST') return takeLatestPost(req, res, d, t0);
    const plan = planOf(req);
    if (!plan) return false;
    const now = d.clock();
    const key = d.keys.verifiedNow(presented(req), now);
    if (!key || !planIncludes(key.plan, planFor(plan.endpoint, plan.market))) return false;
    if (key.allowedEndpoints && !key.allowedEndpoints.includes(plan.endpoint)) return false;
    const cached = d.answers.peekBytes(plan.entry);
    // No points is either an empty history or an unknown item's 404: the route tells them apart.
    if (cached === undefined || (plan.market !== undefined && cached.length === 2)) return false;
    const verdict = d.limiter.hit(key, now);
    verdict.then(
      (v) => {
        if (!v.ok) return handOn(req, res, verdict, fallback);
        const head = Buffer.from(plan.head);
        const tail = Buffer.from(envelopeTail(key, undefined, Date.now()));
        const out = OUT.take(head.length + cached.length + tail.length);
        let at = head.copy(out);
        at += cached.copy(out, at);
        at += tail.copy(out, at);
        send(res, out, at, plan.route, t0, d.metrics, 'GET');
      },
      () => handOn(req, res, verdict, fallback),
    );
    return true;
  };
}

function handOn(req: IncomingMessage, res: ServerResponse, verdict: Promise<Verdict>, fallback: Fallback): void {
  (req as unknown as Record<symbol, Promise<Verdict>>)[DECIDED] = verdict;
  fallback(req, res);
}

/** A POST of /v1/prices/latest with a JSON body of a size the route accepts: read here. */
function takeLatestPost(req: IncomingMessage, res: ServerResponse, d: HotPathDeps, t0: number): boolean {
  const length = Number(req.headers['content-length']);
  const type = req.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
  if (req.url !== '/v1/prices/latest' || type !== 'application/json' || !(length <= MAX_BODY)) return false;
  if (req.headers['transfer-encoding'] !== undefined || (req.httpVersion === '1.1' && !req.headers.host)) return false;
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    if (!answerLatestPost(req, res, d, t0, body)) d.replay(req, res, body);
  });
  return true;
}

/** The route's body, exactly: `{"items": [...]}` of at most 100 names of 1 to 300 characters, no NUL. */
function latestItems(body: string): string[] | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  const { items, ...rest } = parsed as { items?: unknown };
  if (!Array.isArray(items) || items.length > 100 || Object.keys(rest).length > 0) return undefined;
  const ok = items.every((n) => typeof n === 'string' && n.length > 0 && n.length <= 300 && !n.includes('\u0000'));
  return ok ? [...new Set(items as string[])] : undefined;
}

/**
 * `{"items":{…}` of a body, from the catalogue it was assembled from: a watchlist asked for again
 * (a bot polls the same 100 names) is sent from these bytes, neither parsed, looked up nor copied
 * again while the catalogue holds. Any splice makes a new catalogue, so an entry never outlives its
 * data. Bounded by bytes; least recently used first out.
 */
class PreparedPosts {
  private readonly entries = new Map<string, { catalogue: Catalogue; bytes: Buffer }>();
  private bytesHeld = 0;

  constructor(private readonly maxBytes: number) {}

  /** The block of `body`, current for `catalogue`; undefined: the body is not one the route accepts. */
  get(body: string, catalogue: Catalogue): Buffer | undefined {
    const held = this.entries.get(body);
    if (held) {
      this.entries.delete(body);
      this.bytesHeld -= held.bytes.length;
      if (held.catalogue === catalogue) return this.keep(body, held);
    }
    const items = latestItems(body);
    if (!items) return undefined;
    const bytes = membersInto(catalogue, items, ITEMS_OPEN, EMPTY, (n) => Buffer.allocUnsafeSlow(n));
    return this.keep(body, { catalogue, bytes });
  }

  private keep(body: string, e: { catalogue: Catalogue; bytes: Buffer }): Buffer {
    this.entries.set(body, e);
    this.bytesHeld += e.bytes.length;
    for (const [k, old] of this.entries) {
      if (this.bytesHeld <= this.maxBytes) break;
      this.entries.delete(k);
      this.bytesHeld -= old.bytes.length;
    }
    return e.bytes;
  }
}

function answerLatestPost(
  req: IncomingMessage,
  res: ServerResponse,
  d: HotPathDeps,
  t0: number,
  body: Buffer,
): boolean {
  const now = d.clock();
  const key = d.keys.verifiedNow(presented(req), now);
  if (!key || !planIncludes(key.plan, planFor('POST /v1/prices/latest'))) return false;
  if (key.allowedEndpoints && !key.allowedEndpoints.includes('POST /v1/prices/latest')) return false;
  const catalogue = d.catalogues.peek();
  const block = catalogue && d.posts.get(body.toString(), catalogue);
  if (!block) return false;
  // A replayed request is a new one to the framework, which cannot be told a verdict: a refusal is
  // written here as the error handler writes it (app.ts), and a failed count is left to the replay.
  d.limiter.hit(key, now).then(
    (v) => {
      if (!v.ok) {
        d.metrics.rateLimited.inc({ window: v.window });
        return refuse(res, limitRefusal(key, v), t0, d.metrics);
      }
      const tail = Buffer.from(envelopeTail(key, undefined, Date.now()));
      d.metrics.hotAnswers.inc();
      res.once('finish', () => d.metrics.observeRequest('/v1/prices/latest', 'POST', res.statusCode, t0));
      res.writeHead(200, { ...JSON_HEADERS, 'content-length': block.length + tail.length });
      // One write of both parts (a writev): the block is shared by every answer of its body.
      res.cork();
      res.write(block);
      res.end(tail);
      res.uncork();
    },
    () => d.replay(req, res, body),
  );
  return true;
}

/** An error as app.ts's error handler writes it: its headers, no-store, the one error body. */
function refuse(res: ServerResponse, e: ApiError, t0: number, metrics: ApiMetrics): void {
  const body = JSON.stringify(e.body());
  res.once('finish', () => metrics.observeRequest('/v1/prices/latest', 'POST', res.statusCode, t0));
  res.writeHead(e.status, {
    ...e.headers,
    'cache-control': 'no-store',
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

/**
 * The first `length` bytes of `out` (a buffer of OUT), with the headers sendJson gives the same
 * answer, in its order; `out` is used again once the socket has taken them.
 */
function send(
  res: ServerResponse,
  out: Buffer,
  length: number,
  route: string,
  t0: number,
  metrics: ApiMetrics,
  method: string,
): void {
  metrics.hotAnswers.inc();
  res.once('finish', () => {
    OUT.give(out);
    metrics.observeRequest(route, method, res.statusCode, t0);
  });
  res.writeHead(200, { ...JSON_HEADERS, 'content-length': length });
  res.end(out.subarray(0, length));
}

/** POST latest's prepared blocks, at most `maxBytes` of them (per process). */
export const preparedPosts = (maxBytes = 16 * 1024 * 1024) => new PreparedPosts(maxBytes);

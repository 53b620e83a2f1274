/**
 * The most frequent answers after the lists, search (spec 4.5), history (4.6) and POST latest
 * (4.4), served from prepared bytes ahead of the framework: on this machine, Fastify's routing,
 * hooks and schema validation cost a small answer more than the rest of the request did
 * (docs/decisions/0020-read-capacity.md).
 *
 * It takes only what it is sure of: a GET of the two paths or a POST of the third, plain
 * parameters or a body within the route schema's limits, a key already verified and allowed the
 * endpoint, and an answer or catalogue already current. Anything else goes to Fastify with the
 * same request, so every refusal, every load and every edge case keeps one implementation (the
 * routes'), and an answer served here is byte for byte the route's (both build it with the same
 * functions). A body read here goes with it (READ_BODY, app.ts's preParsing hook). The rate limit
 * is counted once: here, and a request handed on after that carries the verdict (auth.ts DECIDED).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { MarketSlug } from '@skinprices/domain';
import { parse } from 'fast-querystring';
import { DECIDED } from './auth.js';
import type { AnswerCache } from './bodies.js';
import { membersInto, type Catalogue } from './catalogue.js';
import type { CatalogueCache } from './catalogue-cache.js';
import type { ApiKey, KeyStore } from './keys.js';
import type { RateLimiter } from './limits.js';
import type { ApiMetrics } from './metrics.js';
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
  /** The rate limits' clock (tests fix it); keys are judged by the wall clock, as auth.ts does. */
  clock: () => number;
}

/** A request body this path read before handing the request on: the route parses it (app.ts). */
export const READ_BODY = Symbol('body read by the hot path');

type Fallback = (req: IncomingMessage, res: ServerResponse) => void;

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
    if (req.method === 'POST') return takeLatestPost(req, res, fallback, d, t0);
    const plan = planOf(req);
    if (!plan) return false;
    const key = allowedKey(req, d.keys, plan.endpoint, plan.market);
    if (!key) return false;
    const cached = d.answers.peekBytes(plan.entry);
    // No points is either an empty history or an unknown item's 404: the route tells them apart.
    if (cached === undefined || (plan.market !== undefined && cached.length === 2)) return false;
    afterCount(d, key, req, res, fallback, undefined, () =>
      send(res, [Buffer.from(plan.head), cached, tailOf(key)], plan.route, 'GET', t0, d.metrics),
    );
    return true;
  };
}

/**
 * Counts the request against its key's limits, then answers it (`answer`) or, refused or not
 * counted, hands it on with the verdict (and the body read, if any): the route refuses it as it
 * refuses any other, without counting it again. An answer that throws is a 500 there too.
 */
function afterCount(
  d: HotPathDeps,
  key: ApiKey,
  req: IncomingMessage,
  res: ServerResponse,
  fallback: Fallback,
  body: Buffer | undefined,
  answer: () => void,
): void {
  const verdict = d.limiter.hit(key, d.clock());
  const handOn = () => {
    const marks = req as unknown as Record<symbol, unknown>;
    marks[DECIDED] = verdict;
    if (body) marks[READ_BODY] = body;
    fallback(req, res);
  };
  verdict
    .then((v) => (v.ok ? answer() : handOn()), handOn)
    .catch(() => {
      if (!res.headersSent) handOn();
      else res.destroy();
    });
}

/** A POST of /v1/prices/latest with a JSON body of a size the route accepts: read here. */
function takeLatestPost(
  req: IncomingMessage,
  res: ServerResponse,
  fallback: Fallback,
  d: HotPathDeps,
  t0: number,
): boolean {
  const length = Number(req.headers['content-length']);
  const type = req.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
  if (req.url !== '/v1/prices/latest' || type !== 'application/json' || !(length <= MAX_BODY)) return false;
  if (req.headers['transfer-encoding'] !== undefined || (req.httpVersion === '1.1' && !req.headers.host)) return false;
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    if (!answerLatestPost(req, res, fallback, d, t0, body)) {
      (req as unknown as Record<symbol, unknown>)[READ_BODY] = body;
      fallback(req, res);
    }
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
 * `{"items":{…}` of a body, from the current catalogue: a watchlist asked for again (a bot polls
 * the same 100 names) is sent from these bytes, neither parsed, looked up nor copied again while
 * the catalogue holds. Any splice makes a new catalogue, which starts the blocks over (an old
 * catalogue never comes back). Bounded by bytes, the bodies' own included; least recently used out.
 */
class PreparedPosts {
  private readonly entries = new Map<string, Buffer>();
  private catalogue: Catalogue | undefined;
  private bytesHeld = 0;

  constructor(private readonly maxBytes: number) {}

  /** The block of `body`, current for `catalogue`; undefined: the body is not one the route accepts. */
  get(body: string, catalogue: Catalogue): Buffer | undefined {
    if (catalogue !== this.catalogue) {
      this.entries.clear();
      this.bytesHeld = 0;
      this.catalogue = catalogue;
    }
    const held = this.entries.get(body);
    if (held) {
      this.entries.delete(body);
      this.entries.set(body, held);
      return held;
    }
    const items = latestItems(body);
    if (!items) return undefined;
    const bytes = membersInto(catalogue, items, ITEMS_OPEN, EMPTY);
    this.entries.set(body, bytes);
    this.bytesHeld += bytes.length + body.length * 2;
    for (const [k, old] of this.entries) {
      if (this.bytesHeld <= this.maxBytes) break;
      this.entries.delete(k);
      this.bytesHeld -= old.length + k.length * 2;
    }
    return bytes;
  }
}

function answerLatestPost(
  req: IncomingMessage,
  res: ServerResponse,
  fallback: Fallback,
  d: HotPathDeps,
  t0: number,
  body: Buffer,
): boolean {
  const key = allowedKey(req, d.keys, 'POST /v1/prices/latest');
  if (!key) return false;
  const catalogue = d.catalogues.peek();
  const block = catalogue && d.posts.get(body.toString(), catalogue);
  if (!block) return false;
  afterCount(d, key, req, res, fallback, body, () =>
    send(res, [block, tailOf(key)], '/v1/prices/latest', 'POST', t0, d.metrics),
  );
  return true;
}

/**
 * A 200 of `parts` with the headers sendJson gives the same answer, in its order. A small answer
 * is copied into one buffer (one write costs less than several); a large one, a prepared block,
 * goes as it is held in one writev: a fresh 200 KB buffer per answer was an mmap, its page faults
 * and an munmap each (glibc maps allocations over 128 KB), half of POST latest's rate.
 */
function send(
  res: ServerResponse,
  parts: readonly Buffer[],
  route: string,
  method: string,
  t0: number,
  metrics: ApiMetrics,
): void {
  metrics.hotAnswers.inc();
  res.once('finish', () => metrics.observeRequest(route, method, res.statusCode, t0));
  let length = 0;
  for (const p of parts) length += p.length;
  res.writeHead(200, { ...JSON_HEADERS, 'content-length': length });
  if (length <= COPIED_UP_TO) return void res.end(Buffer.concat(parts, length));
  res.cork();
  for (let i = 0; i < parts.length - 1; i++) res.write(parts[i]);
  res.end(parts[parts.length - 1]);
  res.uncork();
}

/** Below glibc's mapping threshold (128 KB), with room. */
const COPIED_UP_TO = 64 * 1024;

/** The envelope's end of an answer for `key`, now. */
const tailOf = (key: ApiKey) => Buffer.from(envelopeTail(key, undefined, Date.now()));

/** The key presented, when already verified and allowed `endpoint` (its plan, its ACL). */
function allowedKey(req: IncomingMessage, keys: KeyStore, endpoint: EndpointId, market?: string): ApiKey | undefined {
  const key = keys.verifiedNow(presented(req));
  if (!key || !planIncludes(key.plan, planFor(endpoint, market))) return undefined;
  if (key.allowedEndpoints && !key.allowedEndpoints.includes(endpoint)) return undefined;
  return key;
}

/** POST latest's prepared blocks, at most `maxBytes` of them (per process). */
export const preparedPosts = (maxBytes = 16 * 1024 * 1024) => new PreparedPosts(maxBytes);

/**
 * The HTTP application: every endpoint of spec section 4 plus /v1/status, behind keys, plans,
 * endpoint ACLs and rate limits; one error body everywhere. Fastify: routing with parametric
 * paths, hooks for the key check before any handler runs, body limits and content-type checks.
 */
import { getMarket, MARKETS, type MarketSlug } from '@skinprices/domain';
import type { SalesExportCache } from '@skinprices/exports';
import type { Logger } from '@skinprices/runtime';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { AnswerCache, BodyCache, inflateHead, tailOf, VersionedCache, type Body } from './bodies.js';
import { combine, itemsJson, type CatalogueShard } from './catalogue.js';
import {
  answerExpectations,
  clientErrorHandler,
  frameworkErrors,
  parseJsonBody,
  refuseConnect,
  refuseNulBytes,
  routeMethods,
} from './edge.js';
import { ApiError, badParameter } from './errors.js';
import { marketParam, optionalInt, parseMarkets, requiredString } from './params.js';
import type { ApiKey, KeyStore } from './keys.js';
import { FailedAuthLimiter, type RateLimiter } from './limits.js';
import { registerChangeRoutes } from './changes/routes.js';
import { ChangeWaker } from './changes/waker.js';
import { ApiMetrics } from './metrics.js';
import { openApiDocument } from './openapi.js';
import { registerReference } from './pages/reference.js';
import { keyFromCookie, registerStatusPage } from './pages/status-page.js';
import { planFor, planIncludes, type EndpointId } from './plans.js';
import { loadStatus, type StatusOptions } from './status.js';
import type { ReadModel } from './readmodel.js';

/** Marketplaces of GET /v1/prices/{market} (spec 4.1). */
export const LIST_MARKETS: readonly MarketSlug[] = ['cn-a', 'cn-b', 'cn-c', 'cn-d', 'eu-a', 'eu-b'];
/** Marketplaces of the combined catalogue (4.3): every listing marketplace but the store. */
export const CATALOGUE_MARKETS: readonly MarketSlug[] = MARKETS.filter(
  (m) => m.capabilities.includes('listings') && m.slug !== 'store',
).map((m) => m.slug);
const BUYORDER_MARKETS: readonly MarketSlug[] = ['cn-a', 'cn-b'];
const SALES_MARKETS: readonly MarketSlug[] = MARKETS.filter((m) => m.capabilities.includes('sales')).map((m) => m.slug);
const HISTORY_MARKETS: readonly MarketSlug[] = MARKETS.filter(
  (m) => m.capabilities.includes('listings') || m.capabilities.includes('history'),
).map((m) => m.slug);
const STORE: MarketSlug = 'store';
/**
 * Spec 2.2 asks for a public 30-second cache hint on price answers. Every answer ends with the
 * caller's customer and plan, so a shared cache must keep one copy per key: hence `Vary` on both
 * key headers (and on Accept-Encoding, for the gzip and plain forms).
 */
const CACHE_CONTROL = 'public, max-age=30';
const VARY = 'accept-encoding, x-api-key, authorization';
const ITEMS_OPEN = Buffer.from('{"items":');

export interface AppDeps {
  keys: KeyStore;
  limiter: RateLimiter;
  read: ReadModel;
  exports: SalesExportCache;
  /**
   * The read model's version: of what `deps` names (tags such as `listing:cn-a`, see
   * ReadModelVersion), or of everything without `deps`. A constant serves tests that never rebuild.
   */
  version: (deps?: readonly string[]) => number;
  logger: Logger;
  /** When /v1/status calls data stale and the pipeline down or stalled. @default DEFAULT_STATUS_OPTIONS */
  status?: StatusOptions;
  /** Failed authentications per client address. @default 60 a minute */
  failedAuth?: FailedAuthLimiter;
  /** Request, auth and cache metrics. @default a fresh registry (not served) */
  metrics?: ApiMetrics;
  /** The clock of the rate-limit windows (tests fix it). @default Date.now */
  clock?: () => number;
  /**
   * Wakes change streams on the materializer's NOTIFY (main.ts wires it to PgNotifications).
   * @default one nobody notifies: streams poll the log every `changePollMs`
   */
  changeWaker?: ChangeWaker;
  /** Longest a stream waits before looking at the change log without a notification. @default 5000 */
  changePollMs?: number;
}

declare module 'fastify' {
  interface FastifyRequest {
    apiKey?: ApiKey;
  }
  interface FastifyContextConfig {
    endpoint?: EndpointId;
  }
}

const AUTH_FAILURES = {
  missing: ['key_missing', 'an API key is required: send it as x-api-key or Authorization: Bearer'],
  invalid: ['key_invalid', 'the API key is not valid'],
  disabled: ['key_disabled', 'the API key is disabled'],
  expired: ['key_expired', 'the API key has expired'],
} as const;

function presentedKey(req: FastifyRequest): string | undefined {
  const header = req.headers['x-api-key'];
  if (typeof header === 'string' && header.trim()) return header.trim();
  const auth = req.headers.authorization;
  const m = auth ? /^Bearer\s+(\S+)\s*$/i.exec(auth) : null;
  return m?.[1] ?? keyFromCookie(req);
}

/**
 * Sends a cached head plus a per-request tail; gzip when accepted; ETag and 304. The two parts go
 * to the socket as they are (one writev), not concatenated: copying a megabyte per request was a
 * third of the cost of serving it. The reply is hijacked for that, so the headers are written
 * here. Without gzip, the head is decompressed as a stream (bodies keep only their gzip bytes).
 */
function sendBody(req: FastifyRequest, reply: FastifyReply, body: Body, tailText: string): FastifyReply | undefined {
  const tail = tailOf(body, tailText);
  const headers: Record<string, string | number> = {
    etag: tail.etag,
    'cache-control': CACHE_CONTROL,
    vary: VARY,
    'content-type': 'application/json; charset=utf-8',
  };
  if (req.headers['if-none-match'] === tail.etag) return reply.code(304).headers(headers).send();
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
const sendJson = (reply: FastifyReply, json: string | Buffer) =>
  reply.header('cache-control', CACHE_CONTROL).header('vary', VARY).type('application/json; charset=utf-8').send(json);

const envelopeTail = (key: ApiKey, source: string | undefined, at: number) =>
  `${source === undefined ? '' : `,"source":${JSON.stringify(source)}`},"requestor":${JSON.stringify(key.customer)},"plan":${JSON.stringify(key.plan)},"timestamp":${JSON.stringify(new Date(at).toISOString())}}`;

const listingTag = (market: string) => `listing:${market}`;
const FLOAT_RANGED_MARKETS = MARKETS.filter((m) => m.capabilities.includes('floatRanged')).map((m) => m.slug);

/**
 * The read-model tags a cached body (by its cache name) is built from; the materializer names the
 * same tags (`<event kind>:<market>`) in the NOTIFY of every commit that changed them.
 */
export function bodyDeps(name: string): readonly string[] | undefined {
  const colon = name.indexOf(':');
  const [what, arg] = colon < 0 ? [name, ''] : [name.slice(0, colon), name.slice(colon + 1)];
  if (what === 'prices') return [listingTag(arg)];
  if (what === 'buyorders') return [`buyorder:${arg}`];
  if (what === 'latest') return arg.split(',').map(listingTag);
  if (what === 'float-ranged') return (arg === '*' ? FLOAT_RANGED_MARKETS : [arg]).map((m) => `floatRanged:${m}`);
  if (what === 'store') return [listingTag(STORE), `orderBook:${STORE}`];
  return undefined;
}

/** A thrown error that is not one of ours: Fastify's own 4xx, PostgreSQL away or not ready, or a bug. */
function asApiError(err: unknown): ApiError {
  const status = (err as { statusCode?: number }).statusCode ?? 500;
  const code = String((err as { code?: unknown }).code ?? '');
  const message = err instanceof Error ? err.message : String(err);
  if (status === 413) return new ApiError(413, 'payload_too_large', 'the request body is larger than 64 KiB');
  if (status === 415) return new ApiError(415, 'unsupported_media_type', 'send the body as application/json');
  if (status === 400) return new ApiError(400, 'bad_parameter', `body: ${message}`);
  if (status > 400 && status < 500) return new ApiError(status, 'bad_request', message);
  if (code === '42P01')
    return new ApiError(
      503,
      'not_available',
      'the read model is not ready yet (no materializer has run); try again shortly',
      {
        'retry-after': '5',
      },
    );
  // Connection exceptions (08…), operator intervention (57P…), refused or dropped connections.
  if (
    /^(08|57P)/.test(code) ||
    ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT'].includes(code) ||
    /Connection terminated/.test(message)
  )
    return new ApiError(503, 'not_available', 'the database is unavailable; try again shortly', { 'retry-after': '5' });
  return new ApiError(500, 'internal', 'internal error; try again shortly');
}

export function buildApp(deps: AppDeps): FastifyInstance {
  const app = Fastify({
    logger: false,
    bodyLimit: 64 * 1024,
    routerOptions: { caseSensitive: true },
    clientErrorHandler,
    frameworkErrors,
    // A request without Host reaches us (Node's own answer is an empty 400), and we refuse it in
    // our shape below.
    http: { requireHostHeader: false },
  });
  answerExpectations(app.server);
  const routes = routeMethods(app);
  refuseConnect(app.server, routes.allowFor);
  // JSON only: a text/plain body is a 415, not a string handed to the handlers.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, parseJsonBody);
  const failedAuth = deps.failedAuth ?? new FailedAuthLimiter();
  const clock = deps.clock ?? Date.now;
  const metrics = deps.metrics ?? new ApiMetrics();
  // Each cached body depends on the tables of one or a few marketplaces: it is rebuilt when a
  // commit touched those (or cycle markers touched everything), not on every commit of any one.
  const bodies = new BodyCache((name) => deps.version(bodyDeps(name)));
  const answers = new AnswerCache(() => deps.version());
  // Per marketplace and for all of them combined, the catalogue of the current read-model version.
  const catalogues = new VersionedCache<CatalogueShard>((name) =>
    deps.version((name === '*' ? CATALOGUE_MARKETS : [name]).map(listingTag)),
  );
  metrics.watchCaches({ bodies, answers, catalogues });
  const shardsOf = (markets: readonly MarketSlug[]) =>
    Promise.all(
      markets.map(async (market) => ({
        market,
        // Fresh: these shards are built into bodies stored under the current version.
        shard: await catalogues.fresh(market, () => deps.read.catalogue(market)),
      })),
    );
  const everyMarket = CATALOGUE_MARKETS.join(',');

  /** The `items` JSON of 4.3/4.4; every marketplace (the default) is served from one combined shard. */
  async function itemsOf(markets: readonly MarketSlug[], only?: readonly string[], fresh = false): Promise<Buffer> {
    if (markets.join(',') === everyMarket) {
      const build = async () => combine(await shardsOf(markets));
      return itemsJson(await (fresh ? catalogues.fresh('*', build) : catalogues.get('*', build)), only);
    }
    return itemsJson(combine(await shardsOf(markets), only));
  }

  // HTTP/1.1 requires Host (RFC 9112 §3.2); Node's own refusal was an empty 400.
  app.addHook('onRequest', async (req) => {
    if (req.raw.httpVersion === '1.1' && req.headers.host === undefined)
      throw new ApiError(400, 'bad_request', 'an HTTP/1.1 request needs a Host header');
  });

  // Every answer's latency by route pattern; 'finish' also fires for hijacked replies.
  app.addHook('onRequest', async (req, reply) => {
    const t0 = performance.now();
    reply.raw.once('finish', () =>
      metrics.requests.observe(
        { route: req.routeOptions.url ?? 'unmatched', method: req.method, status: String(reply.raw.statusCode) },
        (performance.now() - t0) / 1000,
      ),
    );
  });

  // ---- keys, plans, ACLs, limits: before any handler -----------------------------------------
  app.addHook('onRequest', async (req) => {
    const endpoint = req.routeOptions.config.endpoint;
    if (!endpoint) return;
    const key = await deps.keys.authenticate(presentedKey(req));
    if (typeof key === 'string') {
      // Guessing is limited per address; a valid key from the same address still passes (a
      // customer behind one NAT with a misconfigured client keeps working). Refusals stay cheap:
      // authentication is an in-memory lookup (keys.ts).
      failedAuth.record(req.ip, clock());
      const wait = failedAuth.blockedFor(req.ip, clock());
      metrics.authFailures.inc({ reason: wait > 0 ? 'throttled' : key });
      if (wait > 0)
        throw new ApiError(
          429,
          'auth_rate_limited',
          `too many failed authentications from this address (${failedAuth.perMinute} a minute); retry after ${wait} s`,
          { 'retry-after': String(wait) },
        );
      const [code, message] = AUTH_FAILURES[key];
      throw new ApiError(401, code, message, { 'www-authenticate': 'ApiKey header="x-api-key"' });
    }
    const market = (req.params as { market?: string }).market;
    const need = planFor(endpoint, market);
    if (!planIncludes(key.plan, need))
      throw new ApiError(403, 'plan_required', `this endpoint needs the ${need} plan; the key's plan is ${key.plan}`);
    if (key.allowedEndpoints && !key.allowedEndpoints.includes(endpoint))
      throw new ApiError(403, 'endpoint_not_allowed', `the key is not allowed to call ${endpoint}`);
    const verdict = await deps.limiter.hit(key, clock());
    if (!verdict.ok) {
      metrics.rateLimited.inc({ window: verdict.window });
      throw new ApiError(
        429,
        'rate_limited',
        `rate limit exceeded (${verdict.window === 'second' ? `${key.perSecond} per second` : verdict.window === 'minute' ? `${key.perMinute} per minute` : `${key.perDay} per day`}); retry after ${verdict.retryAfterS} s`,
        { 'retry-after': String(verdict.retryAfterS) },
      );
    }
    req.apiKey = key;
  });
  // Path, query and body strings: a NUL byte is refused here, before any SQL sees it.
  app.addHook('preValidation', refuseNulBytes);

  app.setErrorHandler((err, req, reply) => {
    const e = err instanceof ApiError ? err : asApiError(err);
    if (e.status >= 500) deps.logger.error({ err, url: req.url.slice(0, 300) }, 'request failed');
    for (const [h, v] of Object.entries(e.headers)) reply.header(h, v);
    return reply.code(e.status).header('cache-control', 'no-store').send(e.body());
  });
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0] ?? '';
    const allow = routes.allowFor(path);
    reply.header('cache-control', 'no-store');
    if (allow === undefined)
      return reply
        .code(404)
        .send(new ApiError(404, 'not_found', `no route ${req.method} ${path.slice(0, 200)}`).body());
    // A path of ours with a method it does not serve (any method, unknown ones included).
    reply.header('allow', allow);
    if (req.method === 'OPTIONS') return reply.code(204).send();
    return reply
      .code(405)
      .send(new ApiError(405, 'method_not_allowed', `${req.method} is not allowed here; allowed: ${allow}`).body());
  });

  const key = (req: FastifyRequest) => req.apiKey as ApiKey;
  const q = (req: FastifyRequest) => req.query as Record<string, unknown>;

  // ---- documentation: no key; the status page (pages/) -----------------------------------------
  app.get('/openapi.json', async () => openApiDocument());
  registerReference(app);
  registerStatusPage(app, { read: deps.read, status: deps.status });

  // ---- 4.1 listings of one marketplace ------------------------------------------------------------
  app.get<{ Params: { market: string } }>(
    '/v1/prices/:market',
    { config: { endpoint: 'GET /v1/prices/{market}' } },
    async (req, reply) => {
      const market = marketParam(req.params.market, LIST_MARKETS);
      const body = await bodies.get(
        `prices:${market}`,
        async () => `{"data":${JSON.stringify(await deps.read.marketListings(market))}`,
      );
      return sendBody(req, reply, body, envelopeTail(key(req), getMarket(market).label, body.builtAt));
    },
  );

  // ---- 4.2 buy orders --------------------------------------------------------------------------------
  app.get<{ Params: { market: string } }>(
    '/v1/prices/:market/buyorder',
    { config: { endpoint: 'GET /v1/prices/{market}/buyorder' } },
    async (req, reply) => {
      const market = marketParam(req.params.market, BUYORDER_MARKETS);
      const body = await bodies.get(
        `buyorders:${market}`,
        async () => `{"data":${JSON.stringify(await deps.read.buyorders(market))}`,
      );
      return sendBody(req, reply, body, envelopeTail(key(req), getMarket(market).label, body.builtAt));
    },
  );

  // ---- 4.3 / 4.4 the combined catalogue -------------------------------------------------------------
  app.get('/v1/prices/latest', { config: { endpoint: 'GET /v1/prices/latest' } }, async (req, reply) => {
    const markets = parseMarkets(q(req).markets, CATALOGUE_MARKETS);
    const body = await bodies.get(`latest:${markets.join(',')}`, async () =>
      // Fresh shards: this body is stored under the current version (see VersionedCache.fresh).
      Buffer.concat([ITEMS_OPEN, await itemsOf(markets, undefined, true)]),
    );
    return sendBody(req, reply, body, envelopeTail(key(req), undefined, body.builtAt));
  });

  app.post('/v1/prices/latest', { config: { endpoint: 'POST /v1/prices/latest' } }, async (req, reply) => {
    const b = req.body as { items?: unknown; markets?: unknown } | null;
    if (!b || typeof b !== 'object' || Array.isArray(b)) throw badParameter('body', 'must be a JSON object');
    if (!Array.isArray(b.items)) throw badParameter('items', 'must be an array of market_hash_name strings');
    if (b.items.length > 100) throw badParameter('items', `at most 100 entries (got ${b.items.length})`);
    if (!b.items.every((i) => typeof i === 'string' && i.length > 0 && i.length <= 300))
      throw badParameter('items', 'every entry must be a non-empty string');
    const markets = parseMarkets(b.markets, CATALOGUE_MARKETS);
    const items = await itemsOf(markets, [...new Set(b.items as string[])]);
    const k = key(req);
    return sendJson(
      reply,
      Buffer.concat([
        ITEMS_OPEN,
        items,
        Buffer.from(
          `,"requestor":${JSON.stringify(k.customer)},"plan":${JSON.stringify(k.plan)},"timestamp":"${new Date().toISOString()}"}`,
        ),
      ]),
    );
  });

  // ---- 4.5 search ----------------------------------------------------------------------------------------
  app.get('/v1/prices/search', { config: { endpoint: 'GET /v1/prices/search' } }, async (req, reply) => {
    const name = requiredString(q(req), 'market_hash_name');
    const markets = parseMarkets(q(req).markets, [...CATALOGUE_MARKETS, STORE]);
    const data = await answers.get(`search\u0000${name}\u0000${markets.join(',')}`, () =>
      deps.read.search(name, markets),
    );
    return sendJson(
      reply,
      `{"market_hash_name":${JSON.stringify(name)},"data":${data}${envelopeTail(key(req), undefined, Date.now())}`,
    );
  });

  // ---- 4.6 history ---------------------------------------------------------------------------------------
  app.get<{ Params: { market: string } }>(
    '/v1/prices/:market/history',
    { config: { endpoint: 'GET /v1/prices/{market}/history' } },
    async (req, reply) => {
      const market = marketParam(req.params.market, HISTORY_MARKETS);
      const name = requiredString(q(req), 'market_hash_name');
      const phase = typeof q(req).phase === 'string' ? (q(req).phase as string) : '';
      const resolution = (q(req).resolution ?? 'daily') as string;
      if (resolution !== 'daily' && resolution !== 'hourly')
        throw badParameter('resolution', "one of 'daily', 'hourly'");
      const points = await answers.get(`history\u0000${market}\u0000${name}\u0000${phase}\u0000${resolution}`, () =>
        deps.read.history(market, name, phase, resolution),
      );
      // No points: a typo must not look like "no data". Only a name never seen is a 404.
      if (points === '[]' && (await answers.get(`known\u0000${name}`, () => deps.read.knowsItem(name))) === 'false')
        throw new ApiError(404, 'not_found', `no item named '${name}' was ever listed or imported (names are exact)`);
      const head = {
        market,
        currency: getMarket(market).currency,
        market_hash_name: name,
        phase,
        resolution,
      };
      return sendJson(
        reply,
        `${JSON.stringify(head).slice(0, -1)},"points":${points}${envelopeTail(key(req), undefined, Date.now())}`,
      );
    },
  );

  // ---- 4.8 float-ranged --------------------------------------------------------------------------------
  app.get('/v2/prices/float-ranged', { config: { endpoint: 'GET /v2/prices/float-ranged' } }, async (req, reply) => {
    const m = q(req).market;
    const floatMarkets = MARKETS.filter((x) => x.capabilities.includes('floatRanged')).map((x) => x.slug);
    if (m !== undefined && (typeof m !== 'string' || !floatMarkets.includes(m as MarketSlug)))
      throw badParameter('market', `one of ${floatMarkets.join(', ')}`);
    const market = m as MarketSlug | undefined;
    const body = await bodies.get(
      `float-ranged:${market ?? '*'}`,
      async () => `{"data":${JSON.stringify(await deps.read.floatRanged(market))}`,
    );
    return sendBody(
      req,
      reply,
      body,
      envelopeTail(key(req), market ? getMarket(market).label : undefined, body.builtAt),
    );
  });

  // ---- 4.9 float buy orders --------------------------------------------------------------------------------
  app.get<{ Params: { market: string } }>(
    '/v1/prices/:market/float-buyorder',
    { config: { endpoint: 'GET /v1/prices/{market}/float-buyorder' } },
    async (req, reply) => {
      const market = marketParam(req.params.market, BUYORDER_MARKETS);
      const name = typeof q(req).market_hash_name === 'string' ? (q(req).market_hash_name as string) : undefined;
      const float = q(req).float;
      if (float !== undefined && (typeof float !== 'string' || !/^(0(\.\d{1,20})?|1(\.0{1,20})?)$/.test(float)))
        throw badParameter('float', 'a decimal between 0 and 1');
      const data = await deps.read.floatBuyorders(market, name, float as string | undefined);
      return reply.header('cache-control', CACHE_CONTROL).send({
        data,
        source: getMarket(market).label,
        requestor: key(req).customer,
        plan: key(req).plan,
        timestamp: new Date().toISOString(),
      });
    },
  );

  // ---- 4.10 / 4.11 sales --------------------------------------------------------------------------------
  app.get('/v1/market-sales/search', { config: { endpoint: 'GET /v1/market-sales/search' } }, async (req, reply) => {
    const name = requiredString(q(req), 'market_hash_name');
    const markets = parseMarkets(q(req).markets, SALES_MARKETS);
    // "The last 72 hours" by the data's clock (the same as the wall clock in production).
    const until = (await deps.read.clock()) ?? new Date();
    const since = new Date(until.getTime() - 72 * 3_600_000);
    const data = await deps.read.sales(name, since, new Date(until.getTime() + 1), markets);
    return reply.header('cache-control', CACHE_CONTROL).send({
      market_hash_name: name,
      from: since.toISOString(),
      to: until.toISOString(),
      data,
      requestor: key(req).customer,
      plan: key(req).plan,
      timestamp: new Date().toISOString(),
    });
  });

  app.get('/v1/market-sales/export', { config: { endpoint: 'GET /v1/market-sales/export' } }, async (_req, reply) => {
    const e = await deps.exports.current();
    if (!e)
      throw new ApiError(503, 'not_available', 'no complete sales data yet; try again after the first sales cycles');
    const stamp = e.windowEnd.toISOString().replace(/[:.]/g, '-');
    return reply
      .header('content-type', 'application/zip')
      .header('content-disposition', `attachment; filename="market-sales-${stamp}.zip"`)
      .header('cache-control', 'private, max-age=300')
      .header('x-window-start', e.windowStart.toISOString())
      .header('x-window-end', e.windowEnd.toISOString())
      .send(e.bytes);
  });

  // ---- 4.12 market cap ------------------------------------------------------------------------------------
  app.get('/v1/indexes/market-cap', { config: { endpoint: 'GET /v1/indexes/market-cap' } }, async (req, reply) => {
    const resolution = (q(req).resolution ?? 'daily') as string;
    if (resolution !== 'daily' && resolution !== 'hourly') throw badParameter('resolution', "one of 'daily', 'hourly'");
    const clamp = (v: number | undefined, lo: number, hi: number, dflt: number) =>
      Math.min(hi, Math.max(lo, v ?? dflt));
    const days = clamp(optionalInt(q(req), 'days'), 7, 365, 30);
    const hours = clamp(optionalInt(q(req), 'hours'), 12, 168, 48);
    const now = (await deps.read.clock()) ?? new Date();
    const since =
      resolution === 'daily'
        ? new Date(now.getTime() - days * 86_400_000)
        : new Date(now.getTime() - hours * 3_600_000);
    let points = await deps.read.marketCap(resolution, since);
    let source = resolution === 'hourly' ? 'hourly' : 'daily';
    // Hourly reads the pre-aggregated hourly table; without it, the daily table's points serve.
    if (resolution === 'hourly' && points.length === 0) {
      points = (await deps.read.marketCap('daily', since)).map((p) => ({ ...p, cleaned: false }));
      source = 'daily-fallback';
    }
    return reply.header('cache-control', CACHE_CONTROL).send({
      market: 'cn-a',
      currency: 'CNY',
      resolution,
      ...(resolution === 'daily' ? { days } : { hours }),
      source,
      points,
      requestor: key(req).customer,
      plan: key(req).plan,
      timestamp: new Date().toISOString(),
    });
  });

  // ---- following changes (beyond the spec): changes/ ------------------------------------------------
  registerChangeRoutes(app, {
    log: deps.read.changeLog(),
    waker: deps.changeWaker ?? new ChangeWaker(),
    pollMs: deps.changePollMs,
  });

  // ---- status (beyond the spec) -------------------------------------------------------------------------
  app.get('/v1/status', { config: { endpoint: 'GET /v1/status' } }, async (req, reply) => {
    const report = await loadStatus(deps.read, deps.status);
    return reply.header('cache-control', 'no-cache').send({
      ...report,
      requestor: key(req).customer,
      plan: key(req).plan,
      timestamp: new Date().toISOString(),
    });
  });

  // ---- 4.7 the store (registered last: /v1/{store_market} is the most general path) ---------------------
  app.get<{ Params: { store: string } }>(
    '/v1/:store',
    { config: { endpoint: 'GET /v1/{store_market}' } },
    async (req, reply) => {
      if (req.params.store !== STORE) throw new ApiError(404, 'not_found', `no route GET /v1/${req.params.store}`);
      const name = typeof q(req).market_hash_name === 'string' ? (q(req).market_hash_name as string) : undefined;
      if (name) {
        const data = await deps.read.store(STORE, name);
        return reply.header('cache-control', CACHE_CONTROL).send({
          data,
          source: getMarket(STORE).label,
          requestor: key(req).customer,
          plan: key(req).plan,
          timestamp: new Date().toISOString(),
        });
      }
      const body = await bodies.get('store', async () => `{"data":${JSON.stringify(await deps.read.store(STORE))}`);
      return sendBody(req, reply, body, envelopeTail(key(req), getMarket(STORE).label, body.builtAt));
    },
  );

  return app;
}

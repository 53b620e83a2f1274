/**
 * The HTTP application: every endpoint of spec section 4 plus the change feed and /v1/status,
 * behind keys, plans, endpoint ACLs and rate limits; one error body everywhere. Fastify: routing
 * with parametric paths, a hook for the key check before any handler runs, body limits and
 * content-type checks, and each route's JSON schemas (routes/) for validation, serialisation and
 * the OpenAPI document (@fastify/swagger). This module wires those; the endpoints are in routes/.
 */
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type ServerOptions,
  type ServerResponse,
} from 'node:http';
import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import swagger from '@fastify/swagger';
import { readTag, type MarketSlug } from '@skinprices/domain';
import type { Logger } from '@skinprices/runtime';
import { isPoolBusy } from '@skinprices/store';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyRequest } from 'fastify';
import { authHook } from './auth.js';
import { AnswerCache, BodyCache, type DerivedVersion } from './bodies.js';
import { CatalogueCache } from './catalogue-cache.js';
import { ListBodyCache } from './list-cache.js';
import { SharedFieldReads } from './list-reads.js';
import { Slots } from './slots.js';
import { ChangeWaker, type StreamSlotCounter } from './changes/waker.js';
import {
  answerExpectations,
  clientErrorHandler,
  frameworkErrors,
  parseJsonBody,
  refuseConnect,
  refuseNulBytes,
  routeMethods,
} from './edge.js';
import { ApiError } from './errors.js';
import { hotPath, preparedPosts, READ_BODY } from './hot-path.js';
import type { ApiKey, KeyStore } from './keys.js';
import { FailedAuthLimiter, type RateLimiter } from './limits.js';
import { ApiMetrics } from './metrics.js';
import { swaggerOptions } from './openapi.js';
import { registerReference } from './pages/reference.js';
import { registerStatusPage } from './pages/status-page.js';
import type { EndpointId } from './plans.js';
import type { ReadModel } from './readmodel.js';
import { registerRoutes } from './routes/index.js';
import { CATALOGUE_SLUGS, FLOAT_RANGED_MARKETS, LIST_SLUGS, slugs } from './routes/exposure.js';
import type { StatusOptions } from './status.js';
import { validatorCompiler } from './validation.js';
import { registerWebhookRoutes, type WebhookSettings } from './webhooks/routes.js';

/** Marketplaces of GET /v1/prices/{market} (spec 4.1). */
export const LIST_MARKETS = LIST_SLUGS;
/** Marketplaces of the combined catalogue (4.3). */
export const CATALOGUE_MARKETS = CATALOGUE_SLUGS;

export interface AppDeps {
  keys: KeyStore;
  limiter: RateLimiter;
  read: ReadModel;
  /**
   * The read model's version: of what `deps` names (tags such as `listing:cn-a`, see
   * ReadModelVersion), or of everything without `deps`. A constant serves tests that never rebuild.
   */
  version: (deps?: readonly string[]) => number;
  /** The derived values' version and how far caches may lag behind it. @default part of `version` */
  derived?: DerivedVersion;
  /**
   * Counts untagged notifications and reconnections (ReadModelVersion.resets): patched list
   * bodies are rebuilt when it moves. @default the untagged part of `version`
   */
  resets?: () => number;
  /**
   * Calls the listener whenever the version moved (main.ts: ReadModelVersion.onBump), so patched
   * list bodies follow their data ahead of requests. @default none: they refresh when asked
   */
  watch?: (listener: () => void) => void;
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
  /** Open streams per key. @default this process's (StreamSlots); a cluster worker's: SharedStreamSlots */
  streamSlots?: StreamSlotCounter;
  /**
   * Whole-list reads (list bodies' first builds and rebuilds, catalogue shards) at once
   * (slots.ts). @default 2
   */
  wholeReadsAtOnce?: number;
  /**
   * How long close() lets the responses in flight finish before it cuts their connections (a
   * client that never sends the rest of its body must not hold a stop). @default 10000
   */
  drainMs?: number;
  /**
   * Where the webhook endpoints write and how they seal secrets (serve.ts: from the config).
   * @default none: they answer 503 webhooks_unavailable
   */
  webhooks?: WebhookSettings;
}

declare module 'fastify' {
  interface FastifyRequest {
    apiKey?: ApiKey;
  }
  interface FastifyContextConfig {
    endpoint?: EndpointId;
  }
}

const listingTag = (market: string) => readTag('LISTINGS', market);
type Fallback = (req: IncomingMessage, res: ServerResponse) => void;
/** What Fastify passes a server factory, of its options (with its defaults applied). */
type ServerSettings = {
  http?: ServerOptions;
  keepAliveTimeout?: number;
  requestTimeout?: number;
  connectionTimeout?: number;
  maxRequestsPerSocket?: number;
};
type HotHandler = (req: IncomingMessage, res: ServerResponse, fallback: Fallback) => boolean;
const FLOAT_RANGED_SLUGS = slugs(FLOAT_RANGED_MARKETS);

/**
 * The read-model tags a cached body (by its cache name) is built from; the materializer names the
 * same tags (`<event kind>:<market>`) in the NOTIFY of every commit that changed them.
 */
export function bodyDeps(name: string): readonly string[] | undefined {
  const colon = name.indexOf(':');
  const [what, arg] = colon < 0 ? [name, ''] : [name.slice(0, colon), name.slice(colon + 1)];
  if (what === 'prices') return [listingTag(arg)];
  if (what === 'buyorders') return [readTag('BUYORDERS', arg)];
  if (what === 'latest') return arg.split(',').map(listingTag);
  if (what === 'float-ranged') return (arg === '*' ? FLOAT_RANGED_SLUGS : [arg]).map((m) => readTag('FLOAT_RANGED', m));
  if (what === 'order-book') return [listingTag(arg), readTag('ORDER_BOOK', arg)];
  return undefined;
}

/**
 * A request the route's schema refused: a path parameter outside its set is an unknown resource
 * (404), anything else a bad parameter naming the field and what it must be.
 */
function validationError(err: FastifyError, req: FastifyRequest): ApiError {
  const first = err.validation?.[0];
  const where = err.validationContext ?? 'request';
  const field =
    (first?.params as { missingProperty?: string } | undefined)?.missingProperty ??
    first?.instancePath.replace(/^\//, '').replaceAll('/', '.') ??
    '';
  if (where === 'params') {
    const value = String((req.params as Record<string, unknown>)[field] ?? '');
    return field === 'market'
      ? new ApiError(404, 'not_found', `no such marketplace on this endpoint: '${value.slice(0, 100)}'`)
      : new ApiError(404, 'not_found', `no route ${req.method} ${req.url.split('?')[0]?.slice(0, 200) ?? ''}`);
  }
  const allowed = (first?.params as { allowedValues?: unknown[] } | undefined)?.allowedValues;
  const why = allowed ? `one of ${allowed.map(String).join(', ')}` : (first?.message ?? 'invalid');
  return new ApiError(400, 'bad_parameter', `${field || where}: ${why}`);
}

/** A thrown error that is not one of ours: Fastify's own 4xx, PostgreSQL away or not ready, or a bug. */
function asApiError(err: unknown, req: FastifyRequest): ApiError {
  if ((err as FastifyError).validation) return validationError(err as FastifyError, req);
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
  // Every read connection stayed busy for the pool's whole wait (DB_ACQUIRE_TIMEOUT_MS): an
  // overload that passes, not a defect, as in a cold start on a saturated machine, when the
  // lists' first builds hold every connection for seconds each.
  if (isPoolBusy(err))
    return new ApiError(503, 'not_available', 'the service is busy; try again shortly', { 'retry-after': '1' });
  return new ApiError(500, 'internal', 'internal error; try again shortly');
}

/**
 * Closing ends every connection as soon as no request is in progress on it.
 * `http.Server.close()` closes the connections idle at that moment and then waits for the rest,
 * and two kinds would hold it until the client leaves, long after the shutdown's deadline: a
 * keep-alive connection whose response was in flight (a request being served, a change stream
 * being ended), idle after it for the keep-alive timeout (72 s); and a connection that has not
 * sent a byte yet (a client's pool opening one more, a browser's preconnect), which Node counts as
 * a request starting. So once closing, a response not yet begun says `Connection: close` (Node
 * then closes its connection after it), every response that ends closes what is left idle or
 * unused, and after `drainMs` whatever is still open is cut.
 */
function closeConnectionsWhenDone(app: FastifyInstance, drainMs: number): void {
  const server = app.server;
  const sockets = new Set<Socket>();
  const open = new Set<ServerResponse>();
  let closing = false;
  const closeQuiet = (): void => {
    server.closeIdleConnections();
    for (const socket of sockets) if (socket.bytesRead === 0) socket.destroy();
  };
  const lastOne = (res: ServerResponse): void => {
    if (closing && !res.headersSent) res.setHeader('connection', 'close');
  };
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('request', (_req: IncomingMessage, res: ServerResponse) => {
    lastOne(res);
    open.add(res);
    res.once('close', () => {
      open.delete(res);
      if (closing) closeQuiet();
    });
  });
  let cut: NodeJS.Timeout | undefined;
  app.addHook('preClose', async () => {
    closing = true;
    for (const res of open) lastOne(res);
    // After the other preClose hooks, once the server has stopped accepting (server.close()).
    setImmediate(closeQuiet);
    cut = setTimeout(() => server.closeAllConnections(), drainMs);
    cut.unref();
  });
  app.addHook('onClose', async () => clearTimeout(cut));
}

/** Fastify with our edge rules: one error shape for what Node and the router refuse, JSON bodies only. */
function createServer(): {
  app: FastifyInstance;
  allowFor: (path: string) => string | undefined;
  setHotPath: (hot: HotHandler) => void;
} {
  let hot: HotHandler | undefined;
  const app = Fastify({
    // Our server, so that the hot path (hot-path.ts) sees a request before the framework; set up as
    // Fastify sets up its own (fastify/lib/server.js).
    serverFactory: (handler, options) => {
      const fastify: Fallback = handler as Fallback;
      const o = options as ServerSettings;
      const server = createHttpServer(o.http ?? {}, (req, res) => {
        if (!hot?.(req, res, fastify)) fastify(req, res);
      });
      server.keepAliveTimeout = o.keepAliveTimeout ?? 72_000;
      server.requestTimeout = o.requestTimeout ?? 0;
      server.setTimeout(o.connectionTimeout ?? 0);
      if ((o.maxRequestsPerSocket ?? 0) > 0) server.maxRequestsPerSocket = o.maxRequestsPerSocket as number;
      return server;
    },
    logger: false,
    // A request that reaches us while closing (on a connection already open) is answered in full,
    // with `Connection: close`, rather than with Fastify's own 503 in another shape: the pools
    // stop only after the server has closed.
    return503OnClosing: false,
    bodyLimit: 64 * 1024,
    routerOptions: { caseSensitive: true },
    clientErrorHandler,
    frameworkErrors,
    // A request without Host reaches us (Node's own answer is an empty 400), and we refuse it in
    // our shape below.
    http: { requireHostHeader: false },
  });
  app.setValidatorCompiler(validatorCompiler);
  answerExpectations(app.server);
  const routes = routeMethods(app);
  refuseConnect(app.server, routes.allowFor);
  // JSON only: a text/plain body is a 415, not a string handed to the handlers.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, parseJsonBody);
  return { app, allowFor: routes.allowFor, setHotPath: (h) => (hot = h) };
}

/** What runs before every handler: the Host rule, latency metrics, the key check, NUL bytes. */
function addRequestHooks(app: FastifyInstance, deps: AppDeps, metrics: ApiMetrics): void {
  // Every answer's latency by route pattern ('finish' also fires for hijacked replies); and
  // HTTP/1.1 requires Host (RFC 9112 §3.2), where Node's own refusal is an empty 400. One hook
  // with a callback, not two async ones: each costs a promise per request.
  app.addHook('onRequest', (req, reply, done) => {
    const t0 = performance.now();
    reply.raw.once('finish', () =>
      metrics.observeRequest(req.routeOptions.url ?? 'unmatched', req.method, reply.raw.statusCode, t0),
    );
    if (req.raw.httpVersion === '1.1' && req.headers.host === undefined)
      done(new ApiError(400, 'bad_request', 'an HTTP/1.1 request needs a Host header'));
    else done();
  });
  // Keys, plans, ACLs, limits: before any handler, and before the schemas look at the request.
  app.addHook(
    'onRequest',
    authHook({
      keys: deps.keys,
      limiter: deps.limiter,
      failedAuth: deps.failedAuth ?? new FailedAuthLimiter(),
      metrics,
      clock: deps.clock ?? Date.now,
    }),
  );
  // A body the hot path read before handing the request on (hot-path.ts) is parsed from its bytes.
  app.addHook('preParsing', async (req, _reply, payload) => {
    const body = (req.raw as unknown as Record<symbol, Buffer | undefined>)[READ_BODY];
    return body ? Readable.from([body]) : payload;
  });
  // Path, query and body strings: a NUL byte is refused here, before any SQL sees it.
  app.addHook('preValidation', refuseNulBytes);
}

/** Every refusal in the one error shape; a path of ours with another method is a 405 with Allow. */
/**
 * SQLSTATEs a query gets when the schema it reads changes under it: an undefined column,
 * function or object (a view replaced with more columns, a function created later in the same
 * run), an internal error such as "could not open relation with OID", a cached plan whose result
 * type changed. While the materializer migrates the read model (its first start, an upgrade)
 * these mean "try again shortly"; at any other time they mean a defect, and stay a 500.
 */
const SCHEMA_IN_FLUX = new Set(['42703', '42883', '42704', 'XX000', '0A000']);

/** 503 while a migration runs, for an error that a schema being migrated explains. */
async function duringMigration(err: unknown, read: Pick<ReadModel, 'migrating'>): Promise<ApiError | undefined> {
  if (!SCHEMA_IN_FLUX.has(String((err as { code?: unknown }).code ?? ''))) return undefined;
  const running = await read.migrating().catch(() => false);
  return running
    ? new ApiError(503, 'not_available', 'the read model is being migrated; try again shortly', { 'retry-after': '2' })
    : undefined;
}

function addErrorHandlers(
  app: FastifyInstance,
  allowFor: (path: string) => string | undefined,
  logger: Logger,
  read: Pick<ReadModel, 'migrating'>,
): void {
  app.setErrorHandler(async (err, req, reply) => {
    const e = err instanceof ApiError ? err : ((await duringMigration(err, read)) ?? asApiError(err, req));
    if (e.status >= 500) logger.error({ err, url: req.url.slice(0, 300) }, 'request failed');
    for (const [h, v] of Object.entries(e.headers)) reply.header(h, v);
    return reply.code(e.status).header('cache-control', 'no-store').send(e.body());
  });
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0] ?? '';
    const allow = allowFor(path);
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
}

export function buildApp(deps: AppDeps): FastifyInstance {
  const { app, allowFor, setHotPath } = createServer();
  closeConnectionsWhenDone(app, deps.drainMs ?? 10_000);
  const metrics = deps.metrics ?? new ApiMetrics();
  // Each cached body depends on the tables of one or a few marketplaces: it is rebuilt when a
  // commit touched those, not on every commit of any one; and when only derived values moved,
  // at most every `derived.maxLagMs`.
  const bodies = new BodyCache((name) => deps.version(bodyDeps(name)), 1_000, deps.derived);
  const wholeReads = new Slots(deps.wholeReadsAtOnce ?? 2);
  // Patched lists follow derived values in their rows (statistics, outlier verdicts) as promptly as
  // their tags: a patch reads only changed rows. Liquidity scores, which derive transactions change
  // for thousands of items at once, at most every `derived.maxLagMs` (LiquidityLag).
  const lists = new ListBodyCache(
    (name) => deps.version(bodyDeps(name)) + (deps.derived?.version() ?? 0),
    deps.resets ?? (() => deps.version([])),
    // Half a second, not the second of the other caches: a patch reads only the changed rows
    // (~20 ms of PostgreSQL at 35,000 rows) and runs ahead of requests, and this wait is most of
    // the way from a commit to the answer (the freshness target: p99 ≤ 2 s from the poll).
    500,
    (list, how, seconds, rows, detail) => {
      metrics.listRefresh.observe({ how }, seconds);
      metrics.listRefreshRows.observe({ how }, rows);
      // A refresh this slow holds every price change of its list back: worth a line of its own.
      if (seconds > 1) deps.logger.info({ list, how, seconds, rows, ...detail }, 'slow list body refresh');
    },
    deps.derived && {
      version: () => (deps.derived?.scores ?? deps.derived?.version)?.() ?? 0,
      lagMs: deps.derived.maxLagMs,
    },
    wholeReads,
  );
  const scores = new SharedFieldReads((position) => deps.read.liquidityScores(position));
  deps.watch?.(() => lists.changed());
  app.addHook('onClose', async () => lists.stop());
  const answers = new AnswerCache(() => deps.version(), undefined, deps.derived);
  const catalogues = new CatalogueCache(
    CATALOGUE_SLUGS,
    (markets) => deps.version(markets.map(listingTag)),
    (market) => wholeReads.run(() => deps.read.catalogue(market as MarketSlug)),
    deps.derived,
  );
  metrics.watchCaches({ bodies, lists, answers, catalogues });
  setHotPath(
    hotPath({
      keys: deps.keys,
      limiter: deps.limiter,
      metrics,
      answers,
      catalogues,
      posts: preparedPosts(),
      clock: deps.clock ?? Date.now,
    }),
  );
  addRequestHooks(app, deps, metrics);
  addErrorHandlers(app, allowFor, deps.logger, deps.read);

  // The document is generated from the routes registered after the plugin (hence the order).
  void app.register(swagger, swaggerOptions);
  void app.register(async (scope) => {
    // Documentation and the status page need no key (pages/).
    scope.get('/openapi.json', { schema: { hide: true } }, async () => scope.swagger());
    registerReference(scope);
    registerStatusPage(scope, { read: deps.read, status: deps.status });
    registerRoutes(
      scope,
      { read: deps.read, bodies, lists, answers, catalogues, wholeReads, scores, status: deps.status },
      {
        log: deps.read.changeLog(),
        waker: deps.changeWaker ?? new ChangeWaker(),
        pollMs: deps.changePollMs,
        slots: deps.streamSlots,
      },
    );
    registerWebhookRoutes(scope, deps.webhooks);
  });
  return app;
}

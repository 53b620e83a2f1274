/**
 * GET /status: a page for people, rendered on the server (no script, no build step): the data's
 * freshness per marketplace and kind and the materializer's heartbeats and lag (the very report of
 * GET /v1/status, status.ts), and for one searched item (`?item=<market_hash_name>`) its current
 * prices across marketplaces (ReadModel.search, as GET /v1/prices/search) and a chart of its daily
 * closes on one marketplace (ReadModel.history; `&market=` to choose, by default the first
 * marketplace with data, listed ones first).
 *
 * A key is required, checked exactly as for GET /v1/status (plan, ACL, rate limits, failed-auth
 * limiting: the route declares that endpoint), because the page shows keyed data. The item part
 * also needs the key to be allowed GET /v1/prices/search and /history; otherwise it says so. A
 * person's browser cannot set a header, so the key may also come from a cookie set by the page's
 * own form (POST /status/key):
 * - HttpOnly (no script reads it), SameSite=Strict (no other site's link or form sends it),
 *   Path=/status (no other route sees it), Secure over HTTPS, 8 hours;
 * - never in a URL: a `key` query parameter is refused (URLs end up in history, logs, Referer);
 * - the form post is refused from another origin (a page elsewhere cannot plant its key here);
 * - a key that fails authentication clears the cookie.
 * Clients that can send headers (curl, tests) send x-api-key or Authorization: Bearer as anywhere.
 *
 * The page's view is read by status-view.ts and rendered by status-render.ts; this module holds
 * the routes and the key's cookie.
 */
import type { MarketSlug } from '@skinprices/domain';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, badParameter } from '../errors.js';
import type { ApiKey } from '../keys.js';
import type { ReadModel } from '../readmodel.js';
import { loadStatus, type StatusOptions } from '../status.js';
import { renderProblemPage, renderStatusPage } from './status-render.js';
import { CHART_MARKETS, loadItem } from './status-view.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route also accepts the key from the status page's cookie. */
    keyCookie?: boolean;
    /** The route accepts an HTML form body (application/x-www-form-urlencoded). */
    formBody?: boolean;
  }
}

export const KEY_COOKIE = 'sp_status_key';
const COOKIE_MAX_AGE_S = 8 * 3600;

/** No scripts at all; inline styles; forms post to this origin only; never framed. */
const PAGE_CSP =
  "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

function cookieValue(req: FastifyRequest, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at < 0 || part.slice(0, at).trim() !== name) continue;
    try {
      return decodeURIComponent(part.slice(at + 1).trim()) || undefined;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** The key from the status page's cookie, for routes that accept it (app.ts asks after the headers). */
export function keyFromCookie(req: FastifyRequest): string | undefined {
  return req.routeOptions.config.keyCookie ? cookieValue(req, KEY_COOKIE) : undefined;
}

const cookie = (req: FastifyRequest, value: string, maxAgeS: number) =>
  `${KEY_COOKIE}=${encodeURIComponent(value)}; Path=/status; HttpOnly; SameSite=Strict; Max-Age=${maxAgeS}${req.protocol === 'https' ? '; Secure' : ''}`;

/**
 * A form post from another origin is refused: by Fetch Metadata where the browser sends it (every
 * current one), else by Origin. `Origin: null` (a sandboxed frame, or a page whose referrer policy
 * hides it) passes only with Fetch Metadata saying same-origin.
 */
function sameOrigin(req: FastifyRequest): boolean {
  const site = req.headers['sec-fetch-site'];
  if (typeof site === 'string') return site === 'same-origin' || site === 'none';
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}

export interface StatusPageDeps {
  read: ReadModel;
  /** @default DEFAULT_STATUS_OPTIONS */
  status?: StatusOptions;
}

function sendPage(reply: FastifyReply, code: number, page: string): FastifyReply {
  return reply
    .code(code)
    .type('text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('content-security-policy', PAGE_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'same-origin')
    .send(page);
}

const text = (q: Record<string, unknown>, name: string, max = 300): string | undefined => {
  const v = q[name];
  if (v === undefined || v === '') return undefined;
  if (typeof v !== 'string') throw badParameter(name, 'give it once');
  if (v.length > max) throw badParameter(name, `at most ${max} characters`);
  return v;
};

/** GET /status and POST /status/key (see the module's comment). */
export function registerStatusPage(app: FastifyInstance, deps: StatusPageDeps): void {
  // Form bodies for the key form only; every JSON endpoint still answers them with 415.
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: 4096 },
    (req, body, done) => {
      if (!req.routeOptions.config.formBody)
        return done(new ApiError(415, 'unsupported_media_type', 'send the body as application/json'));
      done(null, Object.fromEntries(new URLSearchParams(body as string)));
    },
  );

  /** ApiErrors as pages (the key form for a 401); anything else goes on to the app's handler. */
  function pageError(err: Error, req: FastifyRequest, reply: FastifyReply): void {
    if (!(err instanceof ApiError)) throw err;
    for (const [h, v] of Object.entries(err.headers)) reply.header(h, v);
    if (err.status === 401 && cookieValue(req, KEY_COOKIE)) reply.header('set-cookie', cookie(req, '', 0));
    const q = req.query as Record<string, unknown> | undefined;
    const item = typeof q?.item === 'string' ? q.item.slice(0, 300) : '';
    void sendPage(reply, err.status, renderProblemPage(err, item));
  }

  app.get(
    '/status',
    { config: { endpoint: 'GET /v1/status', keyCookie: true }, errorHandler: pageError, schema: { hide: true } },
    async (req, reply) => {
      const q = req.query as Record<string, unknown>;
      if (q.key !== undefined)
        throw badParameter(
          'key',
          'a key never goes in a URL (URLs end up in history, logs and Referer headers); send x-api-key or use the form',
        );
      const item = text(q, 'item');
      const m = text(q, 'market', 20);
      if (m !== undefined && !CHART_MARKETS.includes(m as MarketSlug))
        throw badParameter('market', `one of ${CHART_MARKETS.join(', ')}`);
      const market = m as MarketSlug | undefined;
      const phase = typeof q.phase === 'string' ? q.phase.slice(0, 100) : undefined;
      const key = req.apiKey as ApiKey;
      const [report, itemView] = await Promise.all([
        loadStatus(deps.read, deps.status),
        item ? loadItem(deps.read, key, item, market, phase) : undefined,
      ]);
      return sendPage(
        reply,
        200,
        renderStatusPage({
          report,
          customer: key.customer,
          plan: key.plan,
          query: { item: item ?? '', market: market ?? '', phase },
          item: itemView,
        }),
      );
    },
  );

  // Sets (or, with an empty key, clears) the cookie, then back to the page: 303, so a reload does
  // not post again. The key is checked by GET /status, with its failed-auth limiting.
  app.post(
    '/status/key',
    { config: { formBody: true }, errorHandler: pageError, schema: { hide: true } },
    async (req, reply) => {
      if (!sameOrigin(req)) throw new ApiError(400, 'bad_request', 'the key form may only be posted from this site');
      const b = (req.body ?? {}) as Record<string, unknown>;
      const key = typeof b.key === 'string' ? b.key.trim() : '';
      const item = typeof b.item === 'string' ? b.item.trim().slice(0, 300) : '';
      if (key.length > 200) throw badParameter('key', 'at most 200 characters');
      return reply
        .code(303)
        .header('set-cookie', key ? cookie(req, key, COOKIE_MAX_AGE_S) : cookie(req, '', 0))
        .header('location', item ? `/status?item=${encodeURIComponent(item)}` : '/status')
        .header('cache-control', 'no-store')
        .send();
    },
  );
}

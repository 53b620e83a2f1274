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
 */
import { getMarket, isMarketSlug, MARKETS, type MarketSlug } from '@skinprices/domain';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, badParameter } from '../errors.js';
import type { ApiKey } from '../keys.js';
import { planFor, planIncludes, type EndpointId } from '../plans.js';
import type { ReadModel } from '../readmodel.js';
import type { HistoryPoint } from '../routes/schemas.js';
import { loadStatus, type StatusOptions, type StatusReport } from '../status.js';
import { html, lineChart, raw, type Html } from './html.js';
import { FAVICON_URL } from './reference.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route also accepts the key from the status page's cookie. */
    keyCookie?: boolean;
    /** The route accepts an HTML form body (application/x-www-form-urlencoded). */
    formBody?: boolean;
  }
}

/** Marketplaces of the item's prices: those GET /v1/prices/search serves by default. */
const SEARCH_MARKETS: readonly MarketSlug[] = MARKETS.filter((m) => m.capabilities.includes('listings')).map(
  (m) => m.slug,
);
/** Marketplaces with a daily history (GET /v1/prices/{market}/history). */
const CHART_MARKETS: readonly MarketSlug[] = MARKETS.filter(
  (m) => m.capabilities.includes('listings') || m.capabilities.includes('history'),
).map((m) => m.slug);

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

// ---- the view ---------------------------------------------------------------------------------------

interface ItemView {
  name: string;
  /** ReadModel.search rows; undefined when the key may not call GET /v1/prices/search. */
  rows: Record<string, unknown>[] | undefined;
  /** The chart; undefined when the key may not call the history endpoint or nothing was found. */
  history: { market: MarketSlug; phase: string; points: HistoryPoint[] } | undefined;
  /** What the key may not see, by endpoint. */
  refused: EndpointId[];
}

interface StatusPageView {
  report: StatusReport;
  customer: string;
  plan: string;
  /** The form's values as asked. */
  query: { item: string; market: string; phase: string | undefined };
  item: ItemView | undefined;
}

function age(seconds: number | null): string {
  if (seconds === null) return 'never';
  if (seconds < 120) return `${seconds} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172_800) return `${Math.floor(seconds / 3600)} h ${Math.round((seconds % 3600) / 60)} min`;
  return `${Math.round(seconds / 86_400)} d`;
}

const label = (slug: string) => (isMarketSlug(slug) ? getMarket(slug).label : slug);
const flag = (ok: boolean, yes: string, no: string) => html`<span class="${ok ? 'ok' : 'bad'}">${ok ? yes : no}</span>`;

const STYLE = `body{font-family:system-ui,sans-serif;max-width:72rem;margin:1.5rem auto;padding:0 1rem;color:#111}
h1{margin:.2rem 0}h2{margin-top:1.6rem}table{border-collapse:collapse;margin:.5rem 0}td,th{padding:.25rem .6rem;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}
th{background:#f3f4f6}td.num{text-align:right;font-variant-numeric:tabular-nums}.ok{color:#15803d;font-weight:600}.bad{color:#b91c1c;font-weight:600}
.muted{color:#6b7280}form.inline{display:inline}input[type=text]{width:28rem;max-width:90%}svg.chart{width:100%;max-width:720px;height:auto;border:1px solid #e5e7eb;background:#fff}
.banner{padding:.5rem .8rem;border-radius:.3rem;margin:.6rem 0}.banner.ok{background:#dcfce7}.banner.bad{background:#fee2e2}`;

function layout(title: string, body: Html): string {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${title}</title>
        <link rel="icon" type="image/png" href="${FAVICON_URL}" />
        <style>
          ${raw(STYLE)}
        </style>
      </head>
      <body>
        ${body}
        <p class="muted">
          Machine-readable: <code>GET /v1/status</code>, <code>GET /v1/prices/search</code>,
          <code>GET /v1/prices/{market}/history</code>; reference: <a href="/docs">/docs</a>.
        </p>
      </body>
    </html>`.text;
}

function freshnessTable(report: StatusReport): Html {
  return html`<table id="freshness">
    <thead>
      <tr>
        <th>marketplace</th>
        <th>kind</th>
        <th>last cycle</th>
        <th>age</th>
        <th>stale after</th>
        <th>state</th>
        <th>failed in a row</th>
        <th>last complete applied</th>
      </tr>
    </thead>
    <tbody>
      ${report.markets.map(
        (m) =>
          html`<tr data-market="${m.market}" data-kind="${m.kind}" data-stale="${String(m.stale)}">
            <td>${label(m.market)}</td>
            <td>${m.kind}</td>
            <td>${m.last_outcome}</td>
            <td class="num">${age(m.age_seconds)}</td>
            <td class="num">${age(m.stale_after_seconds)}</td>
            <td>${flag(!m.stale, 'fresh', 'STALE')}</td>
            <td class="num">${m.failed_in_a_row}</td>
            <td>${m.last_complete_applied_at ?? '—'}</td>
          </tr> `,
      )}
    </tbody>
  </table>`;
}

function pipelineSection(report: StatusReport): Html {
  const p = report.pipeline;
  return html`<h2>Pipeline</h2>
    <p>
      Materializer: ${flag(p.status === 'ok', 'ok', p.status)} · lag
      <b id="lag">${p.lag === null ? 'unknown' : `${p.lag} records`}</b> · last batch ${p.last_batch_at ?? 'never'}
    </p>
    ${
      p.problems.length
        ? html`<ul class="bad">
            ${p.problems.map((x) => html`<li>${x}</li>`)}
          </ul>`
        : ''
    }
    <table id="materializers">
      <thead>
        <tr>
          <th>process</th>
          <th>group</th>
          <th>state</th>
          <th>heartbeat</th>
          <th>lag</th>
          <th>last batch</th>
        </tr>
      </thead>
      <tbody>
        ${p.materializers.map(
          (m) =>
            html`<tr>
              <td>${m.host}:${m.pid}</td>
              <td>${m.group_id}</td>
              <td>${m.state}</td>
              <td>
                ${flag(m.alive, `${age(m.heartbeat_age_seconds)} ago`, `${age(m.heartbeat_age_seconds)} ago (dead)`)}
              </td>
              <td class="num">${m.lag ?? 'unknown'}</td>
              <td>${m.last_batch_at ?? 'never'}</td>
            </tr> `,
        )}
      </tbody>
    </table>
    ${
      report.dead_letters.length
        ? html`<h3>Dead letters</h3>
            <table id="dead-letters">
              <thead>
                <tr>
                  <th>topic</th>
                  <th>reason</th>
                  <th>count</th>
                  <th>last</th>
                </tr>
              </thead>
              <tbody>
                ${report.dead_letters.map(
                  (d) =>
                    html`<tr>
                      <td>${d.topic}</td>
                      <td>${d.reason}</td>
                      <td class="num">${d.count}</td>
                      <td>${d.last_at}</td>
                    </tr>`,
                )}
              </tbody>
            </table>`
        : ''
    }`;
}

function searchForm(q: StatusPageView['query'], phases: readonly string[]): Html {
  return html`<form method="get" action="/status" id="search">
    <label
      >Item (exact market_hash_name) <input type="text" name="item" value="${q.item}" maxlength="300" required
    /></label>
    <label
      >chart from
      <select name="market">
        <option value="">first with data</option>
        ${CHART_MARKETS.map(
          (m) => html`<option value="${m}" ${m === q.market ? html` selected` : ''}>${label(m)}</option>`,
        )}
      </select></label
    >
    ${
      phases.length > 1
        ? html`<label
            >phase
            <select name="phase">
              ${phases.map(
                (p) => html`<option value="${p}" ${p === q.phase ? html` selected` : ''}>${p || '(none)'}</option>`,
              )}
            </select></label
          >`
        : ''
    }
    <button type="submit">Show</button>
  </form>`;
}

function itemSection(item: ItemView): Html {
  const refused = item.refused.length
    ? html`<p class="bad">This key may not call ${item.refused.join(', ')}; that part is not shown.</p>`
    : '';
  const rows = item.rows;
  const prices =
    rows === undefined
      ? ''
      : rows.length === 0
        ? html`<p id="no-prices">No marketplace lists <b>${item.name}</b> now.</p>`
        : html`<table id="prices">
            <thead>
              <tr>
                <th>marketplace</th>
                <th>phase</th>
                <th>price</th>
                <th>currency</th>
                <th>count</th>
                <th>24h</th>
                <th>7d</th>
                <th>updated</th>
              </tr>
            </thead>
            <tbody>
              ${rows.map((r) => {
                const market = String(r.market);
                const price = (r.price_rmb ?? r.price) as string;
                return html`<tr data-market="${market}" data-phase="${String(r.phase)}">
                  <td>${label(market)}</td>
                  <td>${String(r.phase) || '—'}</td>
                  <td class="num price">${price}</td>
                  <td>${isMarketSlug(market) ? getMarket(market).currency : ''}</td>
                  <td class="num">${String(r.count)}</td>
                  <td class="num">${r.change_24h === null ? '—' : `${String(r.change_24h)} %`}</td>
                  <td class="num">${r.change_7d === null ? '—' : `${String(r.change_7d)} %`}</td>
                  <td>${String(r.updated_at)}</td>
                </tr> `;
              })}
            </tbody>
          </table>`;
  const h = item.history;
  const chart =
    h === undefined
      ? ''
      : html`<h3>Daily closes on ${label(h.market)}${h.phase ? ` (${h.phase})` : ''}: ${h.points.length} days</h3>
          <figure id="history" data-market="${h.market}">
            ${lineChart(
              h.points
                .filter((p) => p.price !== null)
                .map((p) => ({ label: 'date' in p ? p.date : p.time, value: p.price as string })),
              { unit: getMarket(h.market).currency },
            )}
          </figure>`;
  return html`<h2 id="item">${item.name}</h2>
    ${refused}${prices}${chart}`;
}

/** The page's HTML from what the handler read: pure (unit-tested). */
function renderStatusPage(v: StatusPageView): string {
  const r = v.report;
  const phases = [...new Set((v.item?.rows ?? []).map((x) => String(x.phase)))];
  return layout(
    'Status: price data service',
    html`<h1>Status</h1>
      <div class="muted">
        Signed in as ${v.customer} (${v.plan})
        <form class="inline" method="post" action="/status/key"><button type="submit">forget key</button></form>
      </div>
      <div class="banner ${r.status === 'ok' ? 'ok' : 'bad'}" id="overall">
        Overall <b>${r.status}</b>: ${r.stale_count} stale of ${r.markets.length} marketplace kinds; pipeline
        ${r.pipeline.status}. Database time ${r.now}; data time ${r.data_time ?? 'none yet'}.
      </div>
      <h2>Freshness per marketplace and kind</h2>
      <p class="muted">
        Stale: the last complete cycle was applied longer ago than twice the kind's refresh interval plus a grace.
      </p>
      ${freshnessTable(r)} ${pipelineSection(r)}
      <h2>An item</h2>
      ${searchForm(v.query, phases)} ${v.item ? itemSection(v.item) : ''}`,
  );
}

/** The key form (401) or an error (any other status), as a page. */
function renderProblemPage(e: ApiError, item: string): string {
  if (e.status === 401)
    return layout(
      'Status: a key is needed',
      html`<h1>Status</h1>
        <p class="bad" id="problem">${e.message}</p>
        <form method="post" action="/status/key" id="key-form">
          <label>API key <input type="password" name="key" autocomplete="off" required /></label>
          <input type="hidden" name="item" value="${item}" /><button type="submit">Show the status</button>
        </form>
        <p class="muted">The key is kept in an HttpOnly cookie for this page only (8 hours), never in a URL.</p>`,
    );
  return layout(
    `Status: ${e.status}`,
    html`<h1>Status</h1>
      <p class="bad" id="problem">${e.status} ${e.code}: ${e.message}</p>
      <p><a href="/status">Back</a></p>`,
  );
}

// ---- the routes -------------------------------------------------------------------------------------

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

/** What a key may call, by the same rules as the endpoints themselves (plan, then ACL). */
const mayCall = (key: ApiKey, id: EndpointId) =>
  planIncludes(key.plan, planFor(id)) && (!key.allowedEndpoints || key.allowedEndpoints.includes(id));

async function loadItem(
  read: ReadModel,
  key: ApiKey,
  name: string,
  market: MarketSlug | undefined,
  phase: string | undefined,
): Promise<ItemView> {
  const refused: EndpointId[] = [];
  let rows: Record<string, unknown>[] | undefined;
  if (mayCall(key, 'GET /v1/prices/search')) rows = await read.search(name, SEARCH_MARKETS);
  else refused.push('GET /v1/prices/search');
  let history: ItemView['history'];
  if (!mayCall(key, 'GET /v1/prices/{market}/history')) refused.push('GET /v1/prices/{market}/history');
  else if (market || (rows?.length ?? 0) > 0 || (await read.knowsItem(name))) {
    const ph = phase ?? String(rows?.[0]?.phase ?? '');
    const listed = new Set((rows ?? []).map((r) => String(r.market)));
    // The chosen marketplace, or the first with data: those listing the item now first. At most
    // one query per history marketplace (14), once per page view.
    const candidates = market
      ? [market]
      : [...CHART_MARKETS.filter((m) => listed.has(m)), ...CHART_MARKETS.filter((m) => !listed.has(m))];
    for (const m of candidates) {
      const points = await read.history(m, name, ph, 'daily');
      if (points.length > 0 || market) {
        history = { market: m, phase: ph, points };
        break;
      }
    }
  }
  return { name, rows, history, refused };
}

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

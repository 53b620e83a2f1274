/**
 * The status page's HTML, rendered on the server from its view (status-view.ts): the layout and
 * style, the freshness and pipeline tables, the item's search form, prices and chart of daily
 * closes, and the key form or an error as a page. Pure functions of what the handler read.
 */
import { getMarket, isMarketSlug } from '@skinprices/domain';
import type { ApiError } from '../errors.js';
import type { StatusReport } from '../status.js';
import { html, lineChart, raw, type Html } from './html.js';
import { FAVICON_URL } from './reference.js';
import { CHART_MARKETS, type ItemView, type StatusPageView } from './status-view.js';

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

/** Where this process reads: on a standby, how far behind its primary. */
function databaseLine(d: StatusReport['database']): Html {
  if (d.role === 'primary') return html`<p id="database">Database: primary</p>`;
  const lag = d.replay_lag_seconds === null ? 'unknown' : `${d.replay_lag_seconds} s`;
  return html`<p id="database">
    Database: standby · replay lag ${flag(d.status === 'ok', lag, `${lag} (over ${d.degraded_after_seconds} s)`)} ·
    ${d.replay_lag_bytes ?? 'unknown'} bytes received, not yet replayed ·
    ${d.receiving === null ? 'receiver not visible' : flag(d.receiving, 'streaming', 'NOT RECEIVING')}
  </p>`;
}

function pipelineSection(report: StatusReport): Html {
  const p = report.pipeline;
  return html`<h2>Pipeline</h2>
    <p>
      Materializer: ${flag(p.status === 'ok', 'ok', p.status)} · lag
      <b id="lag">${p.lag === null ? 'unknown' : `${p.lag} records`}</b> · last batch ${p.last_batch_at ?? 'never'}
    </p>
    ${databaseLine(report.database)}
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
export function renderStatusPage(v: StatusPageView): string {
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
export function renderProblemPage(e: ApiError, item: string): string {
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

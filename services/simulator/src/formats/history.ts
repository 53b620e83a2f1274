/**
 * HIST-A style: daily closes, one UTC day per request, paged; more than a year back. And, like
 * history endpoints that keep a finer grain for recent weeks (Steam's price history is hourly for
 * its last month), the hourly candles of one closed UTC day per request for the last
 * HOURLY_HISTORY_DAYS days.
 */
import { DAY_MS } from '@skinprices/domain';
import { formatMinor } from '../model.js';
import { badRequest, intParam, ok, type Route, type UpstreamResponse } from './types.js';

const HISTORY_DAYS = 400;
const HOURLY_HISTORY_DAYS = 100;

/** The `date` parameter as days since epoch, or an error answer. */
function dayParam(q: URLSearchParams): number | UpstreamResponse {
  const date = q.get('date') ?? '';
  if (!/^\d{4}-\d{2}-\d{2}$/.test(date) || Number.isNaN(Date.parse(`${date}T00:00:00Z`))) {
    return badRequest('date must be YYYY-MM-DD');
  }
  return Date.parse(`${date}T00:00:00Z`) / DAY_MS;
}

/** `rows` paged as the format pages: {date, page, pages, items}. */
function paged<T>(q: URLSearchParams, date: string, rows: readonly T[], item: (r: T) => unknown): UpstreamResponse {
  const p = intParam(q, 'page', 1, 1, 1_000_000);
  const perPage = intParam(q, 'per_page', 1000, 1, 5000);
  if (Number.isNaN(p) || Number.isNaN(perPage)) return badRequest('page and per_page must be integers');
  return ok({
    date,
    page: p,
    pages: Math.max(1, Math.ceil(rows.length / perPage)),
    items: rows.slice((p - 1) * perPage, p * perPage).map(item),
  });
}

export const historyRoutes: Record<string, Route> = {
  '/api/history/daily': (ctx, q) => {
    const day = dayParam(q);
    if (typeof day !== 'number') return day;
    const today = Math.floor(ctx.clock.now() / DAY_MS);
    // Closed days only, within the kept window.
    const rows = day < today && day >= today - HISTORY_DAYS ? ctx.extras.history(ctx.market, day) : [];
    return paged(q, q.get('date') ?? '', rows, (r) => ({
      name: r.item.marketHashName,
      phase: r.item.phase || null,
      close: formatMinor(r.closeMinor),
      volume: r.volume,
    }));
  },
  '/api/history/hourly': (ctx, q) => {
    const day = dayParam(q);
    if (typeof day !== 'number') return day;
    const now = ctx.clock.now();
    const today = Math.floor(now / DAY_MS);
    // Closed days only (as the daily closes), within the hourly window.
    const rows = day < today && day >= today - HOURLY_HISTORY_DAYS ? ctx.extras.hourly(ctx.market, day, now) : [];
    return paged(q, q.get('date') ?? '', rows, (r) => ({
      name: r.item.marketHashName,
      phase: r.item.phase || null,
      hours: r.hours.map((h) => ({
        time: new Date(h.hour).toISOString(),
        open: formatMinor(h.openMinor),
        high: formatMinor(h.highMinor),
        low: formatMinor(h.lowMinor),
        close: formatMinor(h.closeMinor),
        volume: h.volume,
      })),
    }));
  },
};

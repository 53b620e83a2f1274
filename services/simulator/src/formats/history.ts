/**
 * HIST-A style: daily closes, one UTC day per request, paged; more than a year back.
 */
import { DAY_MS } from '@skinprices/domain';
import { formatMinor } from '../model.js';
import { badRequest, intParam, ok, type Route } from './types.js';

export const HISTORY_DAYS = 400;

export const historyRoutes: Record<string, Route> = {
  '/api/history/daily': (ctx, q) => {
    const date = q.get('date') ?? '';
    if (!/^\d{4}-\d{2}-\d{2}$/.test(date) || Number.isNaN(Date.parse(`${date}T00:00:00Z`))) {
      return badRequest('date must be YYYY-MM-DD');
    }
    const day = Date.parse(`${date}T00:00:00Z`) / DAY_MS;
    const today = Math.floor(ctx.clock.now() / DAY_MS);
    // Closed days only, within the kept window.
    const rows = day < today && day >= today - HISTORY_DAYS ? ctx.extras.history(ctx.market, day) : [];
    const p = intParam(q, 'page', 1, 1, 1_000_000);
    const perPage = intParam(q, 'per_page', 1000, 1, 5000);
    if (Number.isNaN(p) || Number.isNaN(perPage)) return badRequest('page and per_page must be integers');
    return ok({
      date,
      page: p,
      pages: Math.max(1, Math.ceil(rows.length / perPage)),
      items: rows.slice((p - 1) * perPage, p * perPage).map((r) => ({
        name: r.item.marketHashName,
        phase: r.item.phase || null,
        close: formatMinor(r.closeMinor),
        volume: r.volume,
      })),
    });
  },
};

/**
 * USD-1..6 style: page-numbered catalogue with integer cents and the phase in plain English;
 * USD-1 also serves completed sales with ISO times.
 */
import { badRequest, intParam, ok, type Route } from './types.js';

function page<T>(all: readonly T[], q: URLSearchParams, key: string, render: (x: T) => unknown) {
  const p = intParam(q, 'page', 1, 1, 1_000_000);
  const perPage = intParam(q, 'per_page', 500, 1, 1000);
  if (Number.isNaN(p) || Number.isNaN(perPage)) return badRequest('page and per_page must be integers');
  return ok({
    page: p,
    pages: Math.max(1, Math.ceil(all.length / perPage)),
    per_page: perPage,
    total: all.length,
    [key]: all.slice((p - 1) * perPage, p * perPage).map(render),
  });
}

export const usdCatalogueRoutes: Record<string, Route> = {
  '/v1/market/items': (ctx, q) =>
    page(
      ctx.model.listings(ctx.market, ctx.clock.now()).filter((l) => l.priceMinor !== null),
      q,
      'items',
      (l) => ({
        market_hash_name: l.item.marketHashName,
        phase: l.item.phase || null,
        price_cents: l.priceMinor,
        quantity: l.count,
        exterior: l.item.exterior,
      }),
    ),
  '/v1/market/sales': (ctx, q) => {
    if (ctx.market !== 'usd-1') return { status: 404, body: { error: 'not found' } };
    const now = ctx.clock.now();
    const since = Number(q.get('since') ?? now - 3_600_000);
    const until = Math.min(now, Number(q.get('until') ?? now));
    if (!Number.isFinite(since) || !Number.isFinite(until)) return badRequest('since/until must be epoch milliseconds');
    return page(ctx.extras.sales(ctx.market, since, until), q, 'sales', (s) => ({
      id: s.saleId,
      market_hash_name: s.item.marketHashName,
      phase: s.item.phase || null,
      price_cents: s.priceMinor,
      sold_at: new Date(s.soldAt).toISOString(),
      wear: s.floatValue,
      paint_index: s.item.paintIndex,
      pattern: s.paintSeed,
      stickers: s.stickers,
      charms: s.charms,
    }));
  },
};

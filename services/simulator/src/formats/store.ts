/**
 * STORE style (first-party): search results `{success, total_count, results}` paged by start and
 * count, prices in cents plus a display text, and order books as [price, quantity] graphs.
 */
import { formatMinor } from '../model.js';
import { badRequest, intParam, ok, type Route } from './types.js';

function page<T>(all: readonly T[], q: URLSearchParams, render: (x: T) => unknown) {
  const start = intParam(q, 'start', 0, 0, Number.MAX_SAFE_INTEGER);
  const count = intParam(q, 'count', 100, 1, 100);
  if (Number.isNaN(start) || Number.isNaN(count)) return badRequest('start and count must be integers');
  return ok({
    success: true,
    start,
    pagesize: count,
    total_count: all.length,
    results: all.slice(start, start + count).map(render),
  });
}

export const storeRoutes: Record<string, Route> = {
  '/market/search/render': (ctx, q) =>
    page(ctx.model.listings(ctx.market, ctx.clock.now()), q, (l) => ({
      hash_name: l.item.marketHashName,
      sell_listings: l.count,
      sell_price: l.priceMinor ?? 0,
      sell_price_text: l.priceMinor === null ? '' : `$${formatMinor(l.priceMinor)}`,
      asset_description: { market_hash_name: l.item.marketHashName, type: l.item.category },
    })),
  '/market/orderbooks': (ctx, q) =>
    page(ctx.extras.orderBooks(ctx.market, ctx.clock.now()), q, (b) => ({
      hash_name: b.item.marketHashName,
      sell_order_graph: b.asks.map((a) => [formatMinor(a.priceMinor), a.count]),
      buy_order_graph: b.bids.map((a) => [formatMinor(a.priceMinor), a.count]),
    })),
};

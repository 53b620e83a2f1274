/**
 * CN-D / EU-B style: every individual listing, offset-paged; the client derives the lowest price
 * and the count per item. The phase is a suffix of the name (`… (Factory New) - Ruby`).
 */
import { getMarket } from '@skinprices/domain';
import { formatMinor } from '../model.js';
import { badRequest, intParam, ok, type Route, type SimContext } from './types.js';

export const rawListingsRoutes: Record<string, Route> = {
  '/v2/listings': (ctx, q) => {
    const offset = intParam(q, 'offset', 0, 0, Number.MAX_SAFE_INTEGER);
    const limit = intParam(q, 'limit', 1000, 1, 5000);
    if (Number.isNaN(offset) || Number.isNaN(limit)) return badRequest('offset and limit must be integers');
    const all = ctx.model.memo(ctx.market, 'raw-listings', ctx.clock.now(), () => expand(ctx));
    return ok({ total: all.length, offset, limit, listings: all.slice(offset, offset + limit) });
  },
};

function expand(ctx: SimContext): { listing_id: string; name: string; price: string; currency: string }[] {
  const currency = getMarket(ctx.market).currency;
  const all: { listing_id: string; name: string; price: string; currency: string }[] = [];
  for (const l of ctx.model.listings(ctx.market, ctx.clock.now())) {
    if (l.priceMinor === null) continue;
    const name = l.item.phase ? `${l.item.marketHashName} - ${l.item.phase}` : l.item.marketHashName;
    for (let k = 0; k < l.count; k++) {
      // The cheapest listing first per item; the others a little dearer each.
      const minor =
        k === 0 ? l.priceMinor : Math.round(l.priceMinor * (1 + 0.007 * k + 0.001 * ((l.item.index + k) % 7)));
      all.push({ listing_id: `${ctx.market}-${l.item.index}-${k}`, name, price: formatMinor(minor), currency });
    }
  }
  return all;
}

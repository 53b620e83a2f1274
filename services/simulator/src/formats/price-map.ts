/**
 * EU-A style: one document keyed by market_hash_name; each value lists the variants (phases) with
 * the lowest price as a decimal string, the quantity, and the wear in upper case.
 */
import { formatMinor } from '../model.js';
import { ok, type Route, type SimContext } from './types.js';

export const priceMapRoutes: Record<string, Route> = {
  '/api/v1/prices': (ctx) => ok(ctx.model.memo(ctx.market, 'price-map', ctx.clock.now(), () => build(ctx))),
};

function build(ctx: SimContext): unknown {
  const doc: Record<
    string,
    { phase: string | null; min_price: string | null; qty: number; exterior: string | null }[]
  > = {};
  for (const l of ctx.model.listings(ctx.market, ctx.clock.now())) {
    (doc[l.item.marketHashName] ??= []).push({
      phase: l.item.phase ? l.item.phase.toLowerCase().replace(/\s+/g, '') : null,
      min_price: l.priceMinor === null ? null : formatMinor(l.priceMinor),
      qty: l.count,
      exterior: l.item.exterior ? l.item.exterior.toUpperCase() : null,
    });
  }
  return doc;
}

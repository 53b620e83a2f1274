/**
 * CN-A style: cursor-paged lists, `{code: 0, data: {items, next_cursor}}`, prices in integer fen,
 * an item without listings still appears with price 0 (the trap: 0 means "none", never a price),
 * the phase as its own field in the marketplace's spelling, wear as a machine tag.
 */
import type { CatalogueItem } from '../catalogue.js';
import { badRequest, intParam, ok, type Route, type SimContext } from './types.js';

const PHASE_TAG: Record<string, string> = {
  'Phase 1': 'P1',
  'Phase 2': 'P2',
  'Phase 3': 'P3',
  'Phase 4': 'P4',
  Ruby: 'ruby',
  Sapphire: 'sapphire',
  'Black Pearl': 'black_pearl',
  Emerald: 'emerald',
};
const WEAR_TAG: Record<string, string> = {
  'Factory New': 'wearcategory0',
  'Minimal Wear': 'wearcategory1',
  'Field-Tested': 'wearcategory2',
  'Well-Worn': 'wearcategory3',
  'Battle-Scarred': 'wearcategory4',
};

const templateId = (ctx: SimContext, item: CatalogueItem): number =>
  100_000 + (ctx.model.nameIndex.get(item.marketHashName) ?? item.index);

const base = (ctx: SimContext, item: CatalogueItem) => ({
  template_id: templateId(ctx, item),
  market_hash_name: item.marketHashName,
  phase_tag: item.phase ? PHASE_TAG[item.phase] : null,
});

/** Cursor = base64 of the next offset: opaque to clients, as upstream cursors are. */
function page<T>(all: readonly T[], q: URLSearchParams, render: (x: T) => unknown) {
  const limit = intParam(q, 'limit', 100, 1, 500);
  const cursor = q.get('cursor');
  const offset = cursor ? Number(Buffer.from(cursor, 'base64url').toString('utf8')) : 0;
  if (!Number.isInteger(offset) || offset < 0 || Number.isNaN(limit)) return badRequest('bad cursor or limit');
  const items = all.slice(offset, offset + limit).map(render);
  const next = offset + limit < all.length ? Buffer.from(String(offset + limit)).toString('base64url') : null;
  return ok({ code: 0, msg: 'success', data: { items, next_cursor: next } });
}

export const goodsCursorRoutes: Record<string, Route> = {
  '/api/market/goods': (ctx, q) =>
    page(ctx.model.listings(ctx.market, ctx.clock.now()), q, (l) => ({
      ...base(ctx, l.item),
      exterior: l.item.exterior ? WEAR_TAG[l.item.exterior] : null,
      sell_min_price_fen: l.priceMinor ?? 0,
      sell_num: l.count,
    })),
  '/api/market/buy-orders': (ctx, q) =>
    page(ctx.extras.buyOrders(ctx.market, ctx.clock.now()), q, (b) => ({
      ...base(ctx, b.item),
      type_id: 1 + (b.item.index % 7),
      buy_max_price_fen: b.priceMinor ?? 0,
      blue_buy_max_price_fen: b.blueMinor,
      buy_num: b.count,
    })),
  '/api/market/float-ranges': (ctx, q) => {
    const byItem = new Map<number, ReturnType<SimContext['extras']['floatRanges']>>();
    for (const r of ctx.extras.floatRanges(ctx.market, ctx.clock.now())) {
      const list = byItem.get(r.item.index) ?? [];
      list.push(r);
      byItem.set(r.item.index, list);
    }
    return page([...byItem.values()], q, (ranges) => ({
      ...base(ctx, (ranges[0] as (typeof ranges)[number]).item),
      ranges: ranges.map((r) => ({
        min: r.floatMin,
        max: r.floatMax,
        first_price_fen: r.firstMinor ?? 0,
        fifth_price_fen: r.fifthMinor ?? 0,
        sell_num: r.count,
        phase_names: r.item.phase ? { en: r.item.phase, zh: `${r.item.phase}（多普勒）` } : {},
      })),
    }));
  },
  '/api/market/float-buy-orders': (ctx, q) =>
    page(ctx.extras.floatBuyOrders(ctx.market, ctx.clock.now()), q, (o) => ({
      ...base(ctx, o.item),
      order_id: o.orderId,
      price_fen: o.priceMinor,
      num: o.quantity,
      float_min: o.floatMin,
      float_max: o.floatMax,
      fade: o.condition,
    })),
  '/api/market/sales': (ctx, q) => {
    const now = ctx.clock.now();
    const since = Number(q.get('since') ?? now - 3_600_000);
    const until = Math.min(now, Number(q.get('until') ?? now));
    if (!Number.isFinite(since) || !Number.isFinite(until)) return badRequest('since/until must be epoch milliseconds');
    return page(ctx.extras.sales(ctx.market, since, until), q, (s) => ({
      ...base(ctx, s.item),
      id: s.saleId,
      price_fen: s.priceMinor,
      sold_at: s.soldAt / 1000,
      float_value: s.floatValue,
      paint_index: s.item.paintIndex,
      paint_seed: s.paintSeed,
      stickers: s.stickers,
      keychains: s.charms,
    }));
  },
};

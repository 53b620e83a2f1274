/**
 * CN-B / CN-C style: page-numbered lists `{code: 'OK', data: {items, total_page, …}}`, prices as
 * decimal strings without trailing zeros, the phase as a numeric tag id, wear inside a nested
 * tag object, pattern tiers as a name suffix `(T1)` on buy orders; items without listings are
 * simply left out.
 */
import type { CatalogueItem } from '../catalogue.js';
import { badRequest, intParam, ok, trimDecimal, type Route, type SimContext } from './types.js';

/** The marketplace's tag ids; its API documentation publishes this table. */
export const PHASE_TAG_IDS: Record<string, number> = {
  'Phase 1': 1001,
  'Phase 2': 1002,
  'Phase 3': 1003,
  'Phase 4': 1004,
  Ruby: 1005,
  Sapphire: 1006,
  'Black Pearl': 1007,
  Emerald: 1008,
};
const WEAR: Record<string, [string, string]> = {
  'Factory New': ['wearcategory0', '崭新出厂'],
  'Minimal Wear': ['wearcategory1', '略有磨损'],
  'Field-Tested': ['wearcategory2', '久经沙场'],
  'Well-Worn': ['wearcategory3', '破损不堪'],
  'Battle-Scarred': ['wearcategory4', '战痕累累'],
};

const goodsId = (ctx: SimContext, item: CatalogueItem): number =>
  700_000 + (ctx.model.nameIndex.get(item.marketHashName) ?? item.index);

function page<T>(all: readonly T[], q: URLSearchParams, render: (x: T) => unknown) {
  const pageNum = intParam(q, 'page_num', 1, 1, 1_000_000);
  const pageSize = intParam(q, 'page_size', 80, 1, 500);
  if (Number.isNaN(pageNum) || Number.isNaN(pageSize)) return badRequest('page_num and page_size must be integers');
  const items = all.slice((pageNum - 1) * pageSize, pageNum * pageSize).map(render);
  return ok({
    code: 'OK',
    data: {
      page_num: pageNum,
      page_size: pageSize,
      total_count: all.length,
      total_page: Math.ceil(all.length / pageSize),
      items,
    },
  });
}

const ident = (ctx: SimContext, item: CatalogueItem) => ({
  goods_id: goodsId(ctx, item),
  market_hash_name: item.marketHashName,
  tag_id: item.phase ? PHASE_TAG_IDS[item.phase] : null,
});

export const goodsPagesRoutes: Record<string, Route> = {
  '/market/goods': (ctx, q) =>
    page(
      ctx.model.listings(ctx.market, ctx.clock.now()).filter((l) => l.priceMinor !== null),
      q,
      (l) => {
        const wear = l.item.exterior ? WEAR[l.item.exterior] : undefined;
        return {
          id: goodsId(ctx, l.item),
          market_hash_name: l.item.marketHashName,
          tag_id: l.item.phase ? PHASE_TAG_IDS[l.item.phase] : null,
          sell_min_price: trimDecimal(l.priceMinor as number),
          sell_num: l.count,
          goods_info: wear
            ? { info: { tags: { exterior: { internal_name: wear[0], localized_name: wear[1] } } } }
            : { info: { tags: {} } },
        };
      },
    ),
  '/market/buy_order/top': (ctx, q) =>
    page(ctx.extras.buyOrders(ctx.market, ctx.clock.now()), q, (b) => ({
      ...ident(ctx, b.item),
      market_hash_name: b.tier ? `${b.item.marketHashName} (${b.tier})` : b.item.marketHashName,
      tier_tag_id: b.tier ? 2000 + Number(b.tier.slice(1)) : null,
      buy_max_price: b.priceMinor === null ? null : trimDecimal(b.priceMinor),
      buy_num: b.count,
    })),
  '/market/float_ranges': (ctx, q) =>
    page(ctx.extras.floatRanges(ctx.market, ctx.clock.now()), q, (r) => ({
      ...ident(ctx, r.item),
      float_min: r.floatMin,
      float_max: r.floatMax,
      first_price: r.firstMinor === null ? null : trimDecimal(r.firstMinor),
      fifth_price: r.fifthMinor === null ? null : trimDecimal(r.fifthMinor),
      sell_num: r.count,
      tag_names: r.item.phase ? { en: r.item.phase, zh: `${r.item.phase}（多普勒）` } : {},
    })),
  '/market/buy_order/float': (ctx, q) =>
    page(ctx.extras.floatBuyOrders(ctx.market, ctx.clock.now()), q, (o) => ({
      ...ident(ctx, o.item),
      id: o.orderId,
      float_min: o.floatMin,
      float_max: o.floatMax,
      price: trimDecimal(o.priceMinor),
      num: o.quantity,
      fade: o.condition,
    })),
  '/market/bill_orders': (ctx, q) => {
    const now = ctx.clock.now();
    const start = Number(q.get('start_time') ?? Math.floor((now - 3_600_000) / 1000)) * 1000;
    const end = Math.min(now, Number(q.get('end_time') ?? Math.floor(now / 1000)) * 1000);
    if (!Number.isFinite(start) || !Number.isFinite(end))
      return badRequest('start_time/end_time must be epoch seconds');
    return page(ctx.extras.sales(ctx.market, start, end), q, (s) => ({
      ...ident(ctx, s.item),
      id: s.saleId,
      price: trimDecimal(s.priceMinor),
      transact_time: s.soldAt / 1000,
      asset_info: {
        paintwear: s.floatValue,
        info: { paintindex: s.item.paintIndex, paintseed: s.paintSeed, stickers: s.stickers, keychains: s.charms },
      },
    }));
  },
};

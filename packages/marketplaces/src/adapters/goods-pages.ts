/**
 * CN-B / CN-C: page-numbered, decimal-string prices, the phase as a numeric tag id (table from the
 * marketplace's documentation), pattern tiers as a `(T1)` name suffix on buy orders.
 */
import { AppError, type PhaseOrNone } from '@skinprices/domain';
import type { Adapter, FetchContext, KindInput } from '../adapter.js';
import {
  asArray,
  asObj,
  collect,
  decimalPrice,
  exteriorFrom,
  floatValue,
  identity,
  int,
  listingRow,
  malformed,
  optInt,
  optStr,
  str,
  timeFromSeconds,
  type Obj,
} from '../normalize.js';
import type { Kind, Page, RowMap } from '../rows.js';
import { parseCharms, parseStickers } from './goods-cursor.js';

/** The marketplace's phase tag ids. An id not in this table is refused, never read as "no phase". */
export const PHASE_BY_TAG_ID: ReadonlyMap<number, PhaseOrNone> = new Map<number, PhaseOrNone>([
  [1001, 'Phase 1'],
  [1002, 'Phase 2'],
  [1003, 'Phase 3'],
  [1004, 'Phase 4'],
  [1005, 'Ruby'],
  [1006, 'Sapphire'],
  [1007, 'Black Pearl'],
  [1008, 'Emerald'],
]);

/**
 * `type_id` of a general buy order (no phase or tier condition). The marketplace tags only the
 * conditions, but the spec's `typeId` is an integer on every row: 0, documented, is "no tag";
 * no real tag id is 0.
 */
export const GENERAL_ORDER_TAG_ID = 0;

const PATHS: Partial<Record<Kind, string>> = {
  LISTINGS: '/market/goods',
  BUYORDERS: '/market/buy_order/top',
  FLOAT_RANGED: '/market/float_ranges',
  FLOAT_BUYORDERS: '/market/buy_order/float',
  SALES: '/market/bill_orders',
};
const PAGE = 500;
const TIER_SUFFIX = / \((T\d)\)$/;

function phaseOf(o: Obj): PhaseOrNone {
  const id = optInt(o, 'tag_id');
  if (id === null) return '';
  const phase = PHASE_BY_TAG_ID.get(id);
  if (phase === undefined) throw new AppError('invalid_phase', `unknown phase tag id ${id}`);
  return phase;
}

const PARSERS: { [K in Kind]?: (o: Obj) => RowMap[K] } = {
  LISTINGS: (o) => {
    const name = str(o, 'market_hash_name');
    const tags = asObj(asObj(asObj(o.goods_info ?? {}, 'goods_info').info ?? {}, 'info').tags ?? {}, 'tags');
    const wear = tags.exterior === undefined ? null : optStr(asObj(tags.exterior, 'exterior'), 'internal_name');
    const id = identity(name, null);
    const price = decimalPrice(o, 'sell_min_price');
    const count = int(o, 'sell_num');
    if (price === null && count > 0)
      throw new AppError('invalid_item', 'sell_min_price missing for an item with listings');
    return listingRow(id, {
      phase: phaseOf(o),
      exterior: exteriorFrom(wear, name),
      price,
      count,
      template_id: int(o, 'id', 1),
      item_page_url: null,
    });
  },
  BUYORDERS: (o) => {
    const full = str(o, 'market_hash_name');
    const tier = TIER_SUFFIX.exec(full)?.[1] ?? null;
    return {
      market_hash_name: tier ? full.replace(TIER_SUFFIX, '') : full,
      phase: phaseOf(o),
      tier,
      price: decimalPrice(o, 'buy_max_price', int(o, 'buy_num')),
      blue_price: null,
      count: int(o, 'buy_num'),
      template_id: int(o, 'goods_id', 1),
      type_id: optInt(o, 'tier_tag_id') ?? optInt(o, 'tag_id') ?? GENERAL_ORDER_TAG_ID,
    };
  },
  FLOAT_RANGED: (o) => {
    const count = int(o, 'sell_num');
    const labels = asObj(o.tag_names ?? {}, 'tag_names');
    return {
      market_hash_name: str(o, 'market_hash_name'),
      phase: phaseOf(o),
      float_min: floatValue(o, 'float_min') ?? '0',
      float_max: floatValue(o, 'float_max') ?? '1',
      first_price: decimalPrice(o, 'first_price', count),
      fifth_price: count >= 5 ? decimalPrice(o, 'fifth_price') : null,
      count,
      phase_labels: Object.fromEntries(
        Object.entries(labels).filter((e): e is [string, string] => typeof e[1] === 'string'),
      ),
    };
  },
  FLOAT_BUYORDERS: (o) => {
    const price = decimalPrice(o, 'price');
    if (price === null) throw new AppError('non_positive_price', 'price missing');
    return {
      market_hash_name: str(o, 'market_hash_name'),
      phase: phaseOf(o),
      order_id: str(o, 'id'),
      price,
      quantity: int(o, 'num', 1),
      float_min: floatValue(o, 'float_min'),
      float_max: floatValue(o, 'float_max'),
      condition: optStr(o, 'fade'),
    };
  },
  SALES: (o) => {
    const price = decimalPrice(o, 'price');
    if (price === null) throw new AppError('non_positive_price', 'price missing');
    const asset = asObj(o.asset_info ?? {}, 'asset_info');
    const info = asObj(asset.info ?? {}, 'asset_info.info');
    return {
      sale_id: str(o, 'id'),
      market_hash_name: str(o, 'market_hash_name'),
      phase: phaseOf(o),
      price,
      sold_at: timeFromSeconds(o, 'transact_time'),
      float_value: floatValue(asset, 'paintwear'),
      paint_index: optInt(info, 'paintindex'),
      paint_seed: optInt(info, 'paintseed'),
      stickers: parseStickers(info.stickers),
      charms: parseCharms(info.keychains),
    };
  },
};

export const goodsPagesAdapter: Adapter = {
  format: 'goods-pages',
  kinds: Object.keys(PATHS) as Kind[],
  async *pages<K extends Kind>(kind: K, ctx: FetchContext, input: KindInput): AsyncGenerator<Page<K>> {
    const path = PATHS[kind];
    const parse = PARSERS[kind] as ((o: Obj) => RowMap[K]) | undefined;
    if (!path || !parse) throw new AppError('kind_unsupported', `${ctx.market} has no ${kind}`);
    const sec = (ms: number | undefined) => (ms === undefined ? undefined : Math.floor(ms / 1000));
    const window = { start_time: sec(input.window?.from), end_time: sec(input.window?.to) };
    let totalPages = 1;
    for (let n = 1; n <= totalPages; n++) {
      const data = await ctx.request(async () => {
        const body = asObj(
          await ctx.client.getJson(path, { page_num: n, page_size: PAGE, ...window }, ctx.signal),
          'response',
        );
        if (body.code !== 'OK') throw malformed(ctx.market, `error code ${JSON.stringify(body.code)}`);
        const d = asObj(body.data, 'data');
        const items = asArray(d.items, 'data.items');
        const pages = int(d, 'total_page');
        if (items.length === 0 && n < pages) throw malformed(ctx.market, `empty page ${n} of ${pages}`);
        return { items, pages };
      });
      // The page count may grow while we page (new listings); follow it.
      totalPages = Math.max(totalPages, data.pages);
      yield collect<K>(data.items, (raw) => parse(asObj(raw, 'item')));
    }
  },
};

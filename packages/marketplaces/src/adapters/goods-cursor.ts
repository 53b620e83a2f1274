/** CN-A: cursor-paged, integer fen, phase as its own field, price 0 when there is no listing. */
import { AppError } from '@skinprices/domain';
import type { Adapter, FetchContext, KindInput } from '../adapter.js';
import {
  asArray,
  asObj,
  collect,
  exteriorFrom,
  floatValue,
  identity,
  int,
  listingRow,
  malformed,
  minorPrice,
  optInt,
  optStr,
  str,
  timeFromSeconds,
  type Obj,
} from '../normalize.js';
import type { Kind, Page, RowMap } from '../rows.js';

const PATHS: Partial<Record<Kind, string>> = {
  LISTINGS: '/api/market/goods',
  BUYORDERS: '/api/market/buy-orders',
  FLOAT_RANGED: '/api/market/float-ranges',
  FLOAT_BUYORDERS: '/api/market/float-buy-orders',
  SALES: '/api/market/sales',
};

const PAGE = 500;

function envelope(market: string, body: unknown): { items: unknown[]; next: string | null } {
  const o = asObj(body, 'response');
  if (o.code !== 0) throw malformed(market, `error code ${JSON.stringify(o.code)}: ${String(o.msg)}`);
  const data = asObj(o.data, 'data');
  const next = data.next_cursor;
  if (next !== null && typeof next !== 'string') throw malformed(market, 'next_cursor is neither a string nor null');
  return { items: asArray(data.items, 'data.items'), next };
}

const ident = (o: Obj) => identity(str(o, 'market_hash_name'), optStr(o, 'phase_tag'));

const PARSERS: { [K in Kind]?: (o: Obj) => RowMap[K] | RowMap[K][] } = {
  LISTINGS: (o) => {
    const count = int(o, 'sell_num');
    const id = ident(o);
    return listingRow(id, {
      exterior: exteriorFrom(optStr(o, 'exterior'), id.market_hash_name),
      price: minorPrice(o, 'sell_min_price_fen', count),
      count,
      template_id: int(o, 'template_id', 1),
      item_page_url: null,
    });
  },
  BUYORDERS: (o) => {
    const count = int(o, 'buy_num');
    const { market_hash_name, phase } = ident(o);
    return {
      market_hash_name,
      phase,
      tier: null,
      price: minorPrice(o, 'buy_max_price_fen', count),
      // The blue price exists for some items only: absent or 0 is "none", whatever the count.
      blue_price: minorPrice(o, 'blue_buy_max_price_fen', 0),
      count,
      template_id: int(o, 'template_id', 1),
      type_id: optInt(o, 'type_id'),
    };
  },
  FLOAT_RANGED: (o) => {
    const { market_hash_name, phase } = ident(o);
    return asArray(o.ranges, 'ranges').map((r) => {
      const range = asObj(r, 'range');
      const count = int(range, 'sell_num');
      const labels = asObj(range.phase_names ?? {}, 'phase_names');
      return {
        market_hash_name,
        phase,
        float_min: floatValue(range, 'min') ?? '0',
        float_max: floatValue(range, 'max') ?? '1',
        first_price: minorPrice(range, 'first_price_fen', count),
        fifth_price: count >= 5 ? minorPrice(range, 'fifth_price_fen', count) : null,
        count,
        phase_labels: Object.fromEntries(
          Object.entries(labels).filter((e): e is [string, string] => typeof e[1] === 'string'),
        ),
      };
    });
  },
  FLOAT_BUYORDERS: (o) => {
    const quantity = int(o, 'num', 1);
    const price = minorPrice(o, 'price_fen', quantity);
    if (price === null) throw new AppError('non_positive_price', 'price_fen missing');
    const { market_hash_name, phase } = ident(o);
    return {
      market_hash_name,
      phase,
      order_id: str(o, 'order_id'),
      price,
      quantity,
      float_min: floatValue(o, 'float_min'),
      float_max: floatValue(o, 'float_max'),
      condition: optStr(o, 'fade'),
    };
  },
  SALES: (o) => {
    const price = minorPrice(o, 'price_fen', 1);
    if (price === null) throw new AppError('non_positive_price', 'price_fen missing');
    const { market_hash_name, phase } = ident(o);
    return {
      sale_id: str(o, 'id'),
      market_hash_name,
      phase,
      price,
      sold_at: timeFromSeconds(o, 'sold_at'),
      float_value: floatValue(o, 'float_value'),
      paint_index: optInt(o, 'paint_index'),
      paint_seed: optInt(o, 'paint_seed'),
      stickers: parseStickers(o.stickers),
      charms: parseCharms(o.keychains),
    };
  },
};

export function parseStickers(v: unknown): RowMap['SALES']['stickers'] {
  if (v === null || v === undefined) return [];
  return asArray(v, 'stickers').map((s) => {
    const o = asObj(s, 'sticker');
    return { slot: int(o, 'slot'), name: str(o, 'name'), wear: floatValue(o, 'wear') };
  });
}

export function parseCharms(v: unknown): RowMap['SALES']['charms'] {
  if (v === null || v === undefined) return [];
  return asArray(v, 'charms').map((s) => {
    const o = asObj(s, 'charm');
    return { slot: int(o, 'slot'), name: str(o, 'name'), pattern: optInt(o, 'pattern') };
  });
}

export const goodsCursorAdapter: Adapter = {
  format: 'goods-cursor',
  kinds: Object.keys(PATHS) as Kind[],
  async *pages<K extends Kind>(kind: K, ctx: FetchContext, input: KindInput): AsyncGenerator<Page<K>> {
    const path = PATHS[kind];
    const parse = PARSERS[kind] as ((o: Obj) => RowMap[K] | RowMap[K][]) | undefined;
    if (!path || !parse) throw new AppError('kind_unsupported', `${ctx.market} has no ${kind}`);
    let cursor: string | undefined;
    for (let n = 0; ; n++) {
      const query = { cursor, limit: PAGE, since: input.window?.from, until: input.window?.to };
      const { items, next } = await ctx.request(async () => {
        const page = envelope(ctx.market, await ctx.client.getJson(path, query, ctx.signal));
        // An empty page that claims more follow is an upstream glitch: retry it, do not end early.
        if (page.items.length === 0 && page.next !== null)
          throw malformed(ctx.market, `empty page ${n} before the end`);
        return page;
      });
      yield collect<K>(items, (raw) => parse(asObj(raw, 'item')));
      if (next === null) return;
      cursor = next;
    }
  },
};

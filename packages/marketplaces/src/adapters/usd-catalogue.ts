/** USD-1..6: page-numbered catalogue in integer cents; USD-1 also has sales with ISO times. */
import { AppError, parseTimestamp } from '@skinprices/domain';
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
  type Obj,
} from '../normalize.js';
import type { Kind, Page, RowMap } from '../rows.js';
import { parseCharms, parseStickers } from './goods-cursor.js';

const PAGE = 1000;

const PARSERS: { [K in Kind]?: { path: string; key: string; parse: (o: Obj) => RowMap[K] } } = {
  LISTINGS: {
    path: '/v1/market/items',
    key: 'items',
    parse: (o) => {
      const name = str(o, 'market_hash_name');
      const count = int(o, 'quantity');
      const price = minorPrice(o, 'price_cents', count);
      return listingRow(identity(name, optStr(o, 'phase')), {
        exterior: exteriorFrom(optStr(o, 'exterior'), name),
        price,
        count,
        template_id: null,
        item_page_url: null,
      });
    },
  },
  SALES: {
    path: '/v1/market/sales',
    key: 'sales',
    parse: (o) => {
      const price = minorPrice(o, 'price_cents', 1);
      if (price === null) throw new AppError('non_positive_price', 'price_cents missing');
      const { market_hash_name, phase } = identity(str(o, 'market_hash_name'), optStr(o, 'phase'));
      return {
        sale_id: str(o, 'id'),
        market_hash_name,
        phase,
        price,
        sold_at: parseIso(str(o, 'sold_at')),
        float_value: floatValue(o, 'wear'),
        paint_index: optInt(o, 'paint_index'),
        paint_seed: optInt(o, 'pattern'),
        stickers: parseStickers(o.stickers),
        charms: parseCharms(o.charms),
      };
    },
  },
};

/** ISO 8601 with or without milliseconds. */
function parseIso(s: string): number {
  const withMs = /\.\d{3}Z$/.test(s) ? s : s.replace(/Z$/, '.000Z');
  return parseTimestamp(withMs);
}

export const usdCatalogueAdapter: Adapter = {
  format: 'usd-catalogue',
  kinds: ['LISTINGS', 'SALES'],
  async *pages<K extends Kind>(kind: K, ctx: FetchContext, input: KindInput): AsyncGenerator<Page<K>> {
    const spec = PARSERS[kind] as { path: string; key: string; parse: (o: Obj) => RowMap[K] } | undefined;
    if (!spec) throw new AppError('kind_unsupported', `${ctx.market} has no ${kind}`);
    let pages = 1;
    for (let n = 1; n <= pages; n++) {
      const query = { page: n, per_page: PAGE, since: input.window?.from, until: input.window?.to };
      const data = await ctx.request(async () => {
        const body = asObj(await ctx.client.getJson(spec.path, query, ctx.signal), 'response');
        const rows = asArray(body[spec.key], spec.key);
        const total = int(body, 'pages', 1);
        if (rows.length === 0 && n < total) throw malformed(ctx.market, `empty page ${n} of ${total}`);
        return { rows, total };
      });
      pages = Math.max(pages, data.total);
      yield collect<K>(data.rows, (raw) => spec.parse(asObj(raw, 'row')));
    }
  },
};

/** STORE: search results in cents (0 = none) and order books as [price, quantity] graphs. */
import { AppError } from '@skinprices/domain';
import type { Adapter, FetchContext } from '../adapter.js';
import {
  asArray,
  asObj,
  collect,
  decimalPrice,
  identity,
  int,
  listingRow,
  malformed,
  minorPrice,
  str,
  type Obj,
} from '../normalize.js';
import type { Kind, Page, RowMap } from '../rows.js';

const PAGE = 100;

function levels(v: unknown, what: string): { price: string; count: number }[] {
  return asArray(v ?? [], what).map((lvl) => {
    const [price, count] = asArray(lvl, what);
    const p = decimalPrice({ price }, 'price');
    if (p === null) throw new AppError('non_positive_price', `${what}: level without a price`);
    return { price: p, count: int({ count }, 'count', 1) };
  });
}

const SPECS: { [K in Kind]?: { path: string; parse: (o: Obj) => RowMap[K] } } = {
  LISTINGS: {
    path: '/market/search/render',
    parse: (o) => {
      const count = int(o, 'sell_listings');
      return listingRow(identity(str(o, 'hash_name'), null), {
        price: minorPrice(o, 'sell_price', count),
        count,
        template_id: null,
        item_page_url: null,
      });
    },
  },
  ORDER_BOOK: {
    path: '/market/orderbooks',
    parse: (o) => ({
      market_hash_name: str(o, 'hash_name'),
      phase: '',
      asks: levels(o.sell_order_graph, 'sell_order_graph'),
      bids: levels(o.buy_order_graph, 'buy_order_graph'),
    }),
  },
};

export const storeAdapter: Adapter = {
  format: 'store',
  kinds: ['LISTINGS', 'ORDER_BOOK'],
  async *pages<K extends Kind>(kind: K, ctx: FetchContext): AsyncGenerator<Page<K>> {
    const spec = SPECS[kind] as { path: string; parse: (o: Obj) => RowMap[K] } | undefined;
    if (!spec) throw new AppError('kind_unsupported', `${ctx.market} has no ${kind}`);
    let total = Infinity;
    for (let start = 0; start < total; start += PAGE) {
      const data = await ctx.request(async () => {
        const body = asObj(
          await ctx.client.getJson(spec.path, { start, count: PAGE, norender: 1 }, ctx.signal),
          'response',
        );
        if (body.success !== true) throw malformed(ctx.market, 'success is not true');
        const results = asArray(body.results, 'results');
        const t = int(body, 'total_count');
        if (results.length === 0 && start < t) throw malformed(ctx.market, `empty page at ${start} of ${t}`);
        return { results, total: t };
      });
      total = data.total;
      yield collect<K>(data.results, (raw) => spec.parse(asObj(raw, 'result')));
    }
  },
};

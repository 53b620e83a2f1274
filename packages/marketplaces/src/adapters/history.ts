/** HIST-A: daily closes of one UTC day, paged. */
import { AppError, DAY_MS, utcDate } from '@skinprices/domain';
import type { Adapter, FetchContext, KindInput } from '../adapter.js';
import { asArray, asObj, collect, decimalPrice, identity, int, malformed, optInt, optStr, str } from '../normalize.js';
import type { Kind, Page } from '../rows.js';

export const historyAdapter: Adapter = {
  format: 'history',
  kinds: ['HISTORY'],
  async *pages<K extends Kind>(kind: K, ctx: FetchContext, input: KindInput): AsyncGenerator<Page<K>> {
    if (kind !== 'HISTORY' || input.day === undefined)
      throw new AppError('kind_unsupported', `${ctx.market}: HISTORY needs a day`);
    const day = input.day;
    const date = utcDate(day * DAY_MS);
    let pages = 1;
    for (let n = 1; n <= pages; n++) {
      const data = await ctx.request(async () => {
        const body = asObj(
          await ctx.client.getJson('/api/history/daily', { date, page: n, per_page: 5000 }, ctx.signal),
          'response',
        );
        if (body.date !== date) throw malformed(ctx.market, `asked for ${date}, got ${String(body.date)}`);
        const items = asArray(body.items, 'items');
        const total = int(body, 'pages', 1);
        if (items.length === 0 && n < total) throw malformed(ctx.market, `empty page ${n} of ${total}`);
        return { items, total };
      });
      pages = Math.max(pages, data.total);
      yield collect<K>(data.items, (raw) => {
        const o = asObj(raw, 'item');
        const price = decimalPrice(o, 'close');
        if (price === null) throw new AppError('non_positive_price', 'close missing');
        const { market_hash_name, phase } = identity(str(o, 'name'), optStr(o, 'phase'));
        return { market_hash_name, phase, day, price, count: optInt(o, 'volume') } as Page<K>['rows'][number];
      });
    }
  },
};

/** EU-A: one document keyed by name; variants per phase; wear in upper case. */
import { AppError } from '@skinprices/domain';
import type { Adapter, FetchContext } from '../adapter.js';
import {
  asArray,
  asObj,
  collect,
  decimalPrice,
  exteriorFrom,
  identity,
  int,
  listingRow,
  optStr,
} from '../normalize.js';
import type { Kind, Page } from '../rows.js';

export const priceMapAdapter: Adapter = {
  format: 'price-map',
  kinds: ['LISTINGS'],
  async *pages<K extends Kind>(kind: K, ctx: FetchContext): AsyncGenerator<Page<K>> {
    if (kind !== 'LISTINGS') throw new AppError('kind_unsupported', `${ctx.market} has no ${kind}`);
    const doc = await ctx.request(async () =>
      asObj(await ctx.client.getJson('/api/v1/prices', {}, ctx.signal), 'response'),
    );
    const entries = Object.entries(doc).flatMap(([name, variants]) => {
      try {
        return asArray(variants, name).map((v) => [name, v] as const);
      } catch {
        return [[name, variants] as const];
      }
    });
    yield collect<K>(entries, (entry) => {
      const [name, raw] = entry as readonly [string, unknown];
      const o = asObj(raw, name);
      const count = int(o, 'qty');
      const price = decimalPrice(o, 'min_price', count);
      const id = identity(name, optStr(o, 'phase'));
      return listingRow(id, {
        exterior: exteriorFrom(optStr(o, 'exterior'), name),
        price,
        count,
        template_id: null,
        item_page_url: null,
      }) as Page<K>['rows'][number];
    });
  },
};

/**
 * CN-D / EU-B: every individual listing. The lowest price and count per item are derived here,
 * so nothing can be said before the last page: a minimum over part of the listings would be an
 * invented (too high) price. A failed page therefore fails the whole cycle.
 */
import { AppError, PHASES, type PhaseOrNone } from '@skinprices/domain';
import type { Adapter, FetchContext } from '../adapter.js';
import {
  asArray,
  asObj,
  collect,
  decimalPrice,
  identity,
  int,
  listingRow,
  LowestOffers,
  malformed,
  str,
} from '../normalize.js';
import type { Kind, Page, Rejected } from '../rows.js';

const PAGE = 5000;
const PHASE_SUFFIX = new RegExp(` - (${PHASES.join('|')})$`);

export function splitPhase(name: string): { name: string; phase: PhaseOrNone } {
  const m = PHASE_SUFFIX.exec(name);
  return m ? { name: name.slice(0, -m[0].length), phase: m[1] as PhaseOrNone } : { name, phase: '' };
}

export const rawListingsAdapter: Adapter = {
  format: 'raw-listings',
  kinds: ['LISTINGS'],
  async *pages<K extends Kind>(kind: K, ctx: FetchContext): AsyncGenerator<Page<K>> {
    if (kind !== 'LISTINGS') throw new AppError('kind_unsupported', `${ctx.market} has no ${kind}`);
    const best = new LowestOffers();
    const seen = new Set<string>();
    const rejected: Rejected[] = [];
    let total = Infinity;
    // Advance by what actually arrived: an upstream that caps pages below PAGE must not make us skip.
    for (let offset = 0; offset < total;) {
      const page = await ctx.request(async () => {
        const body = asObj(await ctx.client.getJson('/v2/listings', { offset, limit: PAGE }, ctx.signal), 'response');
        const listings = asArray(body.listings, 'listings');
        const t = int(body, 'total');
        if (listings.length === 0 && offset < t) throw malformed(ctx.market, `empty page at offset ${offset} of ${t}`);
        return { listings, total: t };
      });
      total = page.total;
      offset += page.listings.length;
      const parsed = collect<'LISTINGS'>(page.listings, (raw) => {
        const o = asObj(raw, 'listing');
        const id = str(o, 'listing_id');
        // A listing repeated across pages (the list moved while we paged) counts once.
        if (seen.has(id)) return [];
        seen.add(id);
        const { name, phase } = splitPhase(str(o, 'name'));
        const price = decimalPrice(o, 'price');
        if (price === null) throw new AppError('non_positive_price', 'listing without a price');
        return listingRow(identity(name, phase), { price, count: 1, template_id: null, item_page_url: null });
      });
      rejected.push(...parsed.rejected);
      for (const row of parsed.rows) best.add(row);
    }
    yield { rows: best.rows() as Page<K>['rows'], rejected };
  },
};

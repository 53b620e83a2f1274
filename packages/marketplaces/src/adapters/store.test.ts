import { AppError } from '@skinprices/domain';
import { describe, expect, it } from 'vitest';
import type { FetchContext } from '../adapter.js';
import type { Kind, Page } from '../rows.js';
import { fetchAll as fetchPages, fakeUpstream, keyedBodies } from '../testing/fake-upstream.js';
import { storeAdapter } from './store.js';

// ---- a fake STORE upstream: canned bodies keyed by path and start, no network ----

const fakeContext = (bodies: Record<string, unknown>) =>
  fakeUpstream(
    'store',
    keyedBodies(bodies, (path, q) => `${path}?start=${String(q.start)}`),
  );

const fetchAll = <K extends Kind>(kind: K, ctx: FetchContext): Promise<Page<K>[]> =>
  fetchPages(storeAdapter, kind, ctx, {});

const answer = (results: unknown[], start = 0, total_count = results.length) => ({
  success: true,
  start,
  pagesize: 100,
  total_count,
  results,
});

const REDLINE = 'AK-47 | Redline (Field-Tested)';

const result = (over: Record<string, unknown> = {}) => ({
  hash_name: REDLINE,
  sell_listings: 31,
  sell_price: 2_514,
  sell_price_text: '$25.14',
  asset_description: { market_hash_name: REDLINE, type: 'weapon' },
  ...over,
});

const redlineRow = {
  market_hash_name: REDLINE,
  phase: '',
  price: '25.14',
  count: 31,
  exterior: 'Field-Tested',
  stattrak: false,
  souvenir: false,
  template_id: null,
  item_page_url: null,
};

async function listingsOf(results: unknown[]) {
  const { ctx } = fakeContext({ '/market/search/render?start=0': answer(results) });
  const [page, ...more] = await fetchAll('LISTINGS', ctx);
  expect(more).toEqual([]);
  return page!;
}

async function bookOf(results: unknown[]) {
  const { ctx } = fakeContext({ '/market/orderbooks?start=0': answer(results) });
  const [page] = await fetchAll('ORDER_BOOK', ctx);
  return page!;
}

describe('store adapter (STORE)', () => {
  describe('LISTINGS', () => {
    it('reads sell_price in cents: 2514 → "25.14"', async () => {
      expect(await listingsOf([result()])).toEqual({ rows: [redlineRow], rejected: [] });
    });

    it('pages by start, 100 at a time, until total_count', async () => {
      const first = Array.from({ length: 100 }, (_, k) => result({ sell_price: k + 1 }));
      const { ctx, calls } = fakeContext({
        '/market/search/render?start=0': answer(first, 0, 101),
        '/market/search/render?start=100': answer([result({ sell_price: 5_000 })], 100, 101),
      });
      const pages = await fetchAll('LISTINGS', ctx);
      expect(pages.map((p) => p.rows.length)).toEqual([100, 1]);
      expect(pages[1]?.rows[0]?.price).toBe('50.00');
      expect(calls.map((c) => c.query)).toEqual([
        { start: 0, count: 100, norender: 1 },
        { start: 100, count: 100, norender: 1 },
      ]);
    });

    it('sell_price 0 with sell_listings 0 is "no listing": price null', async () => {
      const page = await listingsOf([result({ sell_listings: 0, sell_price: 0, sell_price_text: '' })]);
      expect(page).toEqual({ rows: [{ ...redlineRow, price: null, count: 0 }], rejected: [] });
    });

    it('sell_price 0 with listings is refused', async () => {
      const bad = result({ sell_price: 0 });
      const page = await listingsOf([bad]);
      expect(page).toEqual({ rows: [], rejected: [{ reason: expect.stringContaining('sell_price'), raw: bad }] });
    });

    it('a missing sell_price with listings is refused: null means "no listing" only with count 0', async () => {
      const absent = result() as Record<string, unknown>;
      delete absent.sell_price;
      const page = await listingsOf([absent]);
      expect(page.rows).toEqual([]);
      expect(page.rejected.map((r) => r.raw)).toEqual([absent]);
    });

    it('success other than true is upstream_malformed', async () => {
      const { ctx } = fakeContext({ '/market/search/render?start=0': { success: false } });
      const err = await fetchAll('LISTINGS', ctx).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AppError);
      expect(err).toMatchObject({ code: 'upstream_malformed', retryable: true });
    });
  });

  describe('ORDER_BOOK', () => {
    it('reads the [price, count] graphs as asks and bids with decimal strings', async () => {
      const page = await bookOf([
        {
          hash_name: REDLINE,
          sell_order_graph: [
            ['2.51', 120],
            ['2.6', 7],
          ],
          buy_order_graph: [
            ['2.40', 300],
            ['2', 1],
          ],
        },
      ]);
      expect(page).toEqual({
        rows: [
          {
            market_hash_name: REDLINE,
            phase: '',
            asks: [
              { price: '2.51', count: 120 },
              { price: '2.60', count: 7 },
            ],
            bids: [
              { price: '2.40', count: 300 },
              { price: '2.00', count: 1 },
            ],
          },
        ],
        rejected: [],
      });
    });

    it('a book without bids (or asks) has an empty side', async () => {
      const page = await bookOf([{ hash_name: REDLINE, sell_order_graph: [['2.51', 120]], buy_order_graph: [] }]);
      expect(page.rows[0]).toMatchObject({ asks: [{ price: '2.51', count: 120 }], bids: [] });
    });

    it.each([
      ['a price "0"', ['0', 5]],
      ['a price "0.00"', ['0.00', 5]],
      ['a price as a JSON number', [2.51, 5]],
      ['a count of 0', ['2.51', 0]],
      ['no price', [null, 5]],
    ])('a level with %s is refused, the whole book with it', async (_what, level) => {
      const bad = { hash_name: REDLINE, sell_order_graph: [['2.51', 120], level], buy_order_graph: [] };
      const good = { hash_name: 'Sticker | Crown (Foil)', sell_order_graph: [['310.00', 1]], buy_order_graph: [] };
      const page = await bookOf([bad, good]);
      expect(page.rows.map((r) => r.market_hash_name)).toEqual(['Sticker | Crown (Foil)']);
      expect(page.rejected).toEqual([{ reason: expect.any(String), raw: bad }]);
    });
  });
});

import { AppError } from '@skinprices/domain';
import { describe, expect, it } from 'vitest';
import type { FetchContext, KindInput } from '../adapter.js';
import type { Kind, Page } from '../rows.js';
import { fakeUpstream, keyedBodies } from '../testing/fake-upstream.js';
import { usdCatalogueAdapter } from './usd-catalogue.js';

// ---- a fake USD-1 upstream: canned bodies keyed by path and page, no network ----

const fakeContext = (bodies: Record<string, unknown>) =>
  fakeUpstream(
    'usd-1',
    keyedBodies(bodies, (path, q) => `${path}?page=${String(q.page)}`),
  );

async function fetchAll<K extends Kind>(kind: K, ctx: FetchContext, input: KindInput = {}): Promise<Page<K>[]> {
  const pages: Page<K>[] = [];
  for await (const page of usdCatalogueAdapter.pages(kind, ctx, input)) pages.push(page);
  return pages;
}

const items = (rows: unknown[], page = 1, pages = 1) => ({
  page,
  pages,
  per_page: 1000,
  total: rows.length,
  items: rows,
});
const sales = (rows: unknown[], page = 1, pages = 1) => ({
  page,
  pages,
  per_page: 1000,
  total: rows.length,
  sales: rows,
});

const REDLINE = 'AK-47 | Redline (Field-Tested)';
const KARAMBIT = '★ Karambit | Doppler (Factory New)';

const item = (over: Record<string, unknown> = {}) => ({
  market_hash_name: REDLINE,
  phase: null,
  price_cents: 1_234,
  quantity: 9,
  exterior: 'Field-Tested',
  ...over,
});

const redlineRow = {
  market_hash_name: REDLINE,
  phase: '',
  price: '12.34',
  count: 9,
  exterior: 'Field-Tested',
  stattrak: false,
  souvenir: false,
  template_id: null,
  item_page_url: null,
};

async function listingsOf(rows: unknown[]) {
  const { ctx } = fakeContext({ '/v1/market/items?page=1': items(rows) });
  const [page, ...more] = await fetchAll('LISTINGS', ctx);
  expect(more).toEqual([]);
  return page!;
}

describe('usd-catalogue adapter (USD-1..6)', () => {
  describe('LISTINGS', () => {
    it('reads price_cents as integer cents: 1234 → "12.34"', async () => {
      expect(await listingsOf([item()])).toEqual({ rows: [redlineRow], rejected: [] });
    });

    it('pages 1..pages, 1000 a page', async () => {
      const { ctx, calls } = fakeContext({
        '/v1/market/items?page=1': items([item({ price_cents: 1 })], 1, 2),
        '/v1/market/items?page=2': items([item({ price_cents: 100_000_00 })], 2, 2),
      });
      const pages = await fetchAll('LISTINGS', ctx);
      expect(pages.map((p) => p.rows.map((r) => r.price))).toEqual([['0.01'], ['100000.00']]);
      expect(calls.map((c) => c.query)).toEqual([
        { page: 1, per_page: 1000, since: undefined, until: undefined },
        { page: 2, per_page: 1000, since: undefined, until: undefined },
      ]);
    });

    it('reads the phase in plain English', async () => {
      const page = await listingsOf([
        item({ market_hash_name: KARAMBIT, phase: 'Sapphire', exterior: 'Factory New', price_cents: 1_500_000 }),
      ]);
      expect(page.rows).toEqual([
        { ...redlineRow, market_hash_name: KARAMBIT, phase: 'Sapphire', exterior: 'Factory New', price: '15000.00' },
      ]);
    });

    it('price 0 with quantity 0 is "no listing"; price 0 or none with quantity > 0 is refused', async () => {
      const zero = item({ price_cents: 0 });
      const none = item({ price_cents: null });
      const page = await listingsOf([item({ price_cents: 0, quantity: 0 }), zero, none]);
      expect(page.rows).toEqual([{ ...redlineRow, price: null, count: 0 }]);
      expect(page.rejected).toEqual([
        { reason: expect.stringContaining('price_cents: price must be > 0'), raw: zero },
        { reason: expect.stringMatching(/^price_cents missing/), raw: none },
      ]);
    });

    it('an empty page before the last is upstream_malformed', async () => {
      const { ctx } = fakeContext({ '/v1/market/items?page=1': items([], 1, 2) });
      await expect(fetchAll('LISTINGS', ctx)).rejects.toMatchObject({ code: 'upstream_malformed', retryable: true });
    });
  });

  describe('SALES', () => {
    const sale = (over: Record<string, unknown> = {}) => ({
      id: 'usd-1-42-900',
      market_hash_name: REDLINE,
      phase: null,
      price_cents: 1_199,
      sold_at: '2024-05-01T12:00:00.123Z',
      wear: '0.2512345678',
      paint_index: 282,
      pattern: 661,
      stickers: [{ slot: 3, name: 'Sticker | Crown (Foil)', wear: '0.10' }],
      charms: [{ slot: 0, name: "Charm | Lil' Ava", pattern: 77 }],
      ...over,
    });
    const saleRow = {
      sale_id: 'usd-1-42-900',
      market_hash_name: REDLINE,
      phase: '',
      price: '11.99',
      sold_at: Date.UTC(2024, 4, 1, 12, 0, 0, 123),
      float_value: '0.2512345678',
      paint_index: 282,
      paint_seed: 661,
      stickers: [{ slot: 3, name: 'Sticker | Crown (Foil)', wear: '0.1' }],
      charms: [{ slot: 0, name: "Charm | Lil' Ava", pattern: 77 }],
    };

    async function salesOf(rows: unknown[], input: KindInput = {}) {
      const { ctx, calls } = fakeContext({ '/v1/market/sales?page=1': sales(rows) });
      const [page] = await fetchAll('SALES', ctx, input);
      return { page: page!, calls };
    }

    it('reads an ISO sold_at with milliseconds, cents, the wear exact, pattern → paint_seed', async () => {
      const window = { from: 1_714_561_200_000, to: 1_714_564_800_000 };
      const { page, calls } = await salesOf([sale()], { window });
      expect(page).toEqual({ rows: [saleRow], rejected: [] });
      expect(calls[0]?.query).toEqual({ page: 1, per_page: 1000, since: window.from, until: window.to });
    });

    it('reads an ISO sold_at without milliseconds', async () => {
      const { page } = await salesOf([sale({ sold_at: '2024-05-01T12:00:00Z' })]);
      expect(page.rows).toEqual([{ ...saleRow, sold_at: Date.UTC(2024, 4, 1, 12, 0, 0) }]);
    });

    it.each(['2024-05-01 12:00:00', '2024-05-01T12:00:00+02:00', '2024-02-30T12:00:00Z', '1714564800'])(
      'refuses a sold_at that is not an ISO UTC time: %j',
      async (sold_at) => {
        const bad = sale({ sold_at });
        const { page } = await salesOf([bad]);
        expect(page).toEqual({
          rows: [],
          rejected: [{ reason: expect.stringContaining(sold_at.slice(0, 10)), raw: bad }],
        });
      },
    );

    it('refuses a sale with a zero price', async () => {
      const bad = sale({ price_cents: 0 });
      expect((await salesOf([bad])).page.rejected).toEqual([{ reason: expect.any(String), raw: bad }]);
    });
  });

  it('refuses a kind the catalogue does not serve', async () => {
    const { ctx } = fakeContext({});
    const err = await fetchAll('ORDER_BOOK', ctx).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: 'kind_unsupported' });
  });
});

import { isRetryable } from '@skinprices/domain';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { FetchContext, KindInput } from '../adapter.js';
import type { Kind, Page } from '../rows.js';
import { failure, fakeUpstream, type Query } from '../testing/fake-upstream.js';
import { goodsCursorAdapter } from './goods-cursor.js';

// ---- a fake CN-A upstream: canned bodies keyed by path and cursor, no network ----

const direct: FetchContext['request'] = (fn) => fn();

/** The poller's retry reduced to its essence: one more try for an error that says it is worth one. */
const retryOnce: FetchContext['request'] = async (fn) => {
  try {
    return await fn();
  } catch (err) {
    if (isRetryable(err)) return fn();
    throw err;
  }
};

const fakeContext = (answer: (path: string, query: Query) => unknown, request = direct) =>
  fakeUpstream('cn-a', answer, request);

/** Answers `path` with `bodies[cursor]`, '' being the first page (asked without a cursor). */
function byCursor(path: string, bodies: Record<string, unknown>) {
  return (p: string, q: Query): unknown => {
    const key = String(q.cursor ?? '');
    if (p !== path || !(key in bodies)) throw new Error(`unexpected request ${p} cursor=${key}`);
    return bodies[key];
  };
}

const envelope = (items: unknown[], next_cursor: string | null = null) => ({
  code: 0,
  msg: 'success',
  data: { items, next_cursor },
});

async function fetchAll<K extends Kind>(kind: K, ctx: FetchContext, input: KindInput = {}): Promise<Page<K>[]> {
  const pages: Page<K>[] = [];
  for await (const page of goodsCursorAdapter.pages(kind, ctx, input)) pages.push(page);
  return pages;
}

async function listingsOf(items: unknown[]) {
  const { ctx } = fakeContext(byCursor('/api/market/goods', { '': envelope(items) }));
  const [page, ...more] = await fetchAll('LISTINGS', ctx);
  expect(more).toEqual([]);
  return page!;
}

const REDLINE = 'AK-47 | Redline (Field-Tested)';
const KARAMBIT = '★ Karambit | Doppler (Factory New)';

/** One CN-A goods item as the upstream sends it. */
const goods = (over: Record<string, unknown> = {}) => ({
  template_id: 100_042,
  market_hash_name: REDLINE,
  phase_tag: null,
  exterior: 'wearcategory2',
  sell_min_price_fen: 12_345,
  sell_num: 7,
  ...over,
});

const redlineRow = {
  market_hash_name: REDLINE,
  phase: '',
  price: '123.45',
  count: 7,
  exterior: 'Field-Tested',
  stattrak: false,
  souvenir: false,
  template_id: 100_042,
  item_page_url: null,
};

describe('goods-cursor adapter (CN-A)', () => {
  describe('paging', () => {
    it('follows next_cursor page by page until it is null, the first page asked without a cursor', async () => {
      const { ctx, calls } = fakeContext(
        byCursor('/api/market/goods', {
          '': envelope([goods({ template_id: 1, sell_min_price_fen: 100 })], 'NTAw'),
          NTAw: envelope([goods({ template_id: 2, sell_min_price_fen: 200 })], 'MTAwMA'),
          MTAwMA: envelope([goods({ template_id: 3, sell_min_price_fen: 300 })], null),
        }),
      );
      const pages = await fetchAll('LISTINGS', ctx);
      expect(pages.map((p) => p.rows.map((r) => [r.template_id, r.price]))).toEqual([
        [[1, '1.00']],
        [[2, '2.00']],
        [[3, '3.00']],
      ]);
      expect(calls.map((c) => c.query.cursor)).toEqual([undefined, 'NTAw', 'MTAwMA']);
      expect(calls.every((c) => c.path === '/api/market/goods' && c.query.limit === 500)).toBe(true);
    });

    it('an empty page that claims more follow is malformed (retryable), never the end of the list', async () => {
      const { ctx } = fakeContext(
        byCursor('/api/market/goods', {
          '': envelope([goods()], 'NTAw'),
          NTAw: envelope([], 'MTAwMA'),
          MTAwMA: envelope([goods()], null),
        }),
      );
      const err = await failure(fetchAll('LISTINGS', ctx));
      expect(err.code).toBe('upstream_malformed');
      expect(err.retryable).toBe(true);
      expect(err.message).toContain('cn-a');
    });

    it('retries the glitched empty page through ctx.request and carries on from the same cursor', async () => {
      let glitches = 1;
      const pages: Record<string, unknown> = {
        '': envelope([goods({ template_id: 1 })], 'NTAw'),
        NTAw: envelope([goods({ template_id: 2 })], null),
      };
      const { ctx, calls } = fakeContext((path, q) => {
        if (q.cursor === 'NTAw' && glitches-- > 0) return envelope([], 'MTAwMA');
        return byCursor('/api/market/goods', pages)(path, q);
      }, retryOnce);
      const result = await fetchAll('LISTINGS', ctx);
      expect(result.map((p) => p.rows.map((r) => r.template_id))).toEqual([[1], [2]]);
      expect(calls.map((c) => c.query.cursor)).toEqual([undefined, 'NTAw', 'NTAw']);
    });

    it('an empty last page (next_cursor null) is the end of a list, not an error', async () => {
      const { ctx } = fakeContext(byCursor('/api/market/goods', { '': envelope([], null) }));
      expect(await fetchAll('LISTINGS', ctx)).toEqual([{ rows: [], rejected: [] }]);
    });

    it.each([
      [{ code: 1001, msg: 'system busy', data: null }],
      [{ code: '0', msg: 'success', data: { items: [], next_cursor: null } }],
    ])('a response whose code is not 0 is upstream_malformed: %j', async (body) => {
      const { ctx } = fakeContext(byCursor('/api/market/goods', { '': body }));
      const err = await failure(fetchAll('LISTINGS', ctx));
      expect(err.code).toBe('upstream_malformed');
      expect(err.retryable).toBe(true);
    });

    it('a next_cursor that is neither a string nor null is upstream_malformed', async () => {
      const { ctx } = fakeContext(
        byCursor('/api/market/goods', { '': { code: 0, data: { items: [goods()], next_cursor: 2 } } }),
      );
      expect((await failure(fetchAll('LISTINGS', ctx))).code).toBe('upstream_malformed');
    });

    it('refuses a kind CN-A does not serve', async () => {
      const { ctx, calls } = fakeContext(() => envelope([]));
      expect((await failure(fetchAll('ORDER_BOOK', ctx))).code).toBe('kind_unsupported');
      expect(calls).toEqual([]);
    });
  });

  describe('LISTINGS', () => {
    it('reads sell_min_price_fen as integer fen: 12345 → "123.45", with the exterior tag and template id', async () => {
      expect(await listingsOf([goods()])).toEqual({ rows: [redlineRow], rejected: [] });
    });

    it.each([
      [1, '0.01'],
      [10, '0.10'],
      [100, '1.00'],
      [123_456_789, '1234567.89'],
    ])('fen %d → "%s"', async (fen, price) => {
      const page = await listingsOf([goods({ sell_min_price_fen: fen })]);
      expect(page.rows[0]?.price).toBe(price);
    });

    it('price 0 with sell_num 0 means "no listing": price null, count 0', async () => {
      const page = await listingsOf([goods({ sell_min_price_fen: 0, sell_num: 0 })]);
      expect(page).toEqual({ rows: [{ ...redlineRow, price: null, count: 0 }], rejected: [] });
    });

    it('price 0 with sell_num > 0 is refused: never a zero price, never null', async () => {
      const bad = goods({ sell_min_price_fen: 0, sell_num: 3 });
      const page = await listingsOf([bad, goods()]);
      expect(page.rows).toEqual([redlineRow]);
      expect(page.rejected).toEqual([{ reason: expect.stringMatching(/sell_min_price_fen.*> 0/), raw: bad }]);
    });

    it('a missing price with sell_num > 0 is refused: null means "no listing" only with count 0', async () => {
      const absent = goods({ sell_num: 3 }) as Record<string, unknown>;
      delete absent.sell_min_price_fen;
      const nul = goods({ sell_min_price_fen: null, sell_num: 3 });
      const page = await listingsOf([absent, nul]);
      expect(page.rows).toEqual([]);
      expect(page.rejected.map((r) => r.raw)).toEqual([absent, nul]);
    });

    it.each([12.5, -100, '123.45'])('refuses a price that is not a positive integer: %j', async (fen) => {
      const bad = goods({ sell_min_price_fen: fen });
      const page = await listingsOf([bad]);
      expect(page).toEqual({ rows: [], rejected: [{ reason: expect.any(String), raw: bad }] });
    });

    it.each([
      ['P1', 'Phase 1'],
      ['P2', 'Phase 2'],
      ['P3', 'Phase 3'],
      ['P4', 'Phase 4'],
      ['ruby', 'Ruby'],
      ['sapphire', 'Sapphire'],
      ['black_pearl', 'Black Pearl'],
      ['emerald', 'Emerald'],
      [null, ''],
    ])('phase_tag %j is the phase %j', async (tag, phase) => {
      const page = await listingsOf([goods({ market_hash_name: KARAMBIT, exterior: 'wearcategory0', phase_tag: tag })]);
      expect(page.rejected).toEqual([]);
      expect(page.rows).toEqual([{ ...redlineRow, market_hash_name: KARAMBIT, exterior: 'Factory New', phase }]);
    });

    it('an unknown phase tag is refused, never read as "no phase"', async () => {
      const bad = goods({ market_hash_name: KARAMBIT, exterior: 'wearcategory0', phase_tag: 'P5' });
      const page = await listingsOf([bad, goods()]);
      expect(page.rows).toEqual([redlineRow]);
      expect(page.rejected).toEqual([{ reason: "unknown phase 'P5'", raw: bad }]);
    });

    it('a wear tag contradicting the name is refused', async () => {
      const bad = goods({ exterior: 'wearcategory0' });
      const page = await listingsOf([bad]);
      expect(page.rows).toEqual([]);
      expect(page.rejected).toEqual([{ reason: expect.stringContaining('contradicts the name'), raw: bad }]);
    });

    it('an item without wear (no tag, no exterior in the name) has exterior null', async () => {
      const page = await listingsOf([
        goods({ market_hash_name: 'Sticker | Crown (Foil)', exterior: null, sell_min_price_fen: 250_000 }),
      ]);
      expect(page.rows).toEqual([
        { ...redlineRow, market_hash_name: 'Sticker | Crown (Foil)', exterior: null, price: '2500.00' },
      ]);
    });

    it('reads StatTrak™ and Souvenir from the name', async () => {
      const page = await listingsOf([
        goods({ market_hash_name: 'StatTrak™ AK-47 | Redline (Field-Tested)' }),
        goods({ market_hash_name: 'Souvenir AWP | Dragon Lore (Factory New)', exterior: 'wearcategory0' }),
      ]);
      expect(page.rows.map((r) => [r.stattrak, r.souvenir])).toEqual([
        [true, false],
        [false, true],
      ]);
    });

    it('one bad item does not sink its page; items that are not objects are refused too', async () => {
      const page = await listingsOf([goods(), 'garbage', goods({ market_hash_name: '' }), goods({ template_id: 0 })]);
      expect(page.rows).toEqual([redlineRow]);
      expect(page.rejected).toHaveLength(3);
    });

    it('for any positive integer fen the price string read back as integer fen equals the input', async () => {
      await fc.assert(
        fc.asyncProperty(fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), async (fen) => {
          const page = await listingsOf([goods({ sell_min_price_fen: fen })]);
          const price = page.rows[0]?.price;
          expect(price).toMatch(/^\d+\.\d{2}$/);
          // Back to fen by string and bigint only: no float anywhere on the way.
          expect(BigInt(price!.replace('.', ''))).toBe(BigInt(fen));
        }),
      );
    });
  });

  describe('BUYORDERS', () => {
    const order = (over: Record<string, unknown> = {}) => ({
      template_id: 100_900,
      market_hash_name: KARAMBIT,
      phase_tag: 'ruby',
      type_id: 3,
      buy_max_price_fen: 1_250_000,
      blue_buy_max_price_fen: 1_287_500,
      buy_num: 4,
      ...over,
    });
    const row = {
      market_hash_name: KARAMBIT,
      phase: 'Ruby',
      tier: null,
      price: '12500.00',
      blue_price: '12875.00',
      count: 4,
      template_id: 100_900,
      type_id: 3,
    };

    async function buyOrdersOf(items: unknown[]) {
      const { ctx, calls } = fakeContext(byCursor('/api/market/buy-orders', { '': envelope(items) }));
      const pages = await fetchAll('BUYORDERS', ctx);
      expect(calls.map((c) => c.path)).toEqual(['/api/market/buy-orders']);
      return pages[0]!;
    }

    it('reads the best bid and the blue (member) bid in fen', async () => {
      expect(await buyOrdersOf([order()])).toEqual({ rows: [row], rejected: [] });
    });

    it('a null blue price is "no blue bid"', async () => {
      const page = await buyOrdersOf([order({ blue_buy_max_price_fen: null, type_id: null })]);
      expect(page.rows).toEqual([{ ...row, blue_price: null, type_id: null }]);
    });

    it('price 0 with buy_num 0 is "no bid"; price 0 with bids is refused', async () => {
      const bad = order({ buy_max_price_fen: 0, blue_buy_max_price_fen: null, buy_num: 2 });
      const page = await buyOrdersOf([order({ buy_max_price_fen: 0, blue_buy_max_price_fen: null, buy_num: 0 }), bad]);
      expect(page.rows).toEqual([{ ...row, price: null, blue_price: null, count: 0 }]);
      expect(page.rejected).toEqual([{ reason: expect.stringContaining('buy_max_price_fen'), raw: bad }]);
    });
  });

  describe('FLOAT_RANGED and FLOAT_BUYORDERS', () => {
    it('gives one row per float range; the fifth price only where there are five listings', async () => {
      const item = {
        template_id: 100_900,
        market_hash_name: KARAMBIT,
        phase_tag: 'P2',
        ranges: [
          {
            min: '0.00',
            max: '0.01',
            first_price_fen: 50_000,
            fifth_price_fen: 52_000,
            sell_num: 6,
            phase_names: { en: 'Phase 2', zh: 'Phase 2（多普勒）' },
          },
          { min: '0.01', max: '0.03', first_price_fen: 45_000, fifth_price_fen: 0, sell_num: 2, phase_names: {} },
        ],
      };
      const { ctx } = fakeContext(byCursor('/api/market/float-ranges', { '': envelope([item]) }));
      const [page] = await fetchAll('FLOAT_RANGED', ctx);
      const common = { market_hash_name: KARAMBIT, phase: 'Phase 2' };
      expect(page).toEqual({
        rows: [
          {
            ...common,
            float_min: '0',
            float_max: '0.01',
            first_price: '500.00',
            fifth_price: '520.00',
            count: 6,
            phase_labels: { en: 'Phase 2', zh: 'Phase 2（多普勒）' },
          },
          {
            ...common,
            float_min: '0.01',
            float_max: '0.03',
            first_price: '450.00',
            fifth_price: null,
            count: 2,
            phase_labels: {},
          },
        ],
        rejected: [],
      });
    });

    it('reads float buy orders; a zero price is refused', async () => {
      const order = {
        template_id: 100_042,
        market_hash_name: REDLINE,
        phase_tag: null,
        order_id: 'fbo-1',
        price_fen: 9_900,
        num: 2,
        float_min: '0.15',
        float_max: '0.1812345678',
        fade: null,
      };
      const bad = { ...order, order_id: 'fbo-2', price_fen: 0 };
      const { ctx } = fakeContext(byCursor('/api/market/float-buy-orders', { '': envelope([order, bad]) }));
      const [page] = await fetchAll('FLOAT_BUYORDERS', ctx);
      expect(page).toEqual({
        rows: [
          {
            market_hash_name: REDLINE,
            phase: '',
            order_id: 'fbo-1',
            price: '99.00',
            quantity: 2,
            float_min: '0.15',
            float_max: '0.1812345678',
            condition: null,
          },
        ],
        rejected: [{ reason: expect.stringContaining('price_fen'), raw: bad }],
      });
    });
  });

  describe('SALES', () => {
    const sale = {
      template_id: 100_042,
      market_hash_name: REDLINE,
      phase_tag: null,
      id: 'cn-a-42-9001',
      price_fen: 8_850,
      sold_at: 1_714_564_800.123,
      // More significant digits than a double holds: must survive untouched.
      float_value: '0.1523456789012345678',
      paint_index: 282,
      paint_seed: 661,
      stickers: [
        { slot: 0, name: 'Sticker | Crown (Foil)', wear: null },
        { slot: 2, name: 'Sticker | Titan (Holo) | Katowice 2014', wear: '0.37' },
      ],
      keychains: [{ slot: 0, name: "Charm | Lil' Ava", pattern: 40_512 }],
    };

    it('reads a sale: seconds → ms, float kept as an exact string, stickers and keychains → charms', async () => {
      const window = { from: 1_714_561_200_000, to: 1_714_564_800_000 };
      const { ctx, calls } = fakeContext(byCursor('/api/market/sales', { '': envelope([sale]) }));
      const [page] = await fetchAll('SALES', ctx, { window });
      expect(page).toEqual({
        rows: [
          {
            sale_id: 'cn-a-42-9001',
            market_hash_name: REDLINE,
            phase: '',
            price: '88.50',
            sold_at: 1_714_564_800_123,
            float_value: '0.1523456789012345678',
            paint_index: 282,
            paint_seed: 661,
            stickers: [
              { slot: 0, name: 'Sticker | Crown (Foil)', wear: null },
              { slot: 2, name: 'Sticker | Titan (Holo) | Katowice 2014', wear: '0.37' },
            ],
            charms: [{ slot: 0, name: "Charm | Lil' Ava", pattern: 40_512 }],
          },
        ],
        rejected: [],
      });
      // The window travels as epoch milliseconds.
      expect(calls[0]?.query).toEqual({ cursor: undefined, limit: 500, since: window.from, until: window.to });
    });

    it('a sale without stickers or keychains has empty lists; one without a float has null', async () => {
      const plain = { ...sale, float_value: null, stickers: null, keychains: undefined, paint_index: null };
      const { ctx } = fakeContext(byCursor('/api/market/sales', { '': envelope([plain]) }));
      const [page] = await fetchAll('SALES', ctx);
      expect(page?.rows[0]).toMatchObject({ float_value: null, paint_index: null, stickers: [], charms: [] });
    });

    it.each([
      ['a zero price', { price_fen: 0 }],
      ['a float above 1', { float_value: '1.0001' }],
      ['a float that is not a decimal', { float_value: '1e-3' }],
      ['no sale time', { sold_at: 0 }],
    ])('refuses a sale with %s', async (_what, over) => {
      const bad = { ...sale, ...over };
      const { ctx } = fakeContext(byCursor('/api/market/sales', { '': envelope([bad]) }));
      const [page] = await fetchAll('SALES', ctx);
      expect(page).toEqual({ rows: [], rejected: [{ reason: expect.any(String), raw: bad }] });
    });
  });
});

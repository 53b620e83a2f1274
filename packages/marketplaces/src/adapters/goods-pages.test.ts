import { PHASES } from '@skinprices/domain';
import { describe, expect, it } from 'vitest';
import type { FetchContext, KindInput } from '../adapter.js';
import type { Kind, Page } from '../rows.js';
import { failure, fakeUpstream, type Query } from '../testing/fake-upstream.js';
import { GENERAL_ORDER_TAG_ID, goodsPagesAdapter, PHASE_BY_TAG_ID } from './goods-pages.js';

// ---- a fake CN-B upstream: canned bodies keyed by path and page_num, no network ----

const fakeContext = (answer: (path: string, query: Query) => unknown) => fakeUpstream('cn-b', answer);

/** Answers `path` with `bodies[page_num]`. */
function byPage(path: string, bodies: Record<number, unknown>) {
  return (p: string, q: Query): unknown => {
    const n = Number(q.page_num);
    if (p !== path || !(n in bodies)) throw new Error(`unexpected request ${p} page_num=${String(q.page_num)}`);
    return bodies[n];
  };
}

const envelope = (items: unknown[], total_page = 1) => ({
  code: 'OK',
  data: { page_num: 1, page_size: 500, total_count: items.length, total_page, items },
});

async function fetchAll<K extends Kind>(kind: K, ctx: FetchContext, input: KindInput = {}): Promise<Page<K>[]> {
  const pages: Page<K>[] = [];
  for await (const page of goodsPagesAdapter.pages(kind, ctx, input)) pages.push(page);
  return pages;
}

async function onePage<K extends Kind>(kind: K, path: string, items: unknown[], input: KindInput = {}) {
  const { ctx } = fakeContext(byPage(path, { 1: envelope(items) }));
  const pages = await fetchAll(kind, ctx, input);
  expect(pages).toHaveLength(1);
  return pages[0]!;
}

const REDLINE = 'AK-47 | Redline (Field-Tested)';
const KARAMBIT = '★ Karambit | Doppler (Factory New)';

const wearTag = (internal: string) => ({
  info: { tags: { exterior: { internal_name: internal, localized_name: '久经沙场' } } },
});

/** One CN-B goods item as the upstream sends it. */
const goods = (over: Record<string, unknown> = {}) => ({
  id: 700_042,
  market_hash_name: REDLINE,
  tag_id: null,
  sell_min_price: '12.5',
  sell_num: 7,
  goods_info: wearTag('wearcategory2'),
  ...over,
});

const redlineRow = {
  market_hash_name: REDLINE,
  phase: '',
  price: '12.50',
  count: 7,
  exterior: 'Field-Tested',
  stattrak: false,
  souvenir: false,
  template_id: 700_042,
  item_page_url: null,
};

const listings = (items: unknown[]) => onePage('LISTINGS', '/market/goods', items);

describe('goods-pages adapter (CN-B / CN-C)', () => {
  describe('paging', () => {
    it('asks page_num 1..total_page, 500 a page', async () => {
      const { ctx, calls } = fakeContext(
        byPage('/market/goods', {
          1: envelope([goods({ id: 1 })], 3),
          2: envelope([goods({ id: 2 })], 3),
          3: envelope([goods({ id: 3 })], 3),
        }),
      );
      const pages = await fetchAll('LISTINGS', ctx);
      expect(pages.map((p) => p.rows.map((r) => r.template_id))).toEqual([[1], [2], [3]]);
      expect(calls.map((c) => c.query)).toEqual([1, 2, 3].map((n) => ({ page_num: n, page_size: 500 })));
    });

    it('follows a page count that grows while it pages', async () => {
      const { ctx } = fakeContext(
        byPage('/market/goods', {
          1: envelope([goods({ id: 1 })], 2),
          2: envelope([goods({ id: 2 })], 3),
          3: envelope([goods({ id: 3 })], 3),
        }),
      );
      expect((await fetchAll('LISTINGS', ctx)).flatMap((p) => p.rows.map((r) => r.template_id))).toEqual([1, 2, 3]);
    });

    it('an empty list (total_page 0) is one empty page, not an error', async () => {
      const { ctx } = fakeContext(byPage('/market/goods', { 1: envelope([], 0) }));
      expect(await fetchAll('LISTINGS', ctx)).toEqual([{ rows: [], rejected: [] }]);
    });

    it('an empty page before the last is upstream_malformed (retryable)', async () => {
      const { ctx } = fakeContext(byPage('/market/goods', { 1: envelope([goods()], 3), 2: envelope([], 3) }));
      const err = await failure(fetchAll('LISTINGS', ctx));
      expect(err.code).toBe('upstream_malformed');
      expect(err.retryable).toBe(true);
    });

    it.each([[{ code: 'Internal Error', msg: 'busy' }], [{ code: 0, data: envelope([]).data }]])(
      "a code other than 'OK' is upstream_malformed: %j",
      async (body) => {
        const { ctx } = fakeContext(byPage('/market/goods', { 1: body }));
        expect((await failure(fetchAll('LISTINGS', ctx))).code).toBe('upstream_malformed');
      },
    );

    it('refuses a kind CN-B does not serve', async () => {
      const { ctx } = fakeContext(() => envelope([]));
      expect((await failure(fetchAll('HISTORY', ctx))).code).toBe('kind_unsupported');
    });
  });

  describe('LISTINGS', () => {
    it('reads a decimal price, the wear tag nested in goods_info and the goods id', async () => {
      expect(await listings([goods()])).toEqual({ rows: [redlineRow], rejected: [] });
    });

    it.each([
      ['12.5', '12.50'],
      ['3', '3.00'],
      ['0.01', '0.01'],
      ['1234.56', '1234.56'],
      ['99.9', '99.90'],
    ])('a price without trailing zeros %j is fixed to two places: %j', async (raw, price) => {
      expect((await listings([goods({ sell_min_price: raw })])).rows[0]?.price).toBe(price);
    });

    it('tag_id 1005 is Ruby', async () => {
      const page = await listings([
        goods({ market_hash_name: KARAMBIT, tag_id: 1005, goods_info: wearTag('wearcategory0') }),
      ]);
      expect(page).toEqual({
        rows: [{ ...redlineRow, market_hash_name: KARAMBIT, phase: 'Ruby', exterior: 'Factory New' }],
        rejected: [],
      });
    });

    it('the tag-id table names each of the eight phases once, 1001..1008', () => {
      expect([...PHASE_BY_TAG_ID.keys()]).toEqual([1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008]);
      expect([...PHASE_BY_TAG_ID.values()]).toEqual([...PHASES]);
    });

    it.each([1009, 1000, 0, 2001])('an unknown tag_id %d is refused, never read as "no phase"', async (tag) => {
      const bad = goods({ market_hash_name: KARAMBIT, tag_id: tag, goods_info: wearTag('wearcategory0') });
      const page = await listings([bad, goods()]);
      expect(page.rows).toEqual([redlineRow]);
      expect(page.rejected).toEqual([{ reason: `unknown phase tag id ${tag}`, raw: bad }]);
    });

    it('an item with sell_num > 0 and no sell_min_price is refused', async () => {
      const nul = goods({ sell_min_price: null });
      const absent = goods() as Record<string, unknown>;
      delete absent.sell_min_price;
      const page = await listings([nul, absent]);
      expect(page.rows).toEqual([]);
      expect(page.rejected).toEqual([
        { reason: 'sell_min_price missing for an item with listings', raw: nul },
        { reason: 'sell_min_price missing for an item with listings', raw: absent },
      ]);
    });

    it('no sell_min_price with sell_num 0 is "no listing": price null', async () => {
      expect((await listings([goods({ sell_min_price: null, sell_num: 0 })])).rows).toEqual([
        { ...redlineRow, price: null, count: 0 },
      ]);
    });

    it.each(['0', '0.00', '-1', '12,5', 12.5])('refuses the price %j', async (raw) => {
      const bad = goods({ sell_min_price: raw });
      expect(await listings([bad])).toEqual({ rows: [], rejected: [{ reason: expect.any(String), raw: bad }] });
    });

    it('a wear tag contradicting the name is refused', async () => {
      const bad = goods({ goods_info: wearTag('wearcategory4') });
      expect(await listings([bad])).toEqual({
        rows: [],
        rejected: [{ reason: expect.stringContaining('contradicts the name'), raw: bad }],
      });
    });

    it('an item without a wear tag takes the exterior from its name, or none', async () => {
      const page = await listings([
        goods({ goods_info: { info: { tags: {} } } }),
        goods({ market_hash_name: 'Sticker | Crown (Foil)', goods_info: { info: { tags: {} } } }),
      ]);
      expect(page.rows.map((r) => r.exterior)).toEqual(['Field-Tested', null]);
    });
  });

  describe('BUYORDERS', () => {
    const order = (over: Record<string, unknown> = {}) => ({
      goods_id: 700_042,
      market_hash_name: 'AK-47 | Case Hardened (Field-Tested) (T1)',
      tag_id: null,
      tier_tag_id: 2001,
      buy_max_price: '1520.5',
      buy_num: 2,
      ...over,
    });

    it('a tier suffix " (T1)" leaves the name and becomes the tier', async () => {
      const page = await onePage('BUYORDERS', '/market/buy_order/top', [order()]);
      expect(page).toEqual({
        rows: [
          {
            market_hash_name: 'AK-47 | Case Hardened (Field-Tested)',
            phase: '',
            tier: 'T1',
            price: '1520.50',
            blue_price: null,
            count: 2,
            template_id: 700_042,
            type_id: 2001,
          },
        ],
        rejected: [],
      });
    });

    it('an order without a tier suffix keeps its name and has tier null; a phase comes from tag_id', async () => {
      const page = await onePage('BUYORDERS', '/market/buy_order/top', [
        order({ market_hash_name: KARAMBIT, tag_id: 1007, tier_tag_id: null, buy_max_price: '9000' }),
      ]);
      expect(page.rows).toEqual([
        {
          market_hash_name: KARAMBIT,
          phase: 'Black Pearl',
          tier: null,
          price: '9000.00',
          blue_price: null,
          count: 2,
          template_id: 700_042,
          type_id: 1007,
        },
      ]);
    });

    // Root cause: type_id was read only from the phase or tier tag, so a general order (no
    // condition, most rows) had typeId null although the spec's 2.5 declares an integer.
    it('typeId is an integer on every row: the tier tag, else the phase tag, else 0 for a general order', async () => {
      const page = await onePage('BUYORDERS', '/market/buy_order/top', [
        order(),
        order({ market_hash_name: KARAMBIT, tag_id: 1005, tier_tag_id: null }),
        order({ market_hash_name: REDLINE, tag_id: null, tier_tag_id: null }),
        order({ market_hash_name: 'Sticker | Crown (Foil)', tier_tag_id: undefined }),
      ]);
      expect(page.rejected).toEqual([]);
      expect(page.rows.map((r) => [r.phase, r.tier, r.type_id])).toEqual([
        ['', 'T1', 2001],
        ['Ruby', null, 1005],
        ['', null, GENERAL_ORDER_TAG_ID],
        ['', null, GENERAL_ORDER_TAG_ID],
      ]);
      expect(GENERAL_ORDER_TAG_ID).toBe(0);
      expect([...PHASE_BY_TAG_ID.keys()]).not.toContain(GENERAL_ORDER_TAG_ID);
    });

    it('a bracketed word that is not a tier stays in the name', async () => {
      const name = 'Sticker | Crown (Foil)';
      const page = await onePage('BUYORDERS', '/market/buy_order/top', [
        order({ market_hash_name: name, tier_tag_id: null }),
      ]);
      expect(page.rows[0]).toMatchObject({ market_hash_name: name, tier: null });
    });
  });

  describe('SALES', () => {
    it('reads a bill order: seconds → ms, the asset float exact, stickers and keychains → charms', async () => {
      const bill = {
        goods_id: 700_042,
        market_hash_name: REDLINE,
        tag_id: null,
        id: 'cn-b-42-77',
        price: '88.5',
        transact_time: 1_714_564_800.5,
        asset_info: {
          paintwear: '0.1523456789012345678',
          info: {
            paintindex: 282,
            paintseed: 661,
            stickers: [{ slot: 1, name: 'Sticker | Crown (Foil)', wear: '0.5' }],
            keychains: [{ slot: 0, name: "Charm | Lil' Ava", pattern: null }],
          },
        },
      };
      const window = { from: 1_714_561_200_999, to: 1_714_564_800_000 };
      const { ctx, calls } = fakeContext(byPage('/market/bill_orders', { 1: envelope([bill]) }));
      const [page] = await fetchAll('SALES', ctx, { window });
      expect(page).toEqual({
        rows: [
          {
            sale_id: 'cn-b-42-77',
            market_hash_name: REDLINE,
            phase: '',
            price: '88.50',
            sold_at: 1_714_564_800_500,
            float_value: '0.1523456789012345678',
            paint_index: 282,
            paint_seed: 661,
            stickers: [{ slot: 1, name: 'Sticker | Crown (Foil)', wear: '0.5' }],
            charms: [{ slot: 0, name: "Charm | Lil' Ava", pattern: null }],
          },
        ],
        rejected: [],
      });
      // CN-B takes its window in whole epoch seconds.
      expect(calls[0]?.query).toEqual({
        page_num: 1,
        page_size: 500,
        start_time: 1_714_561_200,
        end_time: 1_714_564_800,
      });
    });
  });
});

import { AppError } from '@skinprices/domain';
import { describe, expect, it } from 'vitest';
import type { FetchContext } from '../adapter.js';
import type { Kind, Page } from '../rows.js';
import { fetchAll as fetchPages, fakeUpstream } from '../testing/fake-upstream.js';
import { priceMapAdapter } from './price-map.js';

// ---- a fake EU-A upstream: one canned document, no network ----

const fakeContext = (doc: unknown) =>
  fakeUpstream('eu-a', (path) => {
    if (path !== '/api/v1/prices') throw new Error(`unexpected path ${path}`);
    return doc;
  });

const fetchAll = <K extends Kind>(kind: K, ctx: FetchContext): Promise<Page<K>[]> =>
  fetchPages(priceMapAdapter, kind, ctx, {});

async function pageOf(doc: unknown) {
  const { ctx, calls } = fakeContext(doc);
  const pages = await fetchAll('LISTINGS', ctx);
  expect(calls).toEqual([{ path: '/api/v1/prices', query: {} }]);
  expect(pages).toHaveLength(1);
  return pages[0]!;
}

const KARAMBIT = '★ Karambit | Doppler (Factory New)';
const REDLINE = 'AK-47 | Redline (Field-Tested)';

const row = (market_hash_name: string, over: Record<string, unknown>) => ({
  market_hash_name,
  phase: '',
  price: null,
  count: 0,
  exterior: null,
  stattrak: false,
  souvenir: false,
  template_id: null,
  item_page_url: null,
  ...over,
});

describe('price-map adapter (EU-A)', () => {
  it('reads every phase variant listed under one name as its own item', async () => {
    const page = await pageOf({
      [KARAMBIT]: [
        { phase: 'phase2', min_price: '1520.00', qty: 3, exterior: 'FACTORY NEW' },
        { phase: 'ruby', min_price: '8900.5', qty: 1, exterior: 'FACTORY NEW' },
        { phase: 'blackpearl', min_price: '6100.00', qty: 2, exterior: 'FACTORY NEW' },
      ],
    });
    const knife = { exterior: 'Factory New' };
    expect(page).toEqual({
      rows: [
        row(KARAMBIT, { ...knife, phase: 'Phase 2', price: '1520.00', count: 3 }),
        row(KARAMBIT, { ...knife, phase: 'Ruby', price: '8900.50', count: 1 }),
        row(KARAMBIT, { ...knife, phase: 'Black Pearl', price: '6100.00', count: 2 }),
      ],
      rejected: [],
    });
  });

  it("reads the upper-case exterior 'FIELD-TESTED' as Field-Tested; null for an item without wear", async () => {
    const page = await pageOf({
      [REDLINE]: [{ phase: null, min_price: '12.34', qty: 5, exterior: 'FIELD-TESTED' }],
      'Sticker | Crown (Foil)': [{ phase: null, min_price: '310.00', qty: 1, exterior: null }],
    });
    expect(page.rows).toEqual([
      row(REDLINE, { exterior: 'Field-Tested', price: '12.34', count: 5 }),
      row('Sticker | Crown (Foil)', { price: '310.00', count: 1 }),
    ]);
  });

  it('min_price null with qty 0 is "no listing": price null', async () => {
    const page = await pageOf({ [REDLINE]: [{ phase: null, min_price: null, qty: 0, exterior: 'FIELD-TESTED' }] });
    expect(page).toEqual({ rows: [row(REDLINE, { exterior: 'Field-Tested' })], rejected: [] });
  });

  it("min_price '0.00' is refused, whatever the qty", async () => {
    const zero = { phase: null, min_price: '0.00', qty: 4, exterior: 'FIELD-TESTED' };
    const zeroNone = { ...zero, qty: 0 };
    const page = await pageOf({ [REDLINE]: [zero, zeroNone] });
    expect(page.rows).toEqual([]);
    expect(page.rejected).toEqual([
      { reason: expect.stringContaining('min_price: price must be > 0'), raw: [REDLINE, zero] },
      { reason: expect.stringContaining('min_price: price must be > 0'), raw: [REDLINE, zeroNone] },
    ]);
  });

  it('min_price null with qty > 0 is refused', async () => {
    const bad = { phase: null, min_price: null, qty: 2, exterior: 'FIELD-TESTED' };
    const page = await pageOf({ [REDLINE]: [bad] });
    expect(page).toEqual({
      rows: [],
      rejected: [{ reason: expect.stringContaining('min_price missing although the count is 2'), raw: [REDLINE, bad] }],
    });
  });

  it('an unknown phase or a wear contradicting the name is refused; the other variants stay', async () => {
    const unknownPhase = { phase: 'phase9', min_price: '1500.00', qty: 1, exterior: 'FACTORY NEW' };
    const wrongWear = { phase: 'ruby', min_price: '9000.00', qty: 1, exterior: 'WELL-WORN' };
    const good = { phase: 'emerald', min_price: '15000.00', qty: 1, exterior: 'FACTORY NEW' };
    const page = await pageOf({ [KARAMBIT]: [unknownPhase, wrongWear, good] });
    expect(page.rows).toEqual([
      row(KARAMBIT, { exterior: 'Factory New', phase: 'Emerald', price: '15000.00', count: 1 }),
    ]);
    expect(page.rejected).toEqual([
      { reason: "unknown phase 'phase9'", raw: [KARAMBIT, unknownPhase] },
      { reason: expect.stringContaining('contradicts the name'), raw: [KARAMBIT, wrongWear] },
    ]);
  });

  it('a name whose value is not a list of variants is refused, not the whole document', async () => {
    const page = await pageOf({
      [REDLINE]: 'n/a',
      'Sticker | Crown (Foil)': [{ phase: null, min_price: '310.00', qty: 1, exterior: null }],
    });
    expect(page.rows.map((r) => r.market_hash_name)).toEqual(['Sticker | Crown (Foil)']);
    expect(page.rejected).toEqual([{ reason: expect.any(String), raw: [REDLINE, 'n/a'] }]);
  });

  it('refuses every kind but LISTINGS', async () => {
    const { ctx } = fakeContext({});
    await expect(fetchAll('SALES', ctx)).rejects.toMatchObject({ code: 'kind_unsupported' });
    await expect(fetchAll('SALES', ctx)).rejects.toBeInstanceOf(AppError);
  });
});

import { getMarket } from '@skinprices/domain';
import fc from 'fast-check';
import type { FloatRangedRow, ListingRow } from '@skinprices/marketplaces';
import { describe, expect, it } from 'vitest';
import { historyRecords, removalOf, sameRow, toEvent } from './events.js';

const row = (over: Partial<ListingRow> = {}): ListingRow => ({
  market_hash_name: 'AK-47 | Redline (Field-Tested)',
  phase: '',
  price: '12.50',
  count: 3,
  exterior: 'Field-Tested',
  stattrak: false,
  souvenir: false,
  template_id: null,
  item_page_url: null,
  ...over,
});

describe('toEvent: item_page_url on listing events', () => {
  // Root cause: no upstream sends a page link, and every adapter left item_page_url null, so
  // 100 % of the spec's 2.4 rows had none. The registry's template now fills it here.
  it('fills the marketplace template when the upstream gives no link (id-based and name-based)', () => {
    const cnB = toEvent('LISTINGS', getMarket('cn-b'), row({ template_id: 700_042 }), 1, 'c1');
    expect(cnB).toMatchObject({ item_page_url: 'https://cn-b.example/goods/700042', cycle_id: 'c1', market: 'cn-b' });
    const euA = toEvent('LISTINGS', getMarket('eu-a'), row(), 1, 'c1');
    expect(euA).toMatchObject({ item_page_url: 'https://eu-a.example/item/AK-47%20%7C%20Redline%20(Field-Tested)' });
  });

  it("keeps an upstream's own link", () => {
    const url = 'https://cn-b.example/goods/700042?from=market';
    expect(toEvent('LISTINGS', getMarket('cn-b'), row({ item_page_url: url, template_id: 1 }), 1, 'c1')).toMatchObject({
      item_page_url: url,
    });
  });

  it('a removal (price null) carries the link too, so the row never loses it', () => {
    const gone = toEvent('LISTINGS', getMarket('eu-b'), removalOf('LISTINGS', row()), 1, 'c2');
    expect(gone).toMatchObject({
      price: null,
      count: 0,
      item_page_url: expect.stringMatching(/^https:\/\/eu-b\.example\//),
    });
  });

  it('a removal of a kind whose rows are deleted repeats the last state with removed: true', () => {
    const bucket: FloatRangedRow = {
      market_hash_name: 'AK-47 | Redline (Field-Tested)',
      phase: '',
      float_min: '0.15',
      float_max: '0.18',
      first_price: '13.00',
      fifth_price: null,
      count: 2,
      phase_labels: {},
    };
    const gone = toEvent('FLOAT_RANGED', getMarket('cn-a'), removalOf('FLOAT_RANGED', bucket), 1, 'c3');
    expect(gone).toMatchObject({ ...bucket, removed: true, cycle_id: 'c3' });
    expect(bucket).not.toHaveProperty('removed');
    expect(() => removalOf('SALES', { sale_id: 's' } as never)).toThrow(/not a delta kind/);
  });

  it('stays null when the template needs an id the row lacks', () => {
    expect(toEvent('LISTINGS', getMarket('cn-c'), row(), 1, 'c1')).toMatchObject({ item_page_url: null });
  });
});

describe('sameRow: what JSON.stringify of each compared, without the strings', () => {
  const json = fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      fc.string(),
      fc.integer(),
      fc.boolean(),
      fc.constant(null),
      fc.array(tie('value'), { maxLength: 3 }),
      fc.dictionary(fc.constantFrom('a', 'b', 'price', 'count'), tie('value'), { maxKeys: 4 }),
    ),
  })).value;

  // JSON.stringify with keys sorted: the rows of one adapter share one key order, and sameRow
  // does not depend on it.
  const canonical = (v: unknown): string =>
    JSON.stringify(v, (_k, x: unknown) =>
      x !== null && typeof x === 'object' && !Array.isArray(x)
        ? Object.fromEntries(Object.entries(x).sort(([p], [q]) => (p < q ? -1 : 1)))
        : x,
    );

  it('agrees with comparing JSON.stringify of each (property)', () => {
    fc.assert(
      fc.property(json, json, (a, b) => {
        expect(sameRow(a, b)).toBe(canonical(a) === canonical(b));
        expect(sameRow(a, structuredClone(a))).toBe(true);
      }),
    );
  });

  it('tells rows apart by any field, nested ones included, and treats undefined as absent', () => {
    expect(sameRow(row(), row())).toBe(true);
    expect(sameRow(row(), row({ price: '12.51' }))).toBe(false);
    expect(sameRow(row(), row({ template_id: 0 }))).toBe(false);
    expect(sameRow({ asks: [{ price: '1.00', count: 1 }] }, { asks: [{ price: '1.00', count: 2 }] })).toBe(false);
    expect(sameRow({ asks: [] }, { asks: {} })).toBe(false);
    expect(sameRow({ a: 1, b: undefined }, { a: 1 })).toBe(true);
    expect(sameRow({ a: 1 }, { a: 1, b: null })).toBe(false);
    expect(sameRow({ a: 1, b: 2 }, { b: 2, a: 1 })).toBe(true);
  });
});

describe('historyRecords: a history row as history.v1 and history-hours.v1 records', () => {
  const hour = { hour: 20_000 * 86_400_000, open: '3.10', high: '3.25', low: '3.05', close: '3.20', count: 4 };
  const base = { market_hash_name: 'Glove Case', phase: '' as const, day: 20_000, count: 7 };

  it('a close with hours: the close without them, and the hours apart', () => {
    const { point, hours } = historyRecords(getMarket('hist-a'), { ...base, price: '3.20', hours: [hour] }, 5);
    expect(point).toEqual({ market: 'hist-a', currency: 'USD', ...base, price: '3.20', observed_at: 5 });
    expect(point).not.toHaveProperty('hours');
    expect(hours).toEqual({
      market: 'hist-a',
      currency: 'USD',
      market_hash_name: 'Glove Case',
      phase: '',
      day: 20_000,
      hours: [hour],
      observed_at: 5,
    });
  });

  it('hours without a close make no history.v1 record; a close without hours no hours record', () => {
    expect(historyRecords(getMarket('hist-a'), { ...base, price: null, hours: [hour] }, 5).point).toBeUndefined();
    expect(historyRecords(getMarket('hist-a'), { ...base, price: '3.20', hours: null }, 5).hours).toBeUndefined();
    expect(historyRecords(getMarket('hist-a'), { ...base, price: '3.20', hours: [] }, 5).hours).toBeUndefined();
  });
});

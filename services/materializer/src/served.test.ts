import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { attrsHash, classify, priceCents, rowOf, type ServedRow } from './served.js';

const T = Date.UTC(2026, 10, 20, 12);
const row = (o: Partial<ServedRow> = {}): ServedRow => ({ observedAt: T, price: 1234, count: 3, attrs: 7, ...o });

describe('priceCents', () => {
  it('reads a price as PostgreSQL stores it (numeric(20, 2)) and as pollers write it alike', () => {
    expect(priceCents('12.34')).toBe(1234);
    expect(priceCents('12.3')).toBe(1230);
    expect(priceCents('12.30')).toBe(1230);
    expect(priceCents('12')).toBe(1200);
    expect(priceCents('12.3400')).toBe(1234);
    expect(priceCents('0.01')).toBe(1);
    expect(priceCents(null)).toBe(-1);
  });

  it('is not comparable (NaN) where cents would not be exact', () => {
    for (const p of ['12.345', '1e3', '-1', '', 'abc', '12345678901234.00']) expect(priceCents(p), p).toBeNaN();
  });

  it('equals for any two spellings of the same two-decimal value', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 1n, max: 10n ** 12n }), fc.nat(3), (cents, zeros) => {
        const whole = (cents / 100n).toString();
        const frac = (cents % 100n).toString().padStart(2, '0');
        expect(priceCents(`${whole}.${frac}${'0'.repeat(zeros)}`)).toBe(Number(cents));
      }),
    );
  });
});

describe('classify', () => {
  it('writes every record of a cycle that does not send its removals', () => {
    expect(classify(row(), row({ observedAt: T + 1 }), false)).toBe('write');
  });

  it('drops an equal newer record in the quarter hour of the row, keeps only the candle after it', () => {
    expect(classify(row(), row({ observedAt: T + 14 * 60_000 }), true)).toBe('skip');
    expect(classify(row(), row({ observedAt: T + 15 * 60_000 }), true)).toBe('candle');
    expect(classify(row(), row({ observedAt: T + 86_400_000 }), true)).toBe('candle');
  });

  it('writes a change of any served value, a new key, and a record not newer than the row', () => {
    const later = T + 60_000;
    expect(classify(row(), row({ observedAt: later, price: 1235 }), true)).toBe('write');
    expect(classify(row(), row({ observedAt: later, price: -1 }), true)).toBe('write');
    expect(classify(row(), row({ observedAt: later, count: 4 }), true)).toBe('write');
    expect(classify(row(), row({ observedAt: later, attrs: 8 }), true)).toBe('write');
    expect(classify(null, row({ observedAt: later }), true)).toBe('write');
    expect(classify(row(), row(), true)).toBe('write');
    expect(classify(row(), row({ observedAt: T - 1 }), true)).toBe('write');
    expect(classify(row({ price: Number.NaN }), row({ observedAt: later, price: Number.NaN }), true)).toBe('write');
  });

  it('never drops a record whose price, count or attributes differ (property)', () => {
    fc.assert(
      fc.property(
        fc.record({ price: fc.integer({ min: -1, max: 1e6 }), count: fc.nat(50), attrs: fc.nat(3) }),
        fc.record({ price: fc.integer({ min: -1, max: 1e6 }), count: fc.nat(50), attrs: fc.nat(3) }),
        fc.integer({ min: 1, max: 2 * 86_400_000 }),
        (a, b, dt) => {
          const c = classify({ observedAt: T, ...a }, { observedAt: T + dt, ...b }, true);
          const same = a.price === b.price && a.count === b.count && a.attrs === b.attrs;
          expect(c === 'write').toBe(!same);
        },
      ),
    );
  });
});

describe('attrsHash', () => {
  it('is the same from an event and from a stored row, and moves with any attribute', () => {
    const e = {
      market: 'cn-a',
      market_hash_name: 'AK-47 | Redline (Field-Tested)',
      phase: '',
      currency: 'CNY',
      price: '12.30',
      count: 3,
      exterior: 'Field-Tested',
      stattrak: false,
      souvenir: false,
      template_id: 42,
      item_page_url: 'https://example.test/42',
      observed_at: T,
      cycle_id: 'c',
    };
    const stored = { ...e, template_id: '42' };
    expect(rowOf(e).attrs).toBe(attrsHash(stored));
    for (const changed of [
      { currency: 'EUR' },
      { exterior: null },
      { stattrak: true },
      { souvenir: true },
      { template_id: 43 },
      { template_id: null },
      { item_page_url: null },
      { item_page_url: 'https://example.test/43' },
    ])
      expect(attrsHash({ ...e, ...changed }), JSON.stringify(changed)).not.toBe(rowOf(e).attrs);
  });
});

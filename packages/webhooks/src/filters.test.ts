import { MARKET_SLUGS } from '@skinprices/domain';
import type { PriceChangeEvent } from '@skinprices/events';
import { Decimal } from 'decimal.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { filtersSchema, matches, type Filters } from './filters.js';

const [M1, M2] = MARKET_SLUGS;

function change(old_price: string | null, new_price: string | null, extra: Partial<PriceChangeEvent> = {}) {
  return {
    market: M1,
    market_hash_name: 'AK-47 | Redline (Field-Tested)',
    phase: '',
    currency: 'USD',
    old_price,
    new_price,
    old_count: 1,
    new_count: 2,
    observed_at: 1_700_000_000_000,
    changed_at: 1_700_000_000_500,
    ...extra,
  } satisfies PriceChangeEvent;
}

describe('filtersSchema', () => {
  const issues = (value: unknown) => {
    const r = filtersSchema.safeParse(value);
    return r.success ? [] : r.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
  };

  it('accepts every field', () => {
    const filters: Filters = {
      markets: [M1, M2],
      items: [
        { market_hash_name: 'Karambit | Doppler (Factory New)', phase: 'Ruby' },
        { market_hash_name: 'X', phase: '' },
      ],
      min_change_pct: '2.5',
      crosses: { price: '100.00', direction: 'down' },
      include_count_changes: true,
    };
    expect(filtersSchema.parse(filters)).toEqual(filters);
    expect(filtersSchema.parse({})).toEqual({});
  });

  it.each([
    [{ colour: 'red' }, ''],
    [{ markets: 'usd-1' }, 'markets'],
    [{ markets: [] }, 'markets'],
    [{ markets: ['nowhere'] }, 'markets.0'],
    [{ items: [{ name: 'x' }] }, 'items.0'],
    [{ items: [{ market_hash_name: '' }] }, 'items.0.market_hash_name'],
    [{ items: [{ market_hash_name: 'x', phase: 3 }] }, 'items.0.phase'],
    [{ items: Array.from({ length: 1001 }, (_, i) => ({ market_hash_name: `i${i}` })) }, 'items'],
    [{ min_change_pct: 5 }, 'min_change_pct'],
    [{ min_change_pct: '0' }, 'min_change_pct'],
    [{ min_change_pct: '0.00' }, 'min_change_pct'],
    [{ min_change_pct: '-1' }, 'min_change_pct'],
    [{ min_change_pct: '1e3' }, 'min_change_pct'],
    [{ min_change_pct: ' 5' }, 'min_change_pct'],
    [{ min_change_pct: '5.' }, 'min_change_pct'],
    [{ min_change_pct: '.5' }, 'min_change_pct'],
    [{ min_change_pct: 'NaN' }, 'min_change_pct'],
    [{ crosses: { price: '10' } }, 'crosses.direction'],
    [{ crosses: { price: '0', direction: 'up' } }, 'crosses.price'],
    [{ crosses: { price: '10', direction: 'sideways' } }, 'crosses.direction'],
    [{ crosses: { price: '10', direction: 'up', extra: 1 } }, 'crosses'],
    [{ include_count_changes: 'yes' }, 'include_count_changes'],
  ])('refuses %j, naming %j', (value, path) => {
    const found = issues(value);
    expect(found.length).toBeGreaterThan(0);
    expect(found.map((i) => i.path)).toContain(path);
  });

  it('says what was wrong in words', () => {
    expect(issues({ markets: ['nowhere'] })[0]?.message).toBe('unknown market "nowhere"');
    expect(issues({ min_change_pct: '0' })[0]?.message).toMatch(/greater than 0/);
    expect(issues({ colour: 'red' })[0]?.message).toMatch(/colour/);
  });
});

describe('matches: table', () => {
  it.each<[string, Filters, PriceChangeEvent, boolean]>([
    ['no filters: a price move', {}, change('10.00', '11.00'), true],
    ['no filters: a price appearing', {}, change(null, '11.00'), true],
    ['no filters: a price vanishing', {}, change('10.00', null), true],
    ['no filters: count only', {}, change('10.00', '10.00'), false],
    ['"10.00" and "10" are the same price', {}, change('10.00', '10'), false],
    ['no price before or after is no price change', {}, change(null, null), false],
    ['count only, asked for', { include_count_changes: true }, change('10.00', '10'), true],
    [
      'count only, asked for, but a price condition',
      { include_count_changes: true, min_change_pct: '1' },
      change('10', '10'),
      false,
    ],
    [
      'count only, asked for, but crosses',
      { include_count_changes: true, crosses: { price: '10', direction: 'any' } },
      change('10', '10.0'),
      false,
    ],
    ['markets: listed', { markets: [M2, M1] }, change('1', '2'), true],
    ['markets: not listed', { markets: [M2] }, change('1', '2'), false],
    [
      'items: any phase',
      { items: [{ market_hash_name: 'K' }] },
      change('1', '2', { market_hash_name: 'K', phase: 'Ruby' }),
      true,
    ],
    [
      'items: that phase',
      { items: [{ market_hash_name: 'K', phase: 'Ruby' }] },
      change('1', '2', { market_hash_name: 'K', phase: 'Ruby' }),
      true,
    ],
    [
      'items: another phase',
      { items: [{ market_hash_name: 'K', phase: 'Ruby' }] },
      change('1', '2', { market_hash_name: 'K', phase: 'Phase 1' }),
      false,
    ],
    [
      'items: "" is no phase',
      { items: [{ market_hash_name: 'K', phase: '' }] },
      change('1', '2', { market_hash_name: 'K', phase: 'Ruby' }),
      false,
    ],
    [
      'items: "" matches no phase',
      { items: [{ market_hash_name: 'K', phase: '' }] },
      change('1', '2', { market_hash_name: 'K' }),
      true,
    ],
    ['items: another item', { items: [{ market_hash_name: 'K' }] }, change('1', '2', { market_hash_name: 'L' }), false],
    ['min_change_pct: exactly 5 %', { min_change_pct: '5' }, change('100.00', '105.00'), true],
    ['min_change_pct: just under 5 %', { min_change_pct: '5' }, change('100.00', '104.99'), false],
    ['min_change_pct: down counts too', { min_change_pct: '5' }, change('100', '95'), true],
    [
      'min_change_pct: 0.1 → 0.3 is exactly 200 % (a float says 199.99…)',
      { min_change_pct: '200' },
      change('0.1', '0.3'),
      true,
    ],
    ['min_change_pct: 0.3 → 0.1 is 66.66… %', { min_change_pct: '66.67' }, change('0.3', '0.1'), false],
    ['min_change_pct: appearing is 100 %', { min_change_pct: '100' }, change(null, '5'), true],
    ['min_change_pct: vanishing is 100 %', { min_change_pct: '100' }, change('5', null), true],
    ['min_change_pct: appearing is not 150 %', { min_change_pct: '150' }, change(null, '5'), false],
    [
      'crosses down: from above to equal',
      { crosses: { price: '10', direction: 'down' } },
      change('10.01', '10.00'),
      true,
    ],
    [
      'crosses down: from equal is no crossing',
      { crosses: { price: '10.00', direction: 'down' } },
      change('10', '9'),
      false,
    ],
    ['crosses down: appearing below', { crosses: { price: '10', direction: 'down' } }, change(null, '9.99'), true],
    ['crosses down: vanishing', { crosses: { price: '10', direction: 'down' } }, change('11', null), false],
    ['crosses down: rising', { crosses: { price: '10', direction: 'down' } }, change('9', '11'), false],
    ['crosses up: from below to equal', { crosses: { price: '0.3', direction: 'up' } }, change('0.1', '0.30'), true],
    [
      'crosses up: from equal is no crossing',
      { crosses: { price: '10', direction: 'up' } },
      change('10.00', '11'),
      false,
    ],
    ['crosses up: appearing above', { crosses: { price: '10', direction: 'up' } }, change(null, '10'), true],
    ['crosses up: falling', { crosses: { price: '10', direction: 'up' } }, change('11', '9'), false],
    ['crosses any: up', { crosses: { price: '10', direction: 'any' } }, change('9', '11'), true],
    ['crosses any: down', { crosses: { price: '10', direction: 'any' } }, change('11', '9'), true],
    ['crosses any: staying above', { crosses: { price: '10', direction: 'any' } }, change('11', '12'), false],
    [
      'all conditions hold',
      { markets: [M1], min_change_pct: '10', crosses: { price: '10', direction: 'down' } },
      change('12', '9'),
      true,
    ],
    [
      'one condition fails',
      { markets: [M1], min_change_pct: '30', crosses: { price: '10', direction: 'down' } },
      change('12', '9'),
      false,
    ],
  ])('%s', (_name, filters, c, expected) => {
    expect(matches(filters, c)).toBe(expected);
  });
});

// Prices as the events carry them: up to two decimals, sometimes written with extra zeros.
const cents = fc.integer({ min: 1, max: 10_000_000 });
const write = (c: number, pad: number) => new Decimal(c).div(100).toFixed(2 + pad);
const price = fc.option(fc.tuple(cents, fc.integer({ min: 0, max: 2 })), { freq: 6 });
const asText = (p: [number, number] | null) => (p === null ? null : write(p[0], p[1]));
const pct = fc
  .tuple(fc.integer({ min: 1, max: 30_000 }), fc.integer({ min: 0, max: 2 }))
  .map(([n, d]) => new Decimal(n).div(10 ** d).toString());

const arbChange = fc.tuple(price, price, fc.boolean(), fc.constantFrom(...MARKET_SLUGS)).map(([a, b, same, market]) => {
  // Often the same price, written differently: count-only changes must be common cases too.
  const newPrice = same && a !== null ? ([a[0], (a[1] + 1) % 3] as [number, number]) : b;
  return change(asText(a), asText(newPrice), { market });
});
const arbFilters: fc.Arbitrary<Filters> = fc.record(
  {
    markets: fc.uniqueArray(fc.constantFrom(...MARKET_SLUGS), { minLength: 1 }),
    min_change_pct: pct,
    crosses: fc.record({
      price: cents.map((c) => write(c, 0)),
      direction: fc.constantFrom('down', 'up', 'any') as fc.Arbitrary<'down' | 'up' | 'any'>,
    }),
    include_count_changes: fc.boolean(),
  },
  { requiredKeys: [] },
);

/** The spec's wording, computed the plain way (division) as a second opinion. */
function oracle(f: Filters, c: PriceChangeEvent): boolean {
  const o = c.old_price === null ? null : new Decimal(c.old_price);
  const n = c.new_price === null ? null : new Decimal(c.new_price);
  const moved = o === null || n === null ? o !== n : !o.eq(n);
  if (f.markets && !f.markets.includes(c.market)) return false;
  if (!moved) return (f.include_count_changes ?? false) && !f.min_change_pct && !f.crosses;
  if (f.min_change_pct) {
    const change = o === null || n === null ? new Decimal(100) : n.minus(o).abs().div(o).times(100);
    if (change.lt(f.min_change_pct)) return false;
  }
  if (f.crosses) {
    const p = new Decimal(f.crosses.price);
    const down = n !== null && n.lte(p) && (o === null || o.gt(p));
    const up = n !== null && n.gte(p) && (o === null || o.lt(p));
    const d = f.crosses.direction;
    if (!((d !== 'up' && down) || (d !== 'down' && up))) return false;
  }
  return true;
}

describe('matches: properties', () => {
  it('agrees with the spec computed by division', () => {
    fc.assert(
      fc.property(arbFilters, arbChange, (f, c) => matches(f, c) === oracle(f, c)),
      { numRuns: 2000 },
    );
  });

  it('does not depend on how a price is written ("10" and "10.00")', () => {
    const pad = (s: string | null) => (s === null ? null : s.includes('.') ? `${s}00` : `${s}.000`);
    fc.assert(
      fc.property(arbFilters, arbChange, (f, c) => {
        const padded = { ...f, ...(f.crosses && { crosses: { ...f.crosses, price: pad(f.crosses.price)! } }) };
        return matches(f, c) === matches(padded, { ...c, old_price: pad(c.old_price), new_price: pad(c.new_price) });
      }),
    );
  });

  it('passes every lower threshold when it passes a higher one', () => {
    fc.assert(
      fc.property(pct, pct, arbChange, (x, y, c) => {
        const [low, high] = new Decimal(x).lte(y) ? [x, y] : [y, x];
        return !matches({ min_change_pct: high }, c) || matches({ min_change_pct: low }, c);
      }),
    );
  });
});

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  comparePrices,
  Dec,
  fromMinorUnits,
  minorUnitsToFixed,
  mean,
  normalizePrice,
  parseDecimal,
  parsePrice,
  percentChange,
  toFixedString,
} from './decimal.js';
import { AppError } from './errors.js';

const code = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (e) {
    return e instanceof AppError ? e.code : 'not-app-error';
  }
  return undefined;
};

describe('parseDecimal', () => {
  it.each(['0', '1', '12.5', '0.01', '-3.25', '+4', '  7.10  ', '123456789012345678901234567890.12'])(
    'accepts %j',
    (s) => {
      expect(parseDecimal(s).toString()).toBe(new Dec(s.trim()).toString());
    },
  );

  it.each([1.5, '1e3', '0x10', '', ' ', 'NaN', 'Infinity', '1.', '.5', '1,5', null, undefined, {}])(
    'refuses %j with invalid_decimal',
    (v) => {
      expect(code(() => parseDecimal(v))).toBe('invalid_decimal');
    },
  );

  it('names the field in the error', () => {
    expect(() => parseDecimal('abc', 'price_rmb')).toThrow(/price_rmb/);
  });
});

describe('parsePrice', () => {
  it.each(['0', '0.00', '-1', '-0.01'])('refuses non-positive %j', (v) => {
    expect(code(() => parsePrice(v))).toBe('non_positive_price');
  });
  it('accepts the smallest positive amount', () => {
    expect(normalizePrice('0.01')).toBe('0.01');
  });
});

describe("normalizePrice's fast path for canonical strings", () => {
  /** The general path: what normalizePrice answered before the fast path. */
  const general = (v: string): string => toFixedString(parsePrice(v));
  const outcome = (f: () => string): string => {
    try {
      return f();
    } catch (err) {
      return `error ${(err as { code?: string }).code}`;
    }
  };
  it('answers exactly what the general path answers, errors included', () => {
    const decimalish = fc.oneof(
      fc
        .tuple(fc.bigInt({ min: 0n, max: 10n ** 18n }), fc.nat(99))
        .map(([i, f]) => `${i}.${String(f).padStart(2, '0')}`),
      fc.stringMatching(/^[+-]?0*\d{0,5}(\.\d{0,4})?$/),
    );
    fc.assert(
      fc.property(decimalish, (v) => {
        expect(outcome(() => normalizePrice(v))).toBe(outcome(() => general(v)));
      }),
      { numRuns: 5000 },
    );
  });
  it.each(['0.00', '00.10', '1.5', '+1.00', '1.000', ' 1.00'])('leaves %j to the general path', (v) => {
    expect(outcome(() => normalizePrice(v))).toBe(outcome(() => general(v)));
  });
});

describe('comparePrices', () => {
  it('orders canonical prices exactly as Decimal does', () => {
    const price = fc
      .tuple(fc.bigInt({ min: 0n, max: 10n ** 17n }), fc.nat(99))
      .map(([i, f]) => `${i}.${String(f).padStart(2, '0')}`);
    fc.assert(
      fc.property(price, price, (a, b) => {
        expect(comparePrices(a, b)).toBe(new Dec(a).comparedTo(new Dec(b)));
      }),
    );
    expect(comparePrices('9007199254740993.01', '9007199254740993.00')).toBe(1);
  });
});

describe('fromMinorUnits', () => {
  it('converts integer cents exactly, from every input type', () => {
    expect(toFixedString(fromMinorUnits(12345))).toBe('123.45');
    expect(toFixedString(fromMinorUnits('12345'))).toBe('123.45');
    expect(toFixedString(fromMinorUnits(12345n))).toBe('123.45');
    expect(toFixedString(fromMinorUnits('900719925474099312345'))).toBe('9007199254740993123.45');
  });
  it('refuses fractional or unsafe numbers', () => {
    expect(code(() => fromMinorUnits(1.5))).toBe('invalid_decimal');
    expect(code(() => fromMinorUnits(2 ** 60))).toBe('invalid_decimal');
    expect(code(() => fromMinorUnits('12.5'))).toBe('invalid_decimal');
  });
  it('round-trips any integer amount (property)', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 30n }), (cents) => {
        const s = toFixedString(fromMinorUnits(cents));
        expect(BigInt(s.replace('.', ''))).toBe(cents);
      }),
    );
  });
});

describe('minorUnitsToFixed', () => {
  const viaDecimal = (u: bigint | string | number) => toFixedString(fromMinorUnits(u));
  it('gives what the Decimal path gives, for every input type (property)', () => {
    const units = fc.oneof(
      fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }),
      fc.integer({ min: -1_000_000, max: 1_000_000 }),
      fc.maxSafeInteger(),
      fc.bigInt({ min: -(10n ** 25n), max: 10n ** 25n }).map(String),
      fc
        .tuple(fc.constantFrom('', '+', '-', '0', '-00', '+000'), fc.stringMatching(/^\d{1,12}$/))
        .map(([a, b]) => a + b),
    );
    fc.assert(
      fc.property(units, (u) => {
        expect(minorUnitsToFixed(u)).toBe(viaDecimal(u));
      }),
    );
  });
  it('edge cases: zero, one minor unit, leading zeros, the largest safe number', () => {
    for (const u of [0, -0, 1, -1, 99, 100, '007', '-0', '+5', Number.MAX_SAFE_INTEGER, 0n])
      expect(minorUnitsToFixed(u)).toBe(viaDecimal(u));
    expect(minorUnitsToFixed(5)).toBe('0.05');
  });
  it('refuses what fromMinorUnits refuses', () => {
    expect(code(() => minorUnitsToFixed(1.5))).toBe('invalid_decimal');
    expect(code(() => minorUnitsToFixed(2 ** 60))).toBe('invalid_decimal');
    expect(code(() => minorUnitsToFixed('12.5'))).toBe('invalid_decimal');
  });
});

describe('toFixedString', () => {
  it('rounds half up and never prints a negative zero', () => {
    expect(toFixedString(new Dec('1.005'))).toBe('1.01');
    expect(toFixedString(new Dec('-0.001'))).toBe('0.00');
  });
  it('keeps digits a float would lose', () => {
    expect(toFixedString(new Dec('0.1').plus(new Dec('0.2')))).toBe('0.30');
    expect(toFixedString(new Dec('9007199254740993.01'))).toBe('9007199254740993.01');
  });
});

describe('percentChange', () => {
  it('is (now - base) / base * 100', () => {
    expect(percentChange(new Dec('110'), new Dec('100'))).toBe('10.00');
    expect(percentChange(new Dec('50'), new Dec('200'))).toBe('-75.00');
    expect(percentChange(new Dec('1'), new Dec('3'))).toBe('-66.67');
  });
  it('is null without a baseline, never 0', () => {
    expect(percentChange(new Dec('5'), null)).toBeNull();
    expect(percentChange(new Dec('5'), new Dec('0'))).toBeNull();
    expect(percentChange(null, new Dec('5'))).toBeNull();
  });
  it('applying the change to the base gives back now, within rounding (property)', () => {
    const price = fc.integer({ min: 1, max: 10_000_000 }).map((cents) => fromMinorUnits(cents));
    fc.assert(
      fc.property(price, price, (now, base) => {
        const pct = new Dec(percentChange(now, base) as string);
        const back = base.times(pct.dividedBy(100).plus(1));
        // 0.005 % of rounding on the percentage, times the base.
        expect(back.minus(now).abs().lessThanOrEqualTo(base.times('0.00005'))).toBe(true);
      }),
    );
  });
});

describe('mean', () => {
  it('is exact on decimals and null for an empty window', () => {
    expect(mean([new Dec('0.1'), new Dec('0.2')])).toBe('0.15');
    expect(mean([])).toBeNull();
  });
  it('lies between min and max (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 1_000_000 }), { minLength: 1 }), (cents) => {
        const values = cents.map((c) => fromMinorUnits(c));
        const m = new Dec(mean(values, 6) as string);
        expect(m.greaterThanOrEqualTo(Dec.min(...values))).toBe(true);
        expect(m.lessThanOrEqualTo(Dec.max(...values))).toBe(true);
      }),
    );
  });
});

/**
 * Money is decimal. Prices travel as fixed-point strings ("1234.50") and are computed with
 * decimal.js; a JS number never holds a price. `Dec` is a private clone so no other code can
 * change our precision or rounding by configuring the global Decimal.
 */
import { Decimal } from 'decimal.js';
import { AppError } from './errors.js';

export const Dec = Decimal.clone({
  precision: 40,
  rounding: Decimal.ROUND_HALF_UP,
  toExpNeg: -40,
  toExpPos: 40,
});
export type Dec = Decimal;

/** Digits after the point for prices in every currency we carry. */
export const PRICE_SCALE = 2;
/** Digits after the point for percentages and the liquidity score. */
export const PERCENT_SCALE = 2;

const DECIMAL_RE = /^[+-]?(\d+)(\.\d+)?$/;

/**
 * Strictly parses a decimal string. Refuses numbers (a float may already have lost digits),
 * exponents, hex, blanks, NaN and Infinity.
 */
export function parseDecimal(value: unknown, field = 'value'): Dec {
  if (typeof value !== 'string' || !DECIMAL_RE.test(value.trim())) {
    throw new AppError('invalid_decimal', `${field}: not a decimal string: ${JSON.stringify(value)}`, {
      details: { field },
    });
  }
  return new Dec(value.trim());
}

/** A price must be > 0: a zero or negative "price" is always an upstream fault, never data. */
export function parsePrice(value: unknown, field = 'price'): Dec {
  const d = parseDecimal(value, field);
  if (!d.isPositive() || d.isZero()) {
    throw new AppError('non_positive_price', `${field}: price must be > 0, got ${String(value)}`, {
      details: { field },
    });
  }
  return d;
}

/**
 * Integer minor units (cents, fen) → decimal. Accepts a bigint, an integer string or a safe
 * integer number: integers below 2^53 are exact in a JS number, fractions are not.
 */
export function fromMinorUnits(units: bigint | string | number, scale = PRICE_SCALE): Dec {
  let digits: string;
  if (typeof units === 'bigint') digits = units.toString();
  else if (typeof units === 'number') {
    if (!Number.isSafeInteger(units)) {
      throw new AppError('invalid_decimal', `minor units must be a safe integer, got ${units}`);
    }
    digits = String(units);
  } else if (/^[+-]?\d+$/.test(units)) digits = units;
  else throw new AppError('invalid_decimal', `minor units must be an integer, got '${units}'`);
  return new Dec(digits).dividedBy(new Dec(10).pow(scale));
}

/**
 * Integer minor units → the fixed-point string of PRICE_SCALE digits that
 * `toFixedString(fromMinorUnits(units))` gives, by placing the point among the digits: no Decimal
 * (~3 µs each), and the pollers convert a price per upstream row. Any sign and zero included; a
 * non-integer or unsafe number is refused as fromMinorUnits refuses it.
 */
export function minorUnitsToFixed(units: bigint | string | number): string {
  let digits: string;
  if (typeof units === 'number' && Number.isSafeInteger(units)) digits = String(units);
  else if (typeof units === 'bigint') digits = units.toString();
  else if (typeof units === 'string' && /^[+-]?\d+$/.test(units)) digits = units;
  else return toFixedString(fromMinorUnits(units));
  const negative = digits.startsWith('-');
  digits = digits.replace(/^[+-]/, '').replace(/^0+(?=\d)/, '');
  if (/^0*$/.test(digits)) return `0.${'0'.repeat(PRICE_SCALE)}`;
  const padded = digits.padStart(PRICE_SCALE + 1, '0');
  const point = padded.length - PRICE_SCALE;
  return `${negative ? '-' : ''}${padded.slice(0, point)}.${padded.slice(point)}`;
}

/** Fixed-point string with exactly `scale` digits, rounded half-up. */
export function toFixedString(value: Dec, scale = PRICE_SCALE): string {
  const s = value.toFixed(scale);
  // decimal.js prints "-0.00" for tiny negatives rounded to zero; a sign on zero means nothing.
  return /^-0(\.0+)?$/.test(s) ? s.slice(1) : s;
}

/** Canonical price string: parse, require > 0, fix the scale. */
export function normalizePrice(value: unknown, field = 'price', scale = PRICE_SCALE): string {
  // Most upstream prices already are canonical ("25.10"): answered as they are, without a
  // Decimal (a history import parses millions; decimal.js costs ~3 µs each). Exactly what the
  // general path returns for them: no sign, no leading zero, `scale` digits, not zero.
  if (scale === PRICE_SCALE && typeof value === 'string' && CANONICAL_PRICE.test(value) && !ZERO_PRICE.test(value))
    return value;
  return toFixedString(parsePrice(value, field), scale);
}

const CANONICAL_PRICE = /^(?:0|[1-9]\d{0,15})\.\d{2}$/;
const ZERO_PRICE = /^0\.00$/;

/**
 * Compares two canonical price strings (normalizePrice's output) exactly, as integers of minor
 * units: -1, 0 or 1. No Decimal and no float: a BigInt of the digits.
 */
export function comparePrices(a: string, b: string): -1 | 0 | 1 {
  const x = BigInt(a.replace('.', ''));
  const y = BigInt(b.replace('.', ''));
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * Percentage change (now − base) / base × 100, fixed to `scale` digits; null without a
 * baseline (missing or zero base), because "no baseline" is not "0 % change".
 */
export function percentChange(now: Dec | null, base: Dec | null, scale = PERCENT_SCALE): string | null {
  if (now === null || base === null || base.isZero()) return null;
  return toFixedString(now.minus(base).dividedBy(base).times(100), scale);
}

/** Arithmetic mean; null for an empty window. */
export function mean(values: readonly Dec[], scale = PRICE_SCALE): string | null {
  if (values.length === 0) return null;
  const sum = values.reduce((acc, v) => acc.plus(v), new Dec(0));
  return toFixedString(sum.dividedBy(values.length), scale);
}

export function minDecimal(values: readonly Dec[]): Dec | null {
  let best: Dec | null = null;
  for (const v of values) if (best === null || v.lessThan(best)) best = v;
  return best;
}

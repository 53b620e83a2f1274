/**
 * Deterministic noise: every random-looking value of the simulator is a hash of what it is
 * about (seed, item, market, purpose, time bucket), so the state at any simulated moment is a
 * pure function, cheap to compute for any time without replaying the past, and the truth
 * endpoint and the upstream APIs agree by construction.
 */

/** 32-bit mix of a list of integers (murmur3's finaliser per step). */
export function hash32(...xs: number[]): number {
  let h = 0x9e3779b9;
  for (const x of xs) {
    h = Math.imul(h ^ (x | 0), 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
    // high bits of large integers (time buckets) matter too
    h = Math.imul(h ^ Math.floor(x / 4294967296), 0x27d4eb2f);
    h ^= h >>> 15;
  }
  return h >>> 0;
}

/** Uniform in [0, 1). */
export function unit(...xs: number[]): number {
  return hash32(...xs) / 4294967296;
}

/** Value noise in [-1, 1] at position `x` (in knots), linearly interpolated between knots. */
export function valueNoise(x: number, ...key: number[]): number {
  const k = Math.floor(x);
  const f = x - k;
  const a = unit(...key, k) * 2 - 1;
  const b = unit(...key, k + 1) * 2 - 1;
  return a + (b - a) * f;
}

/** Purposes, so one item's price, count, bid … draw independent numbers. */
export const PURPOSE = {
  change: 1,
  walk: 2,
  count: 3,
  vanish: 4,
  coverage: 5,
  spread: 6,
  bid: 7,
  bidCount: 8,
  blue: 9,
  range: 10,
  floatOrder: 11,
  sale: 12,
  saleDetail: 13,
  market: 14,
} as const;

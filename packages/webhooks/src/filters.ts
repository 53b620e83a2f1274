/**
 * Which price changes a subscription wants. Filters are stored as jsonb in
 * webhook_subscriptions.filters, validated by the API with filtersSchema (whose issues carry the
 * field's path, so a 400 names it), and applied by the notifier with matches(). Every condition
 * given must hold. Prices are compared as decimals: "10.00" and "10" are the same price, and no
 * float ever rounds a threshold.
 */
import { Dec, isMarketSlug } from '@skinprices/domain';
import type { PriceChangeEvent } from '@skinprices/events';
import { z } from 'zod';

export interface Filters {
  /** Market slugs of @skinprices/domain. Absent: every market. */
  markets?: string[];
  /** At most 1000 items. `phase` absent: any phase; "" only the item without a phase. */
  items?: { market_hash_name: string; phase?: string }[];
  /**
   * Decimal percentage > 0: |new − old| / old ≥ this. A price appearing or vanishing counts as
   * 100 %; a change of the count only never passes.
   */
  min_change_pct?: string;
  /** The price crossing a threshold: down to ≤ price from above (or from none), up to ≥ price from below. */
  crosses?: { price: string; direction: 'down' | 'up' | 'any' };
  /** Default false: changes where only the count changed (the price did not) are not sent. */
  include_count_changes?: boolean;
}

const MAX_FILTER_ITEMS = 1000;

// A plain decimal greater than zero, as the events' validator accepts prices: no sign, exponent or
// blank, so "1e3" or " 5" are refused instead of being read some other way than the customer meant.
const POSITIVE_DECIMAL = /^(?:[1-9]\d{0,17}(?:\.\d{1,8})?|0\.\d{0,7}[1-9]\d{0,7})$/;
const positiveDecimal = (what: string) =>
  z.string().regex(POSITIVE_DECIMAL, `${what}: a decimal string greater than 0, such as "5" or "12.50"`);

const itemSchema = z.strictObject({
  market_hash_name: z.string().min(1).max(512),
  phase: z.string().max(64).optional(),
});

export const filtersSchema: z.ZodType<Filters> = z.strictObject({
  markets: z
    .array(z.string().refine(isMarketSlug, { error: (issue) => `unknown market ${JSON.stringify(issue.input)}` }))
    .min(1)
    .optional(),
  items: z.array(itemSchema).min(1).max(MAX_FILTER_ITEMS).optional(),
  min_change_pct: positiveDecimal('percentage').optional(),
  crosses: z.strictObject({ price: positiveDecimal('price'), direction: z.enum(['down', 'up', 'any']) }).optional(),
  include_count_changes: z.boolean().optional(),
});

/** Filters in the form matching needs, built once per filters object (the notifier holds them). */
interface Compiled {
  markets: ReadonlySet<string> | undefined;
  /** Items matched whatever their phase, and `name\0phase` of items with a given phase. */
  anyPhase: ReadonlySet<string>;
  withPhase: ReadonlySet<string>;
  hasItems: boolean;
  minChangePct: Dec | undefined;
  crosses: { price: Dec; direction: 'down' | 'up' | 'any' } | undefined;
  includeCountChanges: boolean;
}

const compiledCache = new WeakMap<Filters, Compiled>();

function compile(filters: Filters): Compiled {
  const cached = compiledCache.get(filters);
  if (cached) return cached;
  const anyPhase = new Set<string>();
  const withPhase = new Set<string>();
  for (const item of filters.items ?? []) {
    if (item.phase === undefined) anyPhase.add(item.market_hash_name);
    else withPhase.add(`${item.market_hash_name}\0${item.phase}`);
  }
  const compiled: Compiled = {
    markets: filters.markets ? new Set(filters.markets) : undefined,
    anyPhase,
    withPhase,
    hasItems: filters.items !== undefined,
    minChangePct: filters.min_change_pct === undefined ? undefined : new Dec(filters.min_change_pct),
    crosses: filters.crosses && { price: new Dec(filters.crosses.price), direction: filters.crosses.direction },
    includeCountChanges: filters.include_count_changes ?? false,
  };
  compiledCache.set(filters, compiled);
  return compiled;
}

const HUNDRED = new Dec(100);

function passesMinChange(min: Dec, oldPrice: Dec | null, newPrice: Dec | null): boolean {
  // Appearing or vanishing is 100 %; a zero old price cannot be a base, so it counts as appearing.
  if (oldPrice === null || newPrice === null || oldPrice.isZero()) return HUNDRED.gte(min);
  // |new − old| · 100 ≥ min · old: the same test as the percentage, with no division to round.
  return newPrice.minus(oldPrice).abs().times(HUNDRED).gte(min.times(oldPrice));
}

function crossesDown(threshold: Dec, oldPrice: Dec | null, newPrice: Dec | null): boolean {
  return newPrice !== null && newPrice.lte(threshold) && (oldPrice === null || oldPrice.gt(threshold));
}

function crossesUp(threshold: Dec, oldPrice: Dec | null, newPrice: Dec | null): boolean {
  return newPrice !== null && newPrice.gte(threshold) && (oldPrice === null || oldPrice.lt(threshold));
}

function passesCrosses(crosses: NonNullable<Compiled['crosses']>, oldPrice: Dec | null, newPrice: Dec | null): boolean {
  const down = crosses.direction !== 'up' && crossesDown(crosses.price, oldPrice, newPrice);
  const up = crosses.direction !== 'down' && crossesUp(crosses.price, oldPrice, newPrice);
  return down || up;
}

const dec = (value: string | null): Dec | null => (value === null ? null : new Dec(value));

/** Whether a subscription with these filters gets this change. */
export function matches(filters: Filters, change: PriceChangeEvent): boolean {
  const f = compile(filters);
  if (f.markets && !f.markets.has(change.market)) return false;
  if (f.hasItems) {
    const name = change.market_hash_name;
    if (!f.anyPhase.has(name) && !f.withPhase.has(`${name}\0${change.phase}`)) return false;
  }
  const oldPrice = dec(change.old_price);
  const newPrice = dec(change.new_price);
  const priceChanged = oldPrice === null || newPrice === null ? oldPrice !== newPrice : !oldPrice.eq(newPrice);
  if (!priceChanged) {
    // A count-only change passes only when asked for, and never a price condition.
    return f.includeCountChanges && f.minChangePct === undefined && f.crosses === undefined;
  }
  if (f.minChangePct && !passesMinChange(f.minChangePct, oldPrice, newPrice)) return false;
  if (f.crosses && !passesCrosses(f.crosses, oldPrice, newPrice)) return false;
  return true;
}

/**
 * Shared parsing of upstream values. Every function throws an AppError for a value it will not
 * accept; `collect` turns those into rejected rows so one bad row never sinks a page, while the
 * poller still learns the cycle was not clean.
 */
import {
  AppError,
  comparePrices,
  exteriorOfName,
  flagsOfName,
  minorUnitsToFixed,
  normalizeExterior,
  normalizePhase,
  normalizePrice,
  parseDecimal,
  type Exterior,
  type PhaseOrNone,
} from '@skinprices/domain';
import type { Kind, ListingRow, Page, RowMap } from './rows.js';

export type Obj = Record<string, unknown>;

export function malformed(market: string, what: string): AppError {
  return new AppError('upstream_malformed', `${market}: ${what}`, { details: { market } });
}

export function asObj(v: unknown, what: string): Obj {
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    throw new AppError('invalid_item', `${what}: not an object`);
  return v as Obj;
}

export function asArray(v: unknown, what: string): unknown[] {
  if (!Array.isArray(v)) throw new AppError('invalid_item', `${what}: not an array`);
  return v;
}

export function str(o: Obj, key: string): string {
  const v = o[key];
  if (typeof v !== 'string' || v.trim() === '')
    throw new AppError('invalid_item', `${key}: expected a non-empty string`);
  return v.trim();
}

export function optStr(o: Obj, key: string): string | null {
  const v = o[key];
  if (v === null || v === undefined || v === '') return null;
  if (typeof v !== 'string') throw new AppError('invalid_item', `${key}: expected a string`);
  return v;
}

export function int(o: Obj, key: string, min = 0): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) {
    throw new AppError('invalid_item', `${key}: expected an integer >= ${min}, got ${JSON.stringify(v)}`);
  }
  return v;
}

export function optInt(o: Obj, key: string): number | null {
  const v = o[key];
  return v === null || v === undefined ? null : int(o, key, Number.MIN_SAFE_INTEGER);
}

/**
 * A price in integer minor units. 0 means "none" only together with a zero count; a zero price
 * for an item that has listings (or bids) is a broken upstream, refused.
 */
export function minorPrice(o: Obj, key: string, count: number): string | null {
  const v = o[key];
  if (v === null || v === undefined) return noPrice(key, count);
  if (v === 0 && count === 0) return null;
  return normalizePrice(minorUnitsToFixed(v as number), key);
}

/**
 * A decimal-string price ("12.5", "3"); "0" is refused. Absent is "none" only when `count` is 0
 * (pass no count for optional prices such as a fifth listing).
 */
export function decimalPrice(o: Obj, key: string, count = 0): string | null {
  const v = o[key];
  if (v === null || v === undefined) return noPrice(key, count);
  return normalizePrice(v, key);
}

/** "No price" is a fact only about an item with nothing listed (or bid); otherwise it is a hole. */
function noPrice(key: string, count: number): null {
  if (count > 0) throw new AppError('invalid_item', `${key} missing although the count is ${count}`);
  return null;
}

/** A float (wear) value as a decimal string in [0, 1], kept with all its digits. */
export function floatValue(o: Obj, key: string): string | null {
  const v = o[key];
  if (v === null || v === undefined) return null;
  const d = parseDecimal(typeof v === 'number' ? String(v) : v, key);
  if (d.lessThan(0) || d.greaterThan(1))
    throw new AppError('invalid_item', `${key}: ${String(v)} is not within [0, 1]`);
  return d.toString();
}

export function timeFromSeconds(o: Obj, key: string): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0)
    throw new AppError('invalid_item', `${key}: expected epoch seconds`);
  return Math.round(v * 1000);
}

/** Identity parts every listing row needs, from a name and the upstream's phase spelling. */
export function identity(name: string, phase: string | null | undefined): Identity {
  const p: PhaseOrNone = normalizePhase(phase);
  const ext: Exterior | null = exteriorOfName(name);
  const flags = flagsOfName(name);
  return {
    market_hash_name: name,
    phase: p,
    exterior: ext,
    stattrak: flags.stattrak === 1,
    souvenir: flags.souvenir === 1,
  };
}

export interface Identity {
  market_hash_name: string;
  phase: PhaseOrNone;
  exterior: Exterior | null;
  stattrak: boolean;
  souvenir: boolean;
}

/**
 * A listing row from its identity and the rest (`phase` and `exterior` where the upstream says
 * them better than the name). Written out field by field, never as `{ ...id, price, … }`: V8 in
 * Node 20 builds a spread followed by more properties on a slow path, tens of times slower than
 * the literal, and the pollers build a row per upstream item.
 */
export function listingRow(
  id: Identity,
  rest: Pick<ListingRow, 'price' | 'count' | 'template_id' | 'item_page_url'> &
    Partial<Pick<ListingRow, 'phase' | 'exterior'>>,
): ListingRow {
  return {
    market_hash_name: id.market_hash_name,
    phase: rest.phase ?? id.phase,
    price: rest.price,
    count: rest.count,
    exterior: rest.exterior === undefined ? id.exterior : rest.exterior,
    stattrak: id.stattrak,
    souvenir: id.souvenir,
    template_id: rest.template_id,
    item_page_url: rest.item_page_url,
  };
}

/** Wear from an upstream tag, falling back to the name (they must not disagree). */
export function exteriorFrom(tag: string | null, name: string): Exterior | null {
  const fromName = exteriorOfName(name);
  if (tag === null) return fromName;
  const fromTag = normalizeExterior(tag);
  if (fromName !== null && fromTag !== fromName) {
    throw new AppError('invalid_exterior', `exterior '${tag}' contradicts the name '${name}'`);
  }
  return fromTag;
}

/** Applies `parse` to each raw row; failures become rejected rows, other errors propagate. */
export function collect<K extends Kind>(
  raws: readonly unknown[],
  parse: (raw: unknown) => RowMap[K] | RowMap[K][],
): Page<K> {
  const page: Page<K> = { rows: [], rejected: [] };
  for (const raw of raws) {
    try {
      const r = parse(raw);
      if (Array.isArray(r)) page.rows.push(...r);
      else page.rows.push(r);
    } catch (err) {
      if (!(err instanceof AppError) || err.retryable) throw err;
      page.rejected.push({ reason: err.message, raw });
    }
  }
  return page;
}

/**
 * Lowest price and count per item (name + phase) from individual listings or offers, for formats
 * that list every offer (raw listings, CSFloat, DMarket): nothing is said before the last page,
 * since a minimum over part of the offers would be an invented, too high, price.
 */
export class LowestOffers {
  private readonly best = new Map<string, ListingRow>();

  /** One offer (or `row.count` identical ones) of an item. */
  add(row: ListingRow): void {
    const key = `${row.market_hash_name}\u0000${row.phase}`;
    const cur = this.best.get(key);
    if (!cur) {
      this.best.set(key, { ...row });
      return;
    }
    cur.count += row.count;
    // Both are normalizePrice's canonical strings: compared exactly without a Decimal each.
    if (comparePrices(row.price as string, cur.price as string) < 0) cur.price = row.price;
  }

  rows(): ListingRow[] {
    return [...this.best.values()];
  }
}

/** Cursor paging that refuses to go round in a circle: a cursor already followed is an error. */
export class CursorTrail {
  private readonly seen = new Set<string>();

  constructor(private readonly market: string) {}

  follow(cursor: string, page: number): string {
    if (this.seen.has(cursor))
      throw new AppError('upstream_malformed', `${this.market}: cursor repeated on page ${page}`, {
        details: { market: this.market },
        retryable: false,
      });
    this.seen.add(cursor);
    return cursor;
  }
}

/**
 * The read model as the API's reads see it (ReadDb: Kysely typed by the read contract) and the
 * shaping of its listing rows into the spec's (section 2), shared by the endpoint reads
 * (readmodel-prices.ts) and the patched lists' reads (readmodel-journal.ts). Decimal values stay
 * strings from PostgreSQL `numeric` to JSON; stattrak/souvenir are 0/1; times are `…sssZ` strings.
 */
import { getMarket, identityKey, type PhaseOrNone } from '@skinprices/domain';
import type { ReadContractV1 } from '@skinprices/store';
import type { Kysely, Selectable } from 'kysely';
import type { RowChange } from './list-segments.js';
import type { Stats } from './routes/schemas.js';

/** The read model as the API may see it. */
export type ReadDb = Kysely<ReadContractV1>;

/** A row's key in a patched list body (list-segments.ts). */
export const listKey = (name: string, phase: string) =>
  identityKey({ marketHashName: name, phase: phase as PhaseOrNone });

const bit = (b: boolean): 0 | 1 => (b ? 1 : 0);
export const int = (v: string | null): number | null => (v === null ? null : Number(v));

export type ListingRow = Selectable<ReadContractV1['api_listings_v1']>;

/** Adds the statistics to `o`, in the spec's order. */
function putStats(o: Record<string, unknown>, r: Stats): void {
  o.change_24h = r.change_24h;
  o.change_7d = r.change_7d;
  o.change_30d = r.change_30d;
  o.change_90d = r.change_90d;
  o.avg_7d = r.avg_7d;
  o.avg_30d = r.avg_30d;
  o.avg_90d = r.avg_90d;
}

/**
 * A row of GET /v1/prices/{market} in its marketplace's shape (routes/schemas.ts listingRowSchema):
 * 2.3 for a marketplace with its own template id (CN-A), 2.4 for the others (plus `phase`).
 */
export function listingRow(r: ListingRow): Record<string, unknown> {
  const market = getMarket(r.market);
  // Property by property, in the shape's order, not from spreads: Node 20's V8 copies an object
  // spread followed by more properties on a slow path (~30× a literal), and a list's first build
  // makes one of these per row (33k).
  const o: Record<string, unknown> = {
    id: int(r.id),
    market_hash_name: r.market_hash_name,
    stattrak: bit(r.stattrak),
    souvenir: bit(r.souvenir),
  };
  o[market.priceField] = r.price;
  putStats(o, r);
  o.count = r.count;
  o.phase = r.phase;
  o.updated_at = r.changed_at.toISOString();
  o.liquidity = r.liquidity;
  if (market.templateIdField) o[market.templateIdField] = int(r.template_id);
  else {
    o.item_page_url = r.item_page_url;
    o.exterior = r.exterior;
  }
  return o;
}

/** A listing row as a list body's row: its key and JSON, JSON null when it has no price. */
export function rowChange(r: ListingRow): RowChange {
  const key = listKey(r.market_hash_name, r.phase);
  return { key, json: r.price === null ? null : JSON.stringify(listingRow(r)) };
}

/**
 * The outlier guard's verdict (materializer migrations/0007), beyond the spec's fields: whether
 * the price is more than 5× away from every reference, and how far to trust it (0..1).
 */
export function putQuality(o: Record<string, unknown>, r: ListingRow): Record<string, unknown> {
  o.is_outlier = r.is_outlier;
  o.confidence = r.confidence;
  return o;
}

/** The catalogue item's per-marketplace object (2.6); built as listingRow is. */
export function catalogueEntry(r: ListingRow): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  o[getMarket(r.market).priceField] = r.price;
  o.count = r.count;
  putStats(o, r);
  o.liquidity = r.liquidity;
  o.updated_at = r.changed_at.toISOString();
  o.phase = r.phase;
  return putQuality(o, r);
}

/**
 * Queries of the read model, shaped as the spec's rows (section 2). Decimal values stay strings
 * from PostgreSQL `numeric` to JSON; stattrak/souvenir are 0/1; times are `…sssZ` strings.
 */
import { templateIdFieldName, type MarketSlug } from '@skinprices/domain';
import type { Pool } from '@skinprices/store';

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);
const bit = (b: boolean): 0 | 1 => (b ? 1 : 0);

interface ListingRow {
  id: string;
  market: string;
  market_hash_name: string;
  phase: string;
  price: string;
  count: number;
  exterior: string | null;
  stattrak: boolean;
  souvenir: boolean;
  template_id: string | null;
  item_page_url: string | null;
  observed_at: Date;
  change_24h: string | null;
  change_7d: string | null;
  change_30d: string | null;
  change_90d: string | null;
  avg_7d: string | null;
  avg_30d: string | null;
  avg_90d: string | null;
  liquidity: string | null;
}

const LISTING_SELECT = `
  SELECT item_id(c.market_hash_name, c.phase) AS id, c.market, c.market_hash_name, c.phase, c.price, c.count,
         c.exterior, c.stattrak, c.souvenir, c.template_id, c.item_page_url, c.observed_at,
         c.change_24h, c.change_7d, c.change_30d, c.change_90d, c.avg_7d, c.avg_30d, c.avg_90d,
         l.score AS liquidity
  FROM listings_current c
  LEFT JOIN item_liquidity l USING (market_hash_name, phase)
  WHERE c.price IS NOT NULL`;

const stats = (r: ListingRow) => ({
  change_24h: r.change_24h,
  change_7d: r.change_7d,
  change_30d: r.change_30d,
  change_90d: r.change_90d,
  avg_7d: r.avg_7d,
  avg_30d: r.avg_30d,
  avg_90d: r.avg_90d,
});

/** A row of GET /v1/prices/{market}: 2.3 for CN-A, 2.4 for the others (plus `phase`). */
function listingRow(r: ListingRow): Record<string, unknown> {
  if (r.market === 'cn-a')
    return {
      id: Number(r.id),
      market_hash_name: r.market_hash_name,
      stattrak: bit(r.stattrak),
      souvenir: bit(r.souvenir),
      price_rmb: r.price,
      ...stats(r),
      count: r.count,
      phase: r.phase,
      updated_at: iso(r.observed_at),
      [templateIdFieldName('cn-a')]: r.template_id === null ? null : Number(r.template_id),
      liquidity: r.liquidity,
    };
  return {
    id: Number(r.id),
    market_hash_name: r.market_hash_name,
    item_page_url: r.item_page_url,
    stattrak: bit(r.stattrak),
    souvenir: bit(r.souvenir),
    exterior: r.exterior,
    price: r.price,
    ...stats(r),
    count: r.count,
    phase: r.phase,
    updated_at: iso(r.observed_at),
    liquidity: r.liquidity,
  };
}

/** The catalogue item's per-marketplace object (2.6). */
function catalogueEntry(r: ListingRow): Record<string, unknown> {
  return {
    [r.market === 'cn-a' ? 'price_rmb' : 'price']: r.price,
    count: r.count,
    ...stats(r),
    liquidity: r.liquidity,
    updated_at: iso(r.observed_at),
    phase: r.phase,
  };
}

/** `<name> (<phase>)` for phase items, the spec's catalogue key. */
export const catalogueKey = (name: string, phase: string): string => (phase ? `${name} (${phase})` : name);

export class ReadModel {
  constructor(private readonly pool: Pool) {}

  async marketListings(market: MarketSlug): Promise<Record<string, unknown>[]> {
    const { rows } = await this.pool.query<ListingRow>(
      `${LISTING_SELECT} AND c.market = $1 ORDER BY c.market_hash_name, c.phase`,
      [market],
    );
    return rows.map(listingRow);
  }

  /** The catalogue map of one marketplace: key → that marketplace's object. */
  async catalogue(market: MarketSlug): Promise<Map<string, Record<string, unknown>>> {
    const { rows } = await this.pool.query<ListingRow>(`${LISTING_SELECT} AND c.market = $1`, [market]);
    return new Map(rows.map((r) => [catalogueKey(r.market_hash_name, r.phase), catalogueEntry(r)]));
  }

  async search(name: string, markets: readonly string[]): Promise<Record<string, unknown>[]> {
    const { rows } = await this.pool.query<ListingRow>(
      `${LISTING_SELECT} AND c.market_hash_name = $1 AND c.market = ANY($2) ORDER BY c.phase, c.market`,
      [name, markets],
    );
    return rows.map((r) => ({ market: r.market, ...listingRow(r) }));
  }

  async buyorders(market: MarketSlug): Promise<Record<string, unknown>[]> {
    const { rows } = await this.pool.query<{
      id: string;
      market_hash_name: string;
      phase: string;
      tier: string;
      price: string | null;
      blue_price: string | null;
      count: number;
      template_id: string | null;
      type_id: string | null;
      observed_at: Date;
    }>(
      `SELECT item_id(market_hash_name, phase || chr(31) || tier) AS id,
              market_hash_name, phase, tier, price, blue_price, count, template_id, type_id, observed_at
       FROM buyorders_current WHERE market = $1 AND (price IS NOT NULL OR blue_price IS NOT NULL)
       ORDER BY market_hash_name, phase, tier`,
      [market],
    );
    return rows.map((r) => {
      const label = r.tier || r.phase;
      const name = label ? `${r.market_hash_name} (${label})` : r.market_hash_name;
      return {
        id: Number(r.id),
        market_hash_name: name,
        templateId: r.template_id === null ? null : Number(r.template_id),
        buyorder_price: r.price,
        ...(market === 'cn-a' ? { blue_buyorder_price: r.blue_price } : {}),
        phase: label,
        typeId: r.type_id === null ? null : Number(r.type_id),
        updated_at: iso(r.observed_at),
        count: r.count,
      };
    });
  }
}

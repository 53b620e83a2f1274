/**
 * Queries of the read model, shaped as the spec's rows (section 2). Decimal values stay strings
 * from PostgreSQL `numeric` to JSON; stattrak/souvenir are 0/1; times are `…sssZ` strings.
 */
import { catalogueKey, MARKETS, templateIdFieldName, type MarketSlug, type PhaseOrNone } from '@skinprices/domain';
import type { Pool } from '@skinprices/store';
import { CatalogueShard } from './catalogue.js';
import { ChangeLog } from './changes/log.js';

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);
/** Marketplaces with daily closes in listing_daily (listing ones and the history-only one). */
const DAILY_MARKETS: readonly string[] = MARKETS.filter(
  (m) => m.capabilities.includes('listings') || m.capabilities.includes('history'),
).map((m) => m.slug);
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
  is_outlier: boolean | null;
  confidence: string | null;
}

const LISTING_SELECT = `
  SELECT item_id(c.market_hash_name, c.phase) AS id, c.market, c.market_hash_name, c.phase, c.price, c.count,
         c.exterior, c.stattrak, c.souvenir, c.template_id, c.item_page_url, c.observed_at,
         c.change_24h, c.change_7d, c.change_30d, c.change_90d, c.avg_7d, c.avg_30d, c.avg_90d,
         l.score AS liquidity, c.is_outlier, c.confidence
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

/**
 * The outlier guard's verdict (materializer migrations/0007), beyond the spec's fields: whether
 * the price is more than 5× away from every reference, and how far to trust it (0..1).
 */
const quality = (r: ListingRow) => ({
  is_outlier: r.is_outlier,
  confidence: r.confidence === null ? null : r.confidence,
});

/** The catalogue item's per-marketplace object (2.6). */
function catalogueEntry(r: ListingRow): Record<string, unknown> {
  return {
    [r.market === 'cn-a' ? 'price_rmb' : 'price']: r.price,
    count: r.count,
    ...stats(r),
    liquidity: r.liquidity,
    updated_at: iso(r.observed_at),
    phase: r.phase,
    ...quality(r),
  };
}

/**
 * A point of GET /v1/prices/{market}/history. `price` and `count` are the close and its listing
 * count, as before candles; open, high and low come from every priced observation of the bucket
 * (NULL: none was priced, the history-only marketplace's closes, or a bucket written before
 * candles were recorded). `close` repeats `price` so that a candle reads on its own.
 */
export interface HistoryPoint {
  date?: string;
  time?: string;
  price: string | null;
  count: number | null;
  open: string | null;
  high: string | null;
  low: string | null;
  close: string | null;
}

type Candle = { open: string | null; high: string | null; low: string | null };

export interface FreshnessRow {
  market: string;
  kind: string;
  last_outcome: string;
  /** Upstream time (the marketplace's clock) of the last cycle and of the last complete one. */
  last_finished_at: Date;
  last_complete_at: Date | null;
  consecutive_failed: number;
  /** Wall clock when the read model applied the last marker and the last complete one. */
  last_applied_at: Date | null;
  last_complete_applied_at: Date | null;
}

export interface MaterializerRow {
  member_id: string;
  group_id: string;
  host: string;
  pid: number;
  state: string;
  started_at: Date;
  heartbeat_at: Date;
  last_batch_at: Date | null;
  /** bigint as text (pg returns int8 as a string). */
  lag: string | null;
}

export class ReadModel {
  constructor(private readonly pool: Pool) {}

  /** The committed-change log on the same pool (the change feed's reads: changes/log.ts). */
  changeLog(): ChangeLog {
    return new ChangeLog(this.pool);
  }

  async marketListings(market: MarketSlug): Promise<Record<string, unknown>[]> {
    const { rows } = await this.pool.query<ListingRow>(
      `${LISTING_SELECT} AND c.market = $1 ORDER BY c.market_hash_name, c.phase`,
      [market],
    );
    return rows.map(listingRow);
  }

  /** The catalogue of one marketplace (2.6), as bytes: key → that marketplace's object. */
  async catalogue(market: MarketSlug): Promise<CatalogueShard> {
    const { rows } = await this.pool.query<ListingRow>(`${LISTING_SELECT} AND c.market = $1`, [market]);
    return CatalogueShard.from(
      rows.map((r) => [
        catalogueKey({ marketHashName: r.market_hash_name, phase: r.phase as PhaseOrNone }),
        JSON.stringify(catalogueEntry(r)),
      ]),
    );
  }

  async search(name: string, markets: readonly string[]): Promise<Record<string, unknown>[]> {
    const { rows } = await this.pool.query<ListingRow>(
      `${LISTING_SELECT} AND c.market_hash_name = $1 AND c.market = ANY($2) ORDER BY c.phase, c.market`,
      [name, markets],
    );
    return rows.map((r) => ({ market: r.market, ...listingRow(r), ...quality(r) }));
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

  async history(market: string, name: string, phase: string, resolution: 'daily' | 'hourly'): Promise<HistoryPoint[]> {
    if (resolution === 'daily') {
      const { rows } = await this.pool.query<{ day: string; close: string; count: number | null } & Candle>(
        `SELECT day::text AS day, close, count, open, high, low FROM listing_daily
         WHERE market = $1 AND market_hash_name = $2 AND phase = $3 ORDER BY day`,
        [market, name, phase],
      );
      return rows.map((r) => ({
        date: r.day,
        price: r.close,
        count: r.count,
        open: r.open,
        high: r.high,
        low: r.low,
        close: r.close,
      }));
    }
    const { rows } = await this.pool.query<{ hour: Date; price: string | null; count: number | null } & Candle>(
      `SELECT hour, price, count, open, high, low FROM listing_hourly
       WHERE market = $1 AND market_hash_name = $2 AND phase = $3 ORDER BY hour`,
      [market, name, phase],
    );
    return rows.map((r) => ({
      time: r.hour.toISOString(),
      price: r.price,
      count: r.count,
      open: r.open,
      high: r.high,
      low: r.low,
      close: r.price,
    }));
  }

  /**
   * Whether the read model has ever seen an item of this name (any phase, any marketplace): listed
   * now or once (item_markets keeps every item ever priced), or with a daily close anywhere (the
   * history-only marketplace imports closes of items nobody lists). Index lookups only; history
   * asks it only when it found no points, to tell a typo (404) from a quiet item.
   */
  async knowsItem(name: string): Promise<boolean> {
    const { rows } = await this.pool.query<{ known: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM listings_current WHERE market_hash_name = $1)
           OR EXISTS (SELECT 1 FROM item_markets WHERE market_hash_name = $1)
           OR EXISTS (SELECT 1 FROM listing_daily WHERE market = ANY($2) AND market_hash_name = $1) AS known`,
      [name, DAILY_MARKETS],
    );
    return rows[0]?.known === true;
  }

  async store(market: string, name?: string): Promise<Record<string, unknown>[]> {
    const { rows } = await this.pool.query<{
      market_hash_name: string;
      phase: string;
      price: string | null;
      count: number | null;
      change_24h: string | null;
      change_7d: string | null;
      observed_at: Date | null;
      asks: unknown;
      bids: unknown;
      book_at: Date | null;
    }>(
      `SELECT coalesce(c.market_hash_name, b.market_hash_name) AS market_hash_name, coalesce(c.phase, b.phase) AS phase,
              c.price, c.count, c.change_24h, c.change_7d, c.observed_at, b.asks, b.bids, b.observed_at AS book_at
       FROM (SELECT * FROM listings_current WHERE market = $1 AND price IS NOT NULL) c
       FULL JOIN (SELECT * FROM order_book_current WHERE market = $1) b USING (market_hash_name, phase)
       WHERE $2::text IS NULL OR coalesce(c.market_hash_name, b.market_hash_name) = $2
       ORDER BY 1, 2`,
      [market, name ?? null],
    );
    return rows.map((r) => ({
      market_hash_name: r.market_hash_name,
      phase: r.phase,
      price: r.price,
      count: r.count ?? 0,
      change_24h: r.change_24h,
      change_7d: r.change_7d,
      updated_at: iso(r.observed_at ?? r.book_at),
      order_book: r.asks === null ? null : { asks: r.asks, bids: r.bids, updated_at: iso(r.book_at) },
    }));
  }

  async floatRanged(market?: string): Promise<Record<string, unknown>[]> {
    const { rows } = await this.pool.query<{
      market: string;
      market_hash_name: string;
      phase: string;
      float_min: string;
      float_max: string;
      first_price: string | null;
      fifth_price: string | null;
      count: number;
      phase_labels: Record<string, string>;
      observed_at: Date;
    }>(
      `SELECT market, market_hash_name, phase, float_min::text, float_max::text, first_price, fifth_price, count,
              phase_labels, observed_at
       FROM float_ranged_current WHERE $1::text IS NULL OR market = $1
       ORDER BY market, market_hash_name, phase, float_min`,
      [market ?? null],
    );
    return rows.map((r) => ({
      market: r.market,
      market_hash_name: r.market_hash_name,
      phase: r.phase,
      float_range: { min: r.float_min, max: r.float_max },
      first_price: r.first_price,
      fifth_price: r.fifth_price,
      count: r.count,
      phase_labels: r.phase_labels,
      updated_at: iso(r.observed_at),
    }));
  }

  async floatBuyorders(market: string, name?: string, float?: string): Promise<Record<string, unknown>[]> {
    const { rows } = await this.pool.query<{
      order_id: string;
      market_hash_name: string;
      phase: string;
      price: string;
      quantity: number;
      float_min: string | null;
      float_max: string | null;
      condition: string | null;
      observed_at: Date;
    }>(
      `SELECT order_id, market_hash_name, phase, price, quantity, float_min::text, float_max::text, condition, observed_at
       FROM float_buyorders_current
       WHERE market = $1 AND ($2::text IS NULL OR market_hash_name = $2)
         AND ($3::numeric IS NULL OR (float_min <= $3 AND (float_max IS NULL OR $3 < float_max)))
       ORDER BY market_hash_name, phase, price DESC, order_id`,
      [market, name ?? null, float ?? null],
    );
    return rows.map((r) => ({
      order_id: r.order_id,
      market_hash_name: r.market_hash_name,
      phase: r.phase,
      price: r.price,
      quantity: r.quantity,
      float_range: { min: r.float_min, max: r.float_max },
      condition: r.condition,
      updated_at: iso(r.observed_at),
    }));
  }

  async sales(name: string, since: Date, until: Date, markets: readonly string[]): Promise<Record<string, unknown>[]> {
    const { rows } = await this.pool.query<{
      market: string;
      sale_id: string;
      market_hash_name: string;
      phase: string;
      currency: string;
      price: string;
      sold_at: Date;
      float_value: string | null;
      paint_index: number | null;
      paint_seed: number | null;
      stickers: unknown[];
      charms: unknown[];
    }>(
      `SELECT market, sale_id, market_hash_name, phase, currency, price, sold_at, float_value::text, paint_index,
              paint_seed, stickers, charms
       FROM sales WHERE market_hash_name = $1 AND sold_at >= $2 AND sold_at < $3 AND market = ANY($4)
       ORDER BY sold_at DESC, market, sale_id`,
      [name, since, until, markets],
    );
    // Charms are "keychains" to users (the spec and the export name them so).
    return rows.map(({ charms, sold_at, ...r }) => ({ ...r, sold_at: sold_at.toISOString(), keychains: charms }));
  }

  async marketCap(resolution: 'daily' | 'hourly', since: Date): Promise<Record<string, unknown>[]> {
    if (resolution === 'hourly') {
      const { rows } = await this.pool.query<{ hour: Date; market_cap: string; items: number; cleaned: boolean }>(
        'SELECT hour, market_cap, items, cleaned FROM market_cap_hourly WHERE hour >= $1 ORDER BY hour',
        [since],
      );
      return rows.map((r) => ({
        time: r.hour.toISOString(),
        market_cap_rmb: r.market_cap,
        items: r.items,
        cleaned: r.cleaned,
      }));
    }
    const { rows } = await this.pool.query<{ day: string; market_cap: string; items: number; cleaned: boolean }>(
      `SELECT day::text AS day, market_cap, items, cleaned FROM market_cap_daily
       WHERE day >= ($1::timestamptz AT TIME ZONE 'UTC')::date ORDER BY day`,
      [since],
    );
    return rows.map((r) => ({ date: r.day, market_cap_rmb: r.market_cap, items: r.items, cleaned: r.cleaned }));
  }

  /** The read model's clock: the data's "now" (a simulator may run accelerated). */
  async clock(): Promise<Date | null> {
    const { rows } = await this.pool.query<{ now: Date }>('SELECT now FROM read_model_clock');
    return rows[0]?.now ?? null;
  }

  async freshness(): Promise<FreshnessRow[]> {
    const { rows } = await this.pool.query<FreshnessRow>(
      `SELECT market, kind, last_outcome, last_finished_at, last_complete_at, consecutive_failed,
              last_applied_at, last_complete_applied_at
       FROM market_freshness ORDER BY market, kind`,
    );
    return rows;
  }

  /** The database's clock: every wall time of the status tables was written with it. */
  async dbNow(): Promise<Date> {
    const { rows } = await this.pool.query<{ now: Date }>('SELECT now()');
    return (rows[0] as { now: Date }).now;
  }

  /** Every materializer process's heartbeat row (see the materializer's migration 0003). */
  async materializers(): Promise<MaterializerRow[]> {
    const { rows } = await this.pool.query<MaterializerRow>(
      `SELECT member_id, group_id, host, pid, state, started_at, heartbeat_at, last_batch_at, lag::text AS lag
       FROM materializer_heartbeat ORDER BY group_id, member_id`,
    );
    return rows;
  }

  /** Dead letters per topic and reason. */
  async deadLetters(): Promise<{ topic: string; reason: string; count: number; last_at: Date }[]> {
    const { rows } = await this.pool.query<{ topic: string; reason: string; count: number; last_at: Date }>(
      `SELECT topic, reason, count(*)::int AS count, max(received_at) AS last_at
       FROM dead_letters GROUP BY topic, reason ORDER BY topic, reason`,
    );
    return rows;
  }
}

/**
 * The endpoints' reads of the read model: prices, the catalogue, buy orders, history, order books,
 * float-ranged prices, sales, the market cap and the sales export, shaped as the spec's rows
 * (readmodel-rows.ts). ReadModel (readmodel.ts) answers with these.
 */
import { catalogueKey, getMarket, MARKETS, type MarketSlug, type PhaseOrNone } from '@skinprices/domain';
import { sql } from 'kysely';
import { CatalogueShard } from './catalogue.js';
import { catalogueEntry, int, listingRow, putQuality, type ReadDb } from './readmodel-rows.js';
import type { CapPoint, FloatBuyorderRow, FloatRangedRow, HistoryPoint, Sale, StoreRow } from './routes/schemas.js';

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);
/** Marketplaces with daily closes (listing ones and the history-only one). */
const DAILY_MARKETS: readonly string[] = MARKETS.filter(
  (m) => m.capabilities.includes('listings') || m.capabilities.includes('history'),
).map((m) => m.slug);
type Level = NonNullable<StoreRow['order_book']>['asks'][number];

/** Priced listings (a row without a price is an item not listed now). */
function listings(db: ReadDb) {
  return db.selectFrom('api_listings_v1').selectAll().where('price', 'is not', null);
}

export async function marketListings(db: ReadDb, market: MarketSlug): Promise<Record<string, unknown>[]> {
  const rows = await listings(db).where('market', '=', market).orderBy('market_hash_name').orderBy('phase').execute();
  return rows.map(listingRow);
}

/** The catalogue of one marketplace (2.6), as bytes: key → that marketplace's object. */
export async function catalogue(db: ReadDb, market: MarketSlug): Promise<CatalogueShard> {
  const rows = await listings(db).where('market', '=', market).execute();
  return CatalogueShard.from(
    rows.map((r) => [
      catalogueKey({ marketHashName: r.market_hash_name, phase: r.phase as PhaseOrNone }),
      JSON.stringify(catalogueEntry(r)),
    ]),
  );
}

export async function search(db: ReadDb, name: string, markets: readonly string[]): Promise<Record<string, unknown>[]> {
  const rows = await listings(db)
    .where('market_hash_name', '=', name)
    .where('market', '=', sql<string>`ANY(${[...markets]})`)
    .orderBy('phase')
    .orderBy('market')
    .execute();
  return rows.map((r) => putQuality(Object.assign({ market: r.market }, listingRow(r)), r));
}

export async function buyorders(db: ReadDb, market: MarketSlug): Promise<Record<string, unknown>[]> {
  const blue = getMarket(market).blueBuyorderPrice;
  const rows = await db
    .selectFrom('api_buyorders_v1')
    .selectAll()
    .where('market', '=', market)
    .where((eb) => eb.or([eb('price', 'is not', null), eb('blue_price', 'is not', null)]))
    .orderBy('market_hash_name')
    .orderBy('phase')
    .orderBy('tier')
    .execute();
  return rows.map((r) => {
    const label = r.tier || r.phase;
    return {
      id: int(r.id),
      market_hash_name: label ? `${r.market_hash_name} (${label})` : r.market_hash_name,
      templateId: int(r.template_id),
      buyorder_price: r.price,
      ...(blue ? { blue_buyorder_price: r.blue_price } : {}),
      phase: label,
      typeId: int(r.type_id),
      updated_at: r.observed_at.toISOString(),
      count: r.count,
    };
  });
}

export async function history(
  db: ReadDb,
  market: string,
  name: string,
  phase: string,
  resolution: 'daily' | 'hourly',
): Promise<HistoryPoint[]> {
  if (resolution === 'daily') {
    const rows = await db
      .selectFrom('api_daily_v1')
      .select(['day', 'close', 'count', 'open', 'high', 'low'])
      .where('market', '=', market)
      .where('market_hash_name', '=', name)
      .where('phase', '=', phase)
      .orderBy('day')
      .execute();
    return rows.map(({ day, close, ...r }) => ({ date: day, price: close, ...r, close }));
  }
  const rows = await db
    .selectFrom('api_hourly_v1')
    .select(['hour', 'price', 'count', 'open', 'high', 'low'])
    .where('market', '=', market)
    .where('market_hash_name', '=', name)
    .where('phase', '=', phase)
    .orderBy('hour')
    .execute();
  return rows.map(({ hour, ...r }) => ({ time: hour.toISOString(), ...r, close: r.price }));
}

/**
 * Whether the read model has ever seen an item of this name (any phase, any marketplace): listed
 * now or once (item_markets keeps every item ever priced), or with a daily close anywhere (the
 * history-only marketplace imports closes of items nobody lists). Index lookups only; history
 * asks it only when it found no points, to tell a typo (404) from a quiet item.
 */
export async function knowsItem(db: ReadDb, name: string): Promise<boolean> {
  const row = await db
    .selectNoFrom((eb) => [
      eb
        .or([
          eb.exists(eb.selectFrom('api_listings_v1').select('market').where('market_hash_name', '=', name)),
          eb.exists(eb.selectFrom('api_item_markets_v1').select('market').where('market_hash_name', '=', name)),
          eb.exists(
            eb
              .selectFrom('api_daily_v1')
              .select('market')
              .where('market', '=', sql<string>`ANY(${[...DAILY_MARKETS]})`)
              .where('market_hash_name', '=', name),
          ),
        ])
        .as('known'),
    ])
    .executeTakeFirst();
  return row?.known === true;
}

export async function store(db: ReadDb, market: string, name?: string): Promise<StoreRow[]> {
  const priced = listings(db).where('market', '=', market);
  const books = db.selectFrom('api_order_books_v1').selectAll().where('market', '=', market);
  const rows = await db
    .selectFrom(priced.as('c'))
    .fullJoin(books.as('b'), (j) =>
      j.onRef('c.market_hash_name', '=', 'b.market_hash_name').onRef('c.phase', '=', 'b.phase'),
    )
    .select((eb) => [
      eb.fn.coalesce('c.market_hash_name', 'b.market_hash_name').as('market_hash_name'),
      eb.fn.coalesce('c.phase', 'b.phase').as('phase'),
      'c.price',
      'c.count',
      'c.change_24h',
      'c.change_7d',
      'c.changed_at',
      'b.asks',
      'b.bids',
      'b.observed_at as book_at',
    ])
    .$if(name !== undefined, (q) =>
      q.where((eb) => eb(eb.fn.coalesce('c.market_hash_name', 'b.market_hash_name'), '=', name as string)),
    )
    .orderBy(['market_hash_name', 'phase'])
    .execute();
  return rows.map((r) => ({
    market_hash_name: r.market_hash_name as string,
    phase: r.phase as string,
    price: r.price,
    count: r.count ?? 0,
    change_24h: r.change_24h,
    change_7d: r.change_7d,
    updated_at: iso(r.changed_at ?? r.book_at),
    order_book:
      r.asks === null ? null : { asks: r.asks as Level[], bids: (r.bids ?? []) as Level[], updated_at: iso(r.book_at) },
  }));
}

export async function floatRanged(db: ReadDb, market?: string): Promise<FloatRangedRow[]> {
  const rows = await db
    .selectFrom('api_float_ranged_v1')
    .selectAll()
    .$if(market !== undefined, (q) => q.where('market', '=', market as string))
    .orderBy(['market', 'market_hash_name', 'phase', 'float_min'])
    .execute();
  return rows.map((r) => ({
    market: r.market,
    market_hash_name: r.market_hash_name,
    phase: r.phase,
    float_range: { min: r.float_min, max: r.float_max },
    first_price: r.first_price,
    fifth_price: r.fifth_price,
    count: r.count,
    phase_labels: r.phase_labels as Record<string, string>,
    updated_at: r.observed_at.toISOString(),
  }));
}

export async function floatBuyorders(
  db: ReadDb,
  market: string,
  name?: string,
  float?: string,
): Promise<FloatBuyorderRow[]> {
  const rows = await db
    .selectFrom('api_float_buyorders_v1')
    .selectAll()
    .where('market', '=', market)
    .$if(name !== undefined, (q) => q.where('market_hash_name', '=', name as string))
    .$if(float !== undefined, (q) =>
      q.where((eb) =>
        eb.and([
          // A bound an order does not set (null) does not exclude any float.
          eb.or([eb('float_min', 'is', null), eb('float_min', '<=', sql<string>`${float}::numeric`)]),
          eb.or([eb('float_max', 'is', null), eb('float_max', '>', sql<string>`${float}::numeric`)]),
        ]),
      ),
    )
    .orderBy(['market_hash_name', 'phase'])
    .orderBy('price', 'desc')
    .orderBy('order_id')
    .execute();
  return rows.map((r) => ({
    order_id: r.order_id,
    market_hash_name: r.market_hash_name,
    phase: r.phase,
    price: r.price,
    quantity: r.quantity,
    float_range: { min: r.float_min, max: r.float_max },
    condition: r.condition,
    updated_at: r.observed_at.toISOString(),
  }));
}

export async function sales(
  db: ReadDb,
  name: string,
  since: Date,
  until: Date,
  markets: readonly string[],
): Promise<Sale[]> {
  const rows = await db
    .selectFrom('api_sales_v1')
    .selectAll()
    .where('market_hash_name', '=', name)
    .where('sold_at', '>=', since)
    .where('sold_at', '<', until)
    .where('market', '=', sql<string>`ANY(${[...markets]})`)
    .orderBy('sold_at', 'desc')
    .orderBy(['market', 'sale_id'])
    .execute();
  return rows.map((r) => ({
    ...r,
    sold_at: r.sold_at.toISOString(),
    stickers: r.stickers as Sale['stickers'],
    keychains: r.keychains as Sale['keychains'],
  }));
}

export async function marketCap(db: ReadDb, resolution: 'daily' | 'hourly', since: Date): Promise<CapPoint[]> {
  if (resolution === 'hourly') {
    const rows = await db
      .selectFrom('api_market_cap_hourly_v1')
      .selectAll()
      .where('hour', '>=', since)
      .orderBy('hour')
      .execute();
    return rows.map((r) => ({
      time: r.hour.toISOString(),
      market_cap_rmb: r.market_cap,
      items: r.items,
      cleaned: r.cleaned,
    }));
  }
  const rows = await db
    .selectFrom('api_market_cap_daily_v1')
    .selectAll()
    // Days are 'YYYY-MM-DD' text in the contract: text order is date order.
    .where('day', '>=', since.toISOString().slice(0, 10))
    .orderBy('day')
    .execute();
  return rows.map((r) => ({ date: r.day, market_cap_rmb: r.market_cap, items: r.items, cleaned: r.cleaned }));
}

/**
 * The newest 24 h sales export the materializer built (packages/exports: the materializer owns
 * building and storing them; the API only serves).
 */
export async function latestExport(db: ReadDb): Promise<{ windowStart: Date; windowEnd: Date; bytes: Buffer } | null> {
  const row = await db
    .selectFrom('api_sales_exports_v1')
    .select(['window_start', 'window_end', 'bytes'])
    .orderBy('window_end', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row ? { windowStart: row.window_start, windowEnd: row.window_end, bytes: row.bytes } : null;
}

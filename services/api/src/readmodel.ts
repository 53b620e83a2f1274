/**
 * Queries of the read model, shaped as the spec's rows (section 2). They read only the views of
 * the read contract (packages/store read-contract.ts, created by the materializer's migration
 * 0010), through Kysely typed by it: a column renamed or retyped there fails this file's build.
 * Decimal values stay strings from PostgreSQL `numeric` to JSON; stattrak/souvenir are 0/1;
 * times are `…sssZ` strings.
 */
import {
  catalogueKey,
  getMarket,
  identityKey,
  MARKETS,
  readTag,
  type MarketSlug,
  type PhaseOrNone,
} from '@skinprices/domain';
import { MIGRATION_RUNNING_SQL, type Pool, type ReadContractV1 } from '@skinprices/store';
import { Kysely, PostgresDialect, sql, type Selectable } from 'kysely';
import { CatalogueShard } from './catalogue.js';
import { ChangeLog } from './changes/log.js';
import { continues, formatPosition, parsePosition, type JournalState } from './changes/position.js';
import type { FieldChange, RowChange } from './list-body.js';
import type {
  CapPoint,
  FloatBuyorderRow,
  FloatRangedRow,
  HistoryPoint,
  Sale,
  StoreRow,
  Stats,
} from './routes/schemas.js';

/** The journal's tag of liquidity scores (materializer migration 0019). */
const SCORES_TAG = 'scores';

/** A row's key in a patched list body (list-body.ts). */
const listKey = (name: string, phase: string) => identityKey({ marketHashName: name, phase: phase as PhaseOrNone });

/** Changed rows placed by a patch at most: beyond, the rows were most of a cycle and a rebuild is as cheap. */
const MAX_PLACED = 2_000;

/**
 * For changed priced rows, the key of the priced row before each in the list's order, read in the
 * caller's snapshot (an index step back per row): what lets a patch place a row the list does not
 * hold yet. Undefined when there are too many to ask for.
 */
async function predecessors(
  trx: ReadDb,
  market: MarketSlug,
  rows: readonly { market_hash_name: string; phase: string; price: string | null }[],
): Promise<Map<string, string | null> | undefined> {
  const priced = rows.filter((r) => r.price !== null);
  if (priced.length === 0 || priced.length > MAX_PLACED) return undefined;
  const { rows: found } = await sql<{
    name: string;
    phase: string;
    prev_name: string | null;
    prev_phase: string | null;
  }>`
    SELECT c.name, c.phase, p.market_hash_name AS prev_name, p.phase AS prev_phase
    FROM unnest(${priced.map((r) => r.market_hash_name)}::text[], ${priced.map((r) => r.phase)}::text[]) AS c(name, phase)
    LEFT JOIN LATERAL (
      SELECT v.market_hash_name, v.phase FROM api_listings_v1 v
      WHERE v.market = ${market} AND v.price IS NOT NULL AND (v.market_hash_name, v.phase) < (c.name, c.phase)
      ORDER BY v.market_hash_name DESC, v.phase DESC
      LIMIT 1
    ) p ON true`.execute(trx);
  return new Map(
    found.map((f) => [
      listKey(f.name, f.phase),
      f.prev_name === null ? null : listKey(f.prev_name, f.prev_phase as string),
    ]),
  );
}

/**
 * Runs `read` in one read-only repeatable-read transaction with the change journal's state as that
 * transaction sees it: everything the read returns is as of the journal's head (positions become
 * visible in commit order, so no change at or below the head is missing from the read).
 */
function atPosition<T>(db: ReadDb, read: (trx: ReadDb, state: JournalState) => Promise<T>): Promise<T> {
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute(async (trx) => read(trx, await journalState(trx)));
}

async function journalState(db: ReadDb): Promise<JournalState> {
  const { rows } = await sql<{ epoch: string; pruned_through: string; head: string }>`
    SELECT s.epoch, s.pruned_through,
           coalesce((SELECT max(pos) FROM api_read_changes_v1), s.pruned_through) AS head
    FROM api_read_change_state_v1 s`.execute(db);
  const r = rows[0];
  // A schema migrated before 0019 ran has no row; a migration under way is retried by the caller.
  if (!r) throw new Error('the read model has no change journal (materializer migration 0019)');
  return { epoch: r.epoch, prunedThrough: BigInt(r.pruned_through), head: BigInt(r.head) };
}

/**
 * The keys (name, phase) that journal entries of `tag` after `since` name, or undefined when the
 * list must be read whole: the journal no longer reaches back to `since`, or an entry of the tag
 * names no rows.
 */
async function changedKeys(
  trx: ReadDb,
  state: JournalState,
  tag: string,
  since: string,
): Promise<{ names: string[]; phases: string[] } | undefined> {
  const from = parsePosition(since);
  if (!continues(from, state)) return undefined;
  const { rows } = await sql<{ name: string | null; phase: string | null; whole: boolean }>`
    SELECT u.name, u.phase, r.names IS NULL AS whole
    FROM api_read_changes_v1 r
    LEFT JOIN LATERAL unnest(r.names, r.phases) AS u(name, phase) ON true
    WHERE r.tag = ${tag} AND r.pos > ${from.pos.toString()}::bigint`.execute(trx);
  const seen = new Set<string>();
  const names: string[] = [];
  const phases: string[] = [];
  for (const r of rows) {
    if (r.whole) return undefined;
    const key = listKey(r.name as string, r.phase as string);
    if (seen.has(key)) continue;
    seen.add(key);
    names.push(r.name as string);
    phases.push(r.phase as string);
  }
  return { names, phases };
}

/** The read model as the API may see it. */
export type ReadDb = Kysely<ReadContractV1>;
const readDb = (pool: Pool): ReadDb => new Kysely<ReadContractV1>({ dialect: new PostgresDialect({ pool }) });

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);
/** Marketplaces with daily closes (listing ones and the history-only one). */
const DAILY_MARKETS: readonly string[] = MARKETS.filter(
  (m) => m.capabilities.includes('listings') || m.capabilities.includes('history'),
).map((m) => m.slug);
const bit = (b: boolean): 0 | 1 => (b ? 1 : 0);
const int = (v: string | null): number | null => (v === null ? null : Number(v));

type ListingRow = Selectable<ReadContractV1['api_listings_v1']>;
type Level = NonNullable<StoreRow['order_book']>['asks'][number];

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
function listingRow(r: ListingRow): Record<string, unknown> {
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

/**
 * When the marketplace's listings were last confirmed complete (its last complete cycle's end,
 * upstream time), as the caller's transaction sees it; null: never.
 */
async function confirmedAt(trx: ReadDb, market: string): Promise<Date | null> {
  const row = await trx
    .selectFrom('api_freshness_v1')
    .select('last_complete_at')
    .where('market', '=', market)
    .where('kind', '=', 'LISTINGS')
    .executeTakeFirst();
  return row?.last_complete_at ?? null;
}

/** A listing row as a list body's row: its key and JSON, JSON null when it has no price. */
function rowChange(r: ListingRow): RowChange {
  const key = listKey(r.market_hash_name, r.phase);
  return { key, json: r.price === null ? null : JSON.stringify(listingRow(r)) };
}

/**
 * The outlier guard's verdict (materializer migrations/0007), beyond the spec's fields: whether
 * the price is more than 5× away from every reference, and how far to trust it (0..1).
 */
function putQuality(o: Record<string, unknown>, r: ListingRow): Record<string, unknown> {
  o.is_outlier = r.is_outlier;
  o.confidence = r.confidence;
  return o;
}

/** The catalogue item's per-marketplace object (2.6); built as listingRow is. */
function catalogueEntry(r: ListingRow): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  o[getMarket(r.market).priceField] = r.price;
  o.count = r.count;
  putStats(o, r);
  o.liquidity = r.liquidity;
  o.updated_at = r.changed_at.toISOString();
  o.phase = r.phase;
  return putQuality(o, r);
}

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
  private readonly db: ReadDb;

  constructor(pool: Pool) {
    this.db = readDb(pool);
  }

  /** The committed-change log (the change feed's reads: changes/log.ts). */
  changeLog(): ChangeLog {
    return new ChangeLog(this.db);
  }

  /** Priced listings (a row without a price is an item not listed now). */
  private listings() {
    return this.db.selectFrom('api_listings_v1').selectAll().where('price', 'is not', null);
  }

  async marketListings(market: MarketSlug): Promise<Record<string, unknown>[]> {
    const rows = await this.listings()
      .where('market', '=', market)
      .orderBy('market_hash_name')
      .orderBy('phase')
      .execute();
    return rows.map(listingRow);
  }

  /**
   * One marketplace's price list for a patched body (list-body.ts): every priced row in list order,
   * and the change position they were read at (one repeatable-read transaction).
   */
  async listingRows(market: MarketSlug): Promise<{ position: string; rows: RowChange[]; confirmedAt: Date | null }> {
    return atPosition(this.db, async (trx, state) => {
      const rows = await trx
        .selectFrom('api_listings_v1')
        .selectAll()
        .where('market', '=', market)
        .where('price', 'is not', null)
        .orderBy('market_hash_name')
        .orderBy('phase')
        .execute();
      return {
        position: formatPosition({ epoch: state.epoch, pos: state.head }),
        rows: rows.map(rowChange),
        confirmedAt: await confirmedAt(trx, market),
      };
    });
  }

  /**
   * The rows of a marketplace's price list the change journal names since position `since` (JSON
   * null: no longer priced), each the list does not hold (`known`) with its place, and the position
   * they were read at; undefined when the journal no longer reaches back that far and the list
   * must be read whole. Index reads in proportion to what changed, nothing else.
   */
  async listingChanges(
    market: MarketSlug,
    since: string,
    /** Keys the caller's list holds: rows of theirs need no predecessor. */
    known: (key: string) => boolean,
  ): Promise<{ position: string; rows: RowChange[]; confirmedAt: Date | null } | undefined> {
    return atPosition(this.db, async (trx, state) => {
      const keys = await changedKeys(trx, state, readTag('LISTINGS', market), since);
      if (keys === undefined) return undefined;
      const position = formatPosition({ epoch: state.epoch, pos: state.head });
      const confirmed = await confirmedAt(trx, market);
      if (keys.names.length === 0) return { position, rows: [], confirmedAt: confirmed };
      const { rows } = await sql<ListingRow>`
        SELECT v.* FROM unnest(${keys.names}::text[], ${keys.phases}::text[]) AS k(name, phase)
        JOIN api_listings_v1 v ON v.market = ${market} AND v.market_hash_name = k.name AND v.phase = k.phase`.execute(
        trx,
      );
      const after = await predecessors(
        trx,
        market,
        rows.filter((r) => !known(listKey(r.market_hash_name, r.phase))),
      );
      return {
        position,
        confirmedAt: confirmed,
        rows: rows.map((r) => {
          const change = rowChange(r);
          if (change.json !== null && after?.has(change.key)) change.after = after.get(change.key) as string | null;
          return change;
        }),
      };
    });
  }

  /**
   * The items' liquidity scores the change journal names since position `since`, as the list
   * rows' `liquidity` field (null: the item has no score any more), and the position they were
   * read at. The score alone, for every marketplace's list (api_liquidity_v1), not the listing
   * rows. Where the journal no longer reaches back that far (scores quiet for longer than its
   * retention, a replay), every score: the lists take them as field changes, which drop what did
   * not change, instead of each reading its rows whole at once.
   */
  async liquidityScores(since: string): Promise<{ position: string; changes: FieldChange[] }> {
    return atPosition(this.db, async (trx, state) => {
      const keys = await changedKeys(trx, state, SCORES_TAG, since);
      if (keys === undefined) {
        const every = await trx
          .selectFrom('api_liquidity_v1')
          .select(['market_hash_name', 'phase', 'liquidity'])
          .execute();
        return {
          position: formatPosition({ epoch: state.epoch, pos: state.head }),
          changes: every.map((r) => ({
            key: listKey(r.market_hash_name, r.phase),
            fields: { liquidity: r.liquidity },
          })),
        };
      }
      const { rows } =
        keys.names.length === 0
          ? { rows: [] }
          : await sql<{ name: string; phase: string; liquidity: string | null }>`
              SELECT k.name, k.phase, v.liquidity
              FROM unnest(${keys.names}::text[], ${keys.phases}::text[]) AS k(name, phase)
              LEFT JOIN api_liquidity_v1 v ON v.market_hash_name = k.name AND v.phase = k.phase`.execute(trx);
      return {
        position: formatPosition({ epoch: state.epoch, pos: state.head }),
        changes: rows.map((r) => ({ key: listKey(r.name, r.phase), fields: { liquidity: r.liquidity } })),
      };
    });
  }

  /**
   * The tags of the changes committed after position `since` and the position read up to: what
   * readers of the read model must look at again. `tags` undefined: anything may have changed
   * (the first read, a journal that no longer reaches back to `since`, or another journal).
   */
  async changedTags(since?: string): Promise<{ position: string; tags?: string[] }> {
    return atPosition(this.db, async (trx, state) => {
      const position = formatPosition({ epoch: state.epoch, pos: state.head });
      if (since === undefined || !continues(parsePosition(since), state)) return { position };
      const from = parsePosition(since).pos;
      if (from >= state.head) return { position, tags: [] };
      const { rows } = await sql<{ tag: string }>`
        SELECT DISTINCT tag FROM api_read_changes_v1 WHERE pos > ${from.toString()}::bigint`.execute(trx);
      return { position, tags: rows.map((r) => r.tag) };
    });
  }

  /** The catalogue of one marketplace (2.6), as bytes: key → that marketplace's object. */
  async catalogue(market: MarketSlug): Promise<CatalogueShard> {
    const rows = await this.listings().where('market', '=', market).execute();
    return CatalogueShard.from(
      rows.map((r) => [
        catalogueKey({ marketHashName: r.market_hash_name, phase: r.phase as PhaseOrNone }),
        JSON.stringify(catalogueEntry(r)),
      ]),
    );
  }

  async search(name: string, markets: readonly string[]): Promise<Record<string, unknown>[]> {
    const rows = await this.listings()
      .where('market_hash_name', '=', name)
      .where('market', '=', sql<string>`ANY(${[...markets]})`)
      .orderBy('phase')
      .orderBy('market')
      .execute();
    return rows.map((r) => putQuality(Object.assign({ market: r.market }, listingRow(r)), r));
  }

  async buyorders(market: MarketSlug): Promise<Record<string, unknown>[]> {
    const blue = getMarket(market).blueBuyorderPrice;
    const rows = await this.db
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

  async history(market: string, name: string, phase: string, resolution: 'daily' | 'hourly'): Promise<HistoryPoint[]> {
    if (resolution === 'daily') {
      const rows = await this.db
        .selectFrom('api_daily_v1')
        .select(['day', 'close', 'count', 'open', 'high', 'low'])
        .where('market', '=', market)
        .where('market_hash_name', '=', name)
        .where('phase', '=', phase)
        .orderBy('day')
        .execute();
      return rows.map(({ day, close, ...r }) => ({ date: day, price: close, ...r, close }));
    }
    const rows = await this.db
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
  async knowsItem(name: string): Promise<boolean> {
    const row = await this.db
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

  async store(market: string, name?: string): Promise<StoreRow[]> {
    const priced = this.listings().where('market', '=', market);
    const books = this.db.selectFrom('api_order_books_v1').selectAll().where('market', '=', market);
    const rows = await this.db
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
        r.asks === null
          ? null
          : { asks: r.asks as Level[], bids: (r.bids ?? []) as Level[], updated_at: iso(r.book_at) },
    }));
  }

  async floatRanged(market?: string): Promise<FloatRangedRow[]> {
    const rows = await this.db
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

  async floatBuyorders(market: string, name?: string, float?: string): Promise<FloatBuyorderRow[]> {
    const rows = await this.db
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

  async sales(name: string, since: Date, until: Date, markets: readonly string[]): Promise<Sale[]> {
    const rows = await this.db
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

  async marketCap(resolution: 'daily' | 'hourly', since: Date): Promise<CapPoint[]> {
    if (resolution === 'hourly') {
      const rows = await this.db
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
    const rows = await this.db
      .selectFrom('api_market_cap_daily_v1')
      .selectAll()
      // Days are 'YYYY-MM-DD' text in the contract: text order is date order.
      .where('day', '>=', since.toISOString().slice(0, 10))
      .orderBy('day')
      .execute();
    return rows.map((r) => ({ date: r.day, market_cap_rmb: r.market_cap, items: r.items, cleaned: r.cleaned }));
  }

  /** Whether a migration is running (migrate.ts): a query that failed meanwhile may succeed shortly. */
  async migrating(): Promise<boolean> {
    const { rows } = await sql.raw<{ running: boolean }>(MIGRATION_RUNNING_SQL).execute(this.db);
    return rows[0]?.running === true;
  }

  /** The read model's clock: the data's "now" (a simulator may run accelerated). */
  async clock(): Promise<Date | null> {
    const row = await this.db.selectFrom('api_clock_v1').select('now').executeTakeFirst();
    return row?.now ?? null;
  }

  async freshness(): Promise<FreshnessRow[]> {
    return this.db
      .selectFrom('api_freshness_v1')
      .select([
        'market',
        'kind',
        'last_outcome',
        'last_finished_at',
        'last_complete_at',
        'consecutive_failed',
        'last_applied_at',
        'last_complete_applied_at',
      ])
      .orderBy(['market', 'kind'])
      .execute();
  }

  /** The database's clock: every wall time of the status tables was written with it. */
  async dbNow(): Promise<Date> {
    const row = await this.db.selectNoFrom(sql<Date>`now()`.as('now')).executeTakeFirstOrThrow();
    return row.now;
  }

  /** Every materializer process's heartbeat row (see the materializer's migration 0003). */
  async materializers(): Promise<MaterializerRow[]> {
    return this.db.selectFrom('api_materializers_v1').selectAll().orderBy(['group_id', 'member_id']).execute();
  }

  /**
   * The newest 24 h sales export the materializer built (packages/exports: the materializer owns
   * building and storing them; the API only serves).
   */
  async latestExport(): Promise<{ windowStart: Date; windowEnd: Date; bytes: Buffer } | null> {
    const row = await this.db
      .selectFrom('api_sales_exports_v1')
      .select(['window_start', 'window_end', 'bytes'])
      .orderBy('window_end', 'desc')
      .limit(1)
      .executeTakeFirst();
    return row ? { windowStart: row.window_start, windowEnd: row.window_end, bytes: row.bytes } : null;
  }

  /** Dead letters per topic and reason. */
  async deadLetters(): Promise<{ topic: string; reason: string; count: number; last_at: Date }[]> {
    return this.db
      .selectFrom('api_dead_letters_v1')
      .select((eb) => [
        'topic',
        'reason',
        sql<number>`count(*)::int`.as('count'),
        eb.fn.max('received_at').as('last_at'),
      ])
      .groupBy(['topic', 'reason'])
      .orderBy(['topic', 'reason'])
      .execute();
  }
}

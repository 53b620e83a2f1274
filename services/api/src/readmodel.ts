/**
 * The API's reads of the read model (ReadModel): the one object the routes, the status report and
 * the list caches are given. The queries are per area, each a function of the database:
 * readmodel-prices.ts (the endpoints' rows), readmodel-journal.ts (reads at a change-journal
 * position: patched lists, changed tags), readmodel-status.ts (the service's own status), with
 * listing rows shaped by readmodel-rows.ts. They read only the views of the read contract
 * (packages/store read-contract.ts, created by the materializer's migration 0010), through Kysely
 * typed by it: a column renamed or retyped there fails the build.
 */
import type { MarketSlug } from '@skinprices/domain';
import type { Pool, ReadContractV1 } from '@skinprices/store';
import { Kysely, PostgresDialect } from 'kysely';
import type { CatalogueShard } from './catalogue.js';
import { ChangeLog } from './changes/log.js';
import type { FieldChange, RowChange } from './list-segments.js';
import * as journal from './readmodel-journal.js';
import * as prices from './readmodel-prices.js';
import type { ReadDb } from './readmodel-rows.js';
import * as status from './readmodel-status.js';
import type { DatabaseRow, FreshnessRow, MaterializerRow } from './readmodel-status.js';
import type { CapPoint, FloatBuyorderRow, FloatRangedRow, HistoryPoint, Sale, StoreRow } from './routes/schemas.js';

const readDb = (pool: Pool): ReadDb => new Kysely<ReadContractV1>({ dialect: new PostgresDialect({ pool }) });

export class ReadModel {
  private readonly db: ReadDb;

  constructor(pool: Pool) {
    this.db = readDb(pool);
  }

  /** The committed-change log (the change feed's reads: changes/log.ts). */
  changeLog(): ChangeLog {
    return new ChangeLog(this.db);
  }

  marketListings(market: MarketSlug): Promise<Record<string, unknown>[]> {
    return prices.marketListings(this.db, market);
  }

  /** One marketplace's price list for a patched body, and the change position it was read at. */
  listingRows(market: MarketSlug): Promise<{ position: string; rows: RowChange[]; confirmedAt: Date | null }> {
    return journal.listingRows(this.db, market);
  }

  /** The rows of a marketplace's price list changed since position `since` (undefined: read it whole). */
  listingChanges(
    market: MarketSlug,
    since: string,
    /** Keys the caller's list holds: rows of theirs need no predecessor. */
    known: (key: string) => boolean,
  ): Promise<{ position: string; rows: RowChange[]; confirmedAt: Date | null } | undefined> {
    return journal.listingChanges(this.db, market, since, known);
  }

  /** The items' liquidity scores changed since position `since`, as the list rows' `liquidity` field. */
  liquidityScores(since: string): Promise<{ position: string; changes: FieldChange[] }> {
    return journal.liquidityScores(this.db, since);
  }

  /** The tags of the changes committed after position `since` (undefined: anything may have changed). */
  changedTags(since?: string): Promise<{ position: string; tags?: string[] }> {
    return journal.changedTags(this.db, since);
  }

  /** The catalogue of one marketplace (2.6), as bytes: key → that marketplace's object. */
  catalogue(market: MarketSlug): Promise<CatalogueShard> {
    return prices.catalogue(this.db, market);
  }

  search(name: string, markets: readonly string[]): Promise<Record<string, unknown>[]> {
    return prices.search(this.db, name, markets);
  }

  buyorders(market: MarketSlug): Promise<Record<string, unknown>[]> {
    return prices.buyorders(this.db, market);
  }

  history(market: string, name: string, phase: string, resolution: 'daily' | 'hourly'): Promise<HistoryPoint[]> {
    return prices.history(this.db, market, name, phase, resolution);
  }

  /** Whether the read model has ever seen an item of this name (any phase, any marketplace). */
  knowsItem(name: string): Promise<boolean> {
    return prices.knowsItem(this.db, name);
  }

  store(market: string, name?: string): Promise<StoreRow[]> {
    return prices.store(this.db, market, name);
  }

  floatRanged(market?: string): Promise<FloatRangedRow[]> {
    return prices.floatRanged(this.db, market);
  }

  floatBuyorders(market: string, name?: string, float?: string): Promise<FloatBuyorderRow[]> {
    return prices.floatBuyorders(this.db, market, name, float);
  }

  sales(name: string, since: Date, until: Date, markets: readonly string[]): Promise<Sale[]> {
    return prices.sales(this.db, name, since, until, markets);
  }

  marketCap(resolution: 'daily' | 'hourly', since: Date): Promise<CapPoint[]> {
    return prices.marketCap(this.db, resolution, since);
  }

  /** Whether a migration is running (migrate.ts): a query that failed meanwhile may succeed shortly. */
  migrating(): Promise<boolean> {
    return status.migrating(this.db);
  }

  /** The read model's clock: the data's "now" (a simulator may run accelerated). */
  clock(): Promise<Date | null> {
    return status.clock(this.db);
  }

  freshness(): Promise<FreshnessRow[]> {
    return status.freshness(this.db);
  }

  /** The database's clock: every wall time of the status tables was written with it. */
  dbNow(): Promise<Date> {
    return status.dbNow(this.db);
  }

  /** Every materializer process's heartbeat row (see the materializer's migration 0003). */
  materializers(): Promise<MaterializerRow[]> {
    return status.materializers(this.db);
  }

  /** The newest 24 h sales export the materializer built (the API only serves it). */
  latestExport(): Promise<{ windowStart: Date; windowEnd: Date; bytes: Buffer } | null> {
    return prices.latestExport(this.db);
  }

  /** Dead letters per topic and reason. */
  deadLetters(): Promise<{ topic: string; reason: string; count: number; last_at: Date }[]> {
    return status.deadLetters(this.db);
  }

  /** Whether the database is a standby, and how far behind its primary. */
  replication(): Promise<DatabaseRow> {
    return status.replication(this.db);
  }
}

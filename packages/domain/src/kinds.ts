/**
 * The data kinds, described once: every kind of data a marketplace can offer, with what each part
 * of the pipeline needs to know about it. Pollers schedule by `capability` and `refresh`, name the
 * poll cycle by the kind, send `event` records to that event's topic (infra/kafka/topics.json),
 * de-duplicate rows by `identity`, and send deltas between full cycles or happenings by `mode`;
 * the materializer writes `table`, applies a COMPLETE cycle by `mode` (a delta kind's full cycle
 * clears or deletes what it did not see, an append kind's removes nothing) and names what a commit
 * touched as `<event>:<market>` (readTag), the tags the API's cached bodies depend on.
 *
 * Adding a data kind is one entry here plus its row and event shapes (packages/marketplaces
 * rows.ts, packages/events types.ts and its .avsc), which the compiler holds to these keys.
 */
/** What a marketplace offers; the pollers schedule and the API route by these. */
export type Capability =
  | 'listings' // lowest price + count per item
  | 'buyorders' // highest bid per item (and per phase/tier row)
  | 'floatBuyorders' // individual buy orders limited by float
  | 'floatRanged' // float-bucket offer short lists
  | 'sales' // completed sales
  | 'orderBook' // in-depth order book (the store)
  | 'history'; // upstream daily history we import

export interface RefreshIntervals {
  /** Listing prices; the spec promises about 5 minutes. */
  listingsMs: number;
  buyordersMs?: number;
  floatBuyordersMs?: number;
  floatRangedMs?: number;
  salesMs?: number;
  orderBookMs?: number;
  historyMs?: number;
}

/**
 * How a kind's rows travel and what a complete cycle means for them:
 * - `delta`: states, cheap to compare; cycles send what changed and a removal record for each row
 *   gone (`cleared` or `deletes`), every n-th cycle a FULL snapshot; a FULL cycle whose removals
 *   were not all sent as records (a poller's first after a start) removes what it did not see.
 * - `append`: happenings (a sale, a day's close); nothing is ever removed.
 */
export type KindMode = 'delta' | 'append';

export interface DataKindInfo {
  /** The marketplace capability that offers it (markets.ts). */
  capability: Capability;
  /** The event kind its records are (the `event` of its topic in infra/kafka/topics.json). */
  event: string;
  mode: KindMode;
  /** The marketplace's refresh interval for it (markets.ts RefreshIntervals). */
  refresh: keyof RefreshIntervals;
  /** The poller's environment variable that overrides that interval. */
  pollOverride: string;
  /** The materializer's table of its current rows (or, for append kinds, of every row). */
  table: string;
  /** The row fields that identify a row within one cycle: two rows with the same are duplicates. */
  identity: readonly string[];
  /**
   * Delta kinds whose rows stay once the item is gone (a price list shows "no listing"): the
   * removal is the row with these values, and the row keeps them.
   */
  cleared?: Readonly<Record<string, null | 0>>;
  /**
   * Delta kinds whose rows go once gone (a float bucket, an order, a book): the removal is the
   * row's last state with `removed: true`, and the row is deleted.
   */
  deletes?: true;
  /** Rows carry `item_page_url`: the upstream's own, else the marketplace's template (spec 4.1). */
  linksItemPage?: boolean;
}

export const DATA_KINDS = {
  LISTINGS: {
    capability: 'listings',
    event: 'listing',
    mode: 'delta',
    refresh: 'listingsMs',
    pollOverride: 'POLL_LISTINGS_MS',
    table: 'listings_current',
    identity: ['market_hash_name', 'phase'],
    cleared: { price: null, count: 0 },
    linksItemPage: true,
  },
  BUYORDERS: {
    capability: 'buyorders',
    event: 'buyorder',
    mode: 'delta',
    refresh: 'buyordersMs',
    pollOverride: 'POLL_BUYORDERS_MS',
    table: 'buyorders_current',
    identity: ['market_hash_name', 'phase', 'tier'],
    cleared: { price: null, blue_price: null, count: 0 },
  },
  FLOAT_RANGED: {
    capability: 'floatRanged',
    event: 'floatRanged',
    mode: 'delta',
    deletes: true,
    refresh: 'floatRangedMs',
    pollOverride: 'POLL_FLOAT_MS',
    table: 'float_ranged_current',
    identity: ['market_hash_name', 'phase', 'float_min'],
  },
  FLOAT_BUYORDERS: {
    capability: 'floatBuyorders',
    event: 'floatBuyorder',
    mode: 'delta',
    deletes: true,
    refresh: 'floatBuyordersMs',
    pollOverride: 'POLL_FLOAT_MS',
    table: 'float_buyorders_current',
    identity: ['market_hash_name', 'phase', 'order_id'],
  },
  SALES: {
    capability: 'sales',
    event: 'sale',
    mode: 'append',
    refresh: 'salesMs',
    pollOverride: 'POLL_SALES_MS',
    table: 'sales',
    identity: ['sale_id'],
  },
  ORDER_BOOK: {
    capability: 'orderBook',
    event: 'orderBook',
    mode: 'delta',
    deletes: true,
    refresh: 'orderBookMs',
    pollOverride: 'POLL_ORDER_BOOK_MS',
    table: 'order_book_current',
    identity: ['market_hash_name', 'phase'],
  },
  HISTORY: {
    capability: 'history',
    event: 'historyPoint',
    mode: 'append',
    refresh: 'historyMs',
    pollOverride: 'POLL_HISTORY_MS',
    table: 'listing_daily',
    identity: ['market_hash_name', 'phase'],
  },
} as const satisfies Record<string, DataKindInfo>;

export type DataKind = keyof typeof DATA_KINDS;
/** The kinds in the order above (poll-cycle markers name one; the Avro enum lists them). */
export const DATA_KIND_NAMES = Object.keys(DATA_KINDS) as DataKind[];
/** The event kind of each data kind's records. */
export type DataEventKind = (typeof DATA_KINDS)[DataKind]['event'];

export function isDataKind(value: unknown): value is DataKind {
  return typeof value === 'string' && Object.hasOwn(DATA_KINDS, value);
}

/** The kind a capability offers. */
export function kindOfCapability(capability: Capability): DataKind {
  const found = DATA_KIND_NAMES.find((k) => DATA_KINDS[k].capability === capability);
  if (found === undefined) throw new Error(`no data kind offers capability '${capability}'`);
  return found;
}

/** The data kind whose records are `event` events; undefined for events no poller sends. */
export function kindOfEvent(event: string): DataKind | undefined {
  return DATA_KIND_NAMES.find((k) => DATA_KINDS[k].event === event);
}

/**
 * What a materializer commit that wrote `kind`'s rows of `market` tells readers it touched
 * (`listing:cn-a`): the NOTIFY payload's tags and the API's body dependencies.
 */
export function readTag(kind: DataKind, market: string): string {
  return `${DATA_KINDS[kind].event}:${market}`;
}

/**
 * The identity of a row within one cycle (see `identity`); absent fields count as empty, so a
 * buy-order row without a tier and one with tier '' are the same row.
 */
export function rowIdentity(kind: DataKind, row: object): string {
  const r = row as Record<string, unknown>;
  return DATA_KINDS[kind].identity.map((f) => String(r[f] ?? '')).join('\u0000');
}

/**
 * Whether applying a COMPLETE cycle of `kind` in `mode` removes what it did not see: a delta
 * kind's FULL cycle (unless its removals came as records: the marker's `removals_sent`).
 */
export function cycleRemovesUnseen(kind: DataKind, mode: 'FULL' | 'DELTA'): boolean {
  return DATA_KINDS[kind].mode === 'delta' && mode === 'FULL';
}

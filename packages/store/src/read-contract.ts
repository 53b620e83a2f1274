/**
 * The read contract, version 1: the views of the read model the API may read (created by the
 * materializer's migration 0010_api_read_views_v1.sql; 0019 adds the change position and takes
 * transaction internals out of the listings), each column with its PostgreSQL type and
 * whether it can be NULL. The API's queries are built with Kysely over `ReadContractV1`, the
 * TypeScript form of this table, so a column the API reads that the contract lacks (or reads as
 * the wrong type) fails the build; test/integration/read-contract.test.ts compares this table with
 * the views of a freshly migrated schema, so a view changed without the contract fails the tests.
 *
 * Nullability cannot be read back from a view (PostgreSQL reports every view column nullable): the
 * `?` marks are written from the tables' NOT NULL constraints and the views' expressions, and are
 * not checked by the test.
 */

/** The column types the contract uses (format_type's names, without modifiers; timestamptz abbreviated). */
export type PgType =
  'text' | 'text[]' | 'integer' | 'bigint' | 'numeric' | 'boolean' | 'timestamptz' | 'date' | 'jsonb' | 'bytea';
/** A column as a contract writes it: its type, with `?` when it can be NULL. */
export type Column = PgType | `${PgType}?`;
/** Relations (views or tables) → columns → Column. */
export type Contract = Record<string, Record<string, Column>>;

export const READ_CONTRACT_V1 = {
  api_listings_v1: {
    market: 'text',
    market_hash_name: 'text',
    phase: 'text',
    id: 'bigint?',
    price: 'numeric?',
    count: 'integer',
    exterior: 'text?',
    stattrak: 'boolean',
    souvenir: 'boolean',
    template_id: 'bigint?',
    item_page_url: 'text?',
    observed_at: 'timestamptz',
    /** When the price or count last changed (0019): the rows' `updated_at`. */
    changed_at: 'timestamptz',
    change_24h: 'numeric?',
    change_7d: 'numeric?',
    change_30d: 'numeric?',
    change_90d: 'numeric?',
    avg_7d: 'numeric?',
    avg_30d: 'numeric?',
    avg_90d: 'numeric?',
    liquidity: 'numeric?',
    is_outlier: 'boolean?',
    confidence: 'numeric?',
  },
  /** Liquidity scores alone (0018): a list follows moved scores without reading their rows. */
  api_liquidity_v1: {
    market_hash_name: 'text',
    phase: 'text',
    liquidity: 'numeric?',
  },
  /**
   * The change position (0019): per committed transaction and tag (`listing:<market>`, `scores`,
   * `buyorder:<market>`, `derived`, …) the keys of the rows whose served values changed (NULL: the
   * tag names no rows, its readers rebuild whole). Positions become visible in commit order.
   */
  api_read_changes_v1: { pos: 'bigint', tag: 'text', names: 'text[]?', phases: 'text[]?' },
  /** Positions at or below pruned_through are gone; epoch names the journal (a replay starts another). */
  api_read_change_state_v1: { epoch: 'text', pruned_through: 'bigint' },
  api_buyorders_v1: {
    market: 'text',
    market_hash_name: 'text',
    phase: 'text',
    tier: 'text',
    id: 'bigint?',
    price: 'numeric?',
    blue_price: 'numeric?',
    count: 'integer',
    template_id: 'bigint?',
    type_id: 'bigint?',
    observed_at: 'timestamptz',
  },
  api_order_books_v1: {
    market: 'text',
    market_hash_name: 'text',
    phase: 'text',
    asks: 'jsonb',
    bids: 'jsonb',
    observed_at: 'timestamptz',
  },
  api_daily_v1: {
    market: 'text',
    market_hash_name: 'text',
    phase: 'text',
    day: 'text',
    close: 'numeric',
    count: 'integer?',
    open: 'numeric?',
    high: 'numeric?',
    low: 'numeric?',
  },
  api_hourly_v1: {
    market: 'text',
    market_hash_name: 'text',
    phase: 'text',
    hour: 'timestamptz',
    price: 'numeric?',
    count: 'integer?',
    open: 'numeric?',
    high: 'numeric?',
    low: 'numeric?',
  },
  api_item_markets_v1: { market: 'text', market_hash_name: 'text', phase: 'text', first_seen_at: 'timestamptz' },
  api_float_ranged_v1: {
    market: 'text',
    market_hash_name: 'text',
    phase: 'text',
    float_min: 'numeric',
    float_max: 'numeric',
    first_price: 'numeric?',
    fifth_price: 'numeric?',
    count: 'integer',
    phase_labels: 'jsonb',
    observed_at: 'timestamptz',
  },
  api_float_buyorders_v1: {
    market: 'text',
    order_id: 'text',
    market_hash_name: 'text',
    phase: 'text',
    price: 'numeric',
    quantity: 'integer',
    float_min: 'numeric?',
    float_max: 'numeric?',
    condition: 'text?',
    observed_at: 'timestamptz',
  },
  api_sales_v1: {
    market: 'text',
    sale_id: 'text',
    market_hash_name: 'text',
    phase: 'text',
    currency: 'text',
    price: 'numeric',
    sold_at: 'timestamptz',
    float_value: 'numeric?',
    paint_index: 'integer?',
    paint_seed: 'integer?',
    stickers: 'jsonb',
    keychains: 'jsonb',
  },
  api_market_cap_daily_v1: { day: 'text', market_cap: 'numeric', items: 'integer', cleaned: 'boolean' },
  api_market_cap_hourly_v1: { hour: 'timestamptz', market_cap: 'numeric', items: 'integer', cleaned: 'boolean' },
  api_clock_v1: { now: 'timestamptz' },
  api_freshness_v1: {
    market: 'text',
    kind: 'text',
    last_outcome: 'text',
    last_finished_at: 'timestamptz',
    last_complete_at: 'timestamptz?',
    last_complete_started_at: 'timestamptz?',
    consecutive_failed: 'integer',
    last_applied_at: 'timestamptz?',
    last_complete_applied_at: 'timestamptz?',
  },
  api_materializers_v1: {
    member_id: 'text',
    group_id: 'text',
    host: 'text',
    pid: 'integer',
    state: 'text',
    started_at: 'timestamptz',
    heartbeat_at: 'timestamptz',
    last_batch_at: 'timestamptz?',
    lag: 'bigint?',
  },
  api_dead_letters_v1: { topic: 'text', reason: 'text', received_at: 'timestamptz' },
  api_price_changes_v1: {
    seq: 'bigint',
    market: 'text',
    market_hash_name: 'text',
    phase: 'text',
    currency: 'text',
    old_price: 'numeric?',
    new_price: 'numeric?',
    old_count: 'integer?',
    new_count: 'integer?',
    observed_at: 'timestamptz',
    changed_at: 'timestamptz',
  },
  api_price_change_log_v1: { epoch: 'text', pruned_through: 'bigint' },
  api_sales_exports_v1: {
    window_start: 'timestamptz',
    window_end: 'timestamptz',
    sales: 'integer',
    bytes: 'bytea',
    built_at: 'timestamptz',
  },
} as const satisfies Contract;

/** What node-postgres gives for each type: int8 and numeric as exact strings, never floats. */
interface TsOf {
  text: string;
  'text[]': string[];
  integer: number;
  bigint: string;
  numeric: string;
  boolean: boolean;
  timestamptz: Date;
  /** Midnight of the day in the process's time zone: read a date as text (to_char) instead. */
  date: Date;
  jsonb: unknown;
  bytea: Buffer;
}
type ColumnType<C> = C extends `${infer T extends PgType}?` ? TsOf[T] | null : C extends PgType ? TsOf[C] : never;

/** A contract as Kysely's database interface: relation → column → TypeScript type. */
export type DatabaseOf<C extends Contract> = {
  [V in keyof C]: { [K in keyof C[V]]: ColumnType<C[V][K]> };
};

/** The read contract as Kysely's database interface. */
export type ReadContractV1 = DatabaseOf<typeof READ_CONTRACT_V1>;

/** A view's columns as PostgreSQL reports them: name → type (as PgType names it). */
export type ViewColumns = Record<string, string>;

/** format_type's name of a column type, as the contract writes it ('numeric(20,2)' → 'numeric'). */
export function contractTypeName(formatType: string): string {
  const base = formatType.replace(/\(.*\)$/, '');
  return base === 'timestamp with time zone' ? 'timestamptz' : base;
}

/**
 * Where the relations of a schema differ from a contract (the read contract by default): missing
 * or extra relations and columns, and columns of another type. Empty when they agree. `views` maps
 * each relation the contract covers (for the read contract: every api_* view) to its columns.
 */
export function contractDrift(views: Record<string, ViewColumns>, contract: Contract = READ_CONTRACT_V1): string[] {
  const problems: string[] = [];
  const want = contract as Record<string, Record<string, string>>;
  for (const name of Object.keys(views)) if (!(name in want)) problems.push(`view ${name} is not in the contract`);
  for (const [name, columns] of Object.entries(want)) {
    const have = views[name];
    if (!have) {
      problems.push(`view ${name} is missing`);
      continue;
    }
    for (const [column, type] of Object.entries(columns)) {
      const got = have[column];
      if (got === undefined) problems.push(`${name}.${column} is missing`);
      else if (got !== type.replace(/\?$/, '')) problems.push(`${name}.${column} is ${got}, the contract says ${type}`);
    }
    for (const column of Object.keys(have))
      if (!(column in columns)) problems.push(`${name}.${column} is not in the contract`);
  }
  return problems;
}

/**
 * How close can any ingest path come to one table's raw COPY? The materialize bench's ratio
 * (events/s through the ingest path against a raw COPY of the same events into one table) has a
 * floor set by what issue 12 item 1 itself puts on the path: stage by COPY, upsert the current
 * state, outbox rows for real changes, append the observation, next offset. This measures that
 * floor on the same run as the limit, PostgreSQL only (no Kafka fetch or Avro decode, which the
 * real path pays on top), on the same events and batches:
 *
 *   copy          the limit: one COPY of every row into listings_current, one transaction
 *   copy_batches  the same COPY cut into the ingest path's batches, three connections at once
 *   upsert        stage by COPY, then a bare guarded upsert (no statistics, peers or outlier guard)
 *   minimal       upsert + outbox for what changed + one append-only observation + next offset:
 *                 item 1's path with nothing else (history rolled up elsewhere)
 *   apply         applyBatch, the materializer's real ingest path (statistics, peers, the outlier
 *                 guard, item_markets, hourly and daily candles, outbox, offsets, NOTIFY)
 *
 *   node --import tsx bench/ingest-floor.ts [--size 35000] [--runs 1] [--out bench/results/ingest-floor.json]
 *     BENCH_VARIANTS=copy,apply   only these variants (copy first: the ratios are against it)
 *     BENCH_CONCURRENCY=3         connections at once
 *
 * Every variant runs its batches on three connections (the materializer's listings concurrency),
 * each batch one transaction, into a fresh schema. Not part of `make bench`: a measure of how much
 * of the target any design of item 1's path can reach on this machine.
 */
import { MARKETS } from '@skinprices/domain';
import type { ConsumedBatch, ListingEvent } from '@skinprices/events';
import { applyBatch, LISTING_COLUMNS, listingRow, type MaterializedKind } from '@skinprices/materializer';
import { generateCatalogue, MarketModel } from '@skinprices/simulator';
import { copyRows, type CopyValue, type Pool, type PoolClient } from '@skinprices/store';
import { readFileSync } from 'node:fs';
import { benchArgs, dropSchema, freshSchema, median, round, sqlProfile, writeResult } from './support/harness.js';
import { listingBatch, snapshotListings } from './support/listings.js';

const args = benchArgs('ingest-floor');
const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5442/skinprices';
const AT = Date.UTC(2026, 10, 20, 12);
const TOPIC = 'listings.v1.ingest_floor';
const SCHEMA = 'bench_ingest_floor';
/** The materializer's listings concurrency (CONSUME_LISTINGS_CONCURRENCY); BENCH_CONCURRENCY to try others. */
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 3);
/** The cold start's batches in the materialize bench: 332k events in 61 batches. */
const BATCH = 5_500;

const model = new MarketModel(generateCatalogue({ seed: 7, size: args.size }), 7);
const listingMarkets = MARKETS.filter((m) => m.capabilities.includes('listings'));
const perMarket = listingMarkets.map((m) => snapshotListings(model, m, AT + 1_000, `${m.slug}:LISTINGS:floor`));
const events = perMarket.flat();

/**
 * Batches of a marketplace's events, each on a partition of its own: three connections take them
 * in any order, and applyBatch drops what is below a partition's stored offset, so two batches of
 * one partition must not race (the materializer applies a partition's batches in turn).
 */
const batches: ConsumedBatch<MaterializedKind>[] = [];
for (const evs of perMarket)
  for (let i = 0; i < evs.length; i += BATCH) {
    const partition = batches.length;
    batches.push(listingBatch(TOPIC, partition, i, evs.slice(i, i + BATCH)));
  }

const rowsOf = (b: ConsumedBatch<MaterializedKind>): CopyValue[][] =>
  b.messages.map((m) => [...listingRow(m.value as ListingEvent), m.offset]);

/** Busy CPU-seconds of the whole machine since boot (/proc/stat, in USER_HZ = 100 ticks a second: every state but idle and iowait). */
function machineBusySeconds(): number {
  const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] as string).trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, , , irq, softirq, steal] = fields as number[];
  return (
    ((user as number) +
      (nice as number) +
      (system as number) +
      (irq as number) +
      (softirq as number) +
      (steal as number)) /
    100
  );
}

/**
 * Runs every batch through `apply`, CONCURRENCY at once, each in its own transaction (opened here,
 * or by `apply` itself when `ownTransaction`: applyBatch does).
 */
async function concurrently(
  pool: Pool,
  apply: (c: PoolClient, b: ConsumedBatch<MaterializedKind>) => Promise<void>,
  ownTransaction = false,
): Promise<number> {
  const queue = [...batches];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      const client = await pool.connect();
      try {
        for (let b = queue.shift(); b; b = queue.shift()) {
          if (!ownTransaction) await client.query('BEGIN');
          await apply(client, b);
          if (!ownTransaction) await client.query('COMMIT');
        }
      } finally {
        client.release();
      }
    }),
  );
  return (performance.now() - t0) / 1000;
}

const STAGE = `CREATE TEMP TABLE IF NOT EXISTS stage_floor (LIKE listings_current INCLUDING DEFAULTS,
  kafka_offset bigint NOT NULL) ON COMMIT DELETE ROWS`;
const UPSERT = `
  INSERT INTO listings_current (${LISTING_COLUMNS.join(', ')})
  SELECT DISTINCT ON (market, market_hash_name, phase) ${LISTING_COLUMNS.join(', ')} FROM stage_floor
  ORDER BY market, market_hash_name, phase, observed_at DESC, kafka_offset DESC
  ON CONFLICT (market, market_hash_name, phase) DO UPDATE SET price = excluded.price, count = excluded.count,
    observed_at = excluded.observed_at, cycle_id = excluded.cycle_id
  WHERE excluded.observed_at > listings_current.observed_at`;
const MINIMAL = `
  WITH s AS (
    SELECT DISTINCT ON (market, market_hash_name, phase) * FROM stage_floor
    ORDER BY market, market_hash_name, phase, observed_at DESC, kafka_offset DESC
  ),
  old AS (
    SELECT c.market, c.market_hash_name, c.phase, c.price, c.count
    FROM listings_current c JOIN s USING (market, market_hash_name, phase)
  ),
  up AS (
    INSERT INTO listings_current (${LISTING_COLUMNS.join(', ')})
    SELECT ${LISTING_COLUMNS.join(', ')} FROM s
    ON CONFLICT (market, market_hash_name, phase) DO UPDATE SET price = excluded.price, count = excluded.count,
      observed_at = excluded.observed_at, cycle_id = excluded.cycle_id
    WHERE excluded.observed_at > listings_current.observed_at
    RETURNING market, market_hash_name, phase, currency, price, count, observed_at
  ),
  obs AS (
    INSERT INTO floor_observations SELECT market, market_hash_name, phase, price, count, observed_at, kafka_offset
    FROM stage_floor
  )
  INSERT INTO price_change_outbox (market, market_hash_name, phase, currency, old_price, new_price,
                                   old_count, new_count, observed_at)
  SELECT up.market, up.market_hash_name, up.phase, up.currency, old.price, up.price, old.count, up.count, up.observed_at
  FROM up LEFT JOIN old USING (market, market_hash_name, phase)
  WHERE old.market IS NULL OR old.price IS DISTINCT FROM up.price OR old.count IS DISTINCT FROM up.count`;

/** MINIMAL without the staging table: the batch as one array per column, unnested in the statement. */
const UNNEST_TYPES = [
  'text',
  'text',
  'text',
  'text',
  'numeric',
  'int',
  'text',
  'bool',
  'bool',
  'bigint',
  'text',
  'timestamptz',
  'text',
  'bigint',
];
const MINIMAL_UNNEST = MINIMAL.replace(
  /WITH s AS \([^]*?\),\n {2}old/,
  `WITH u AS (SELECT * FROM unnest(${UNNEST_TYPES.map((t, i) => `$${i + 1}::${t}[]`).join(', ')})
      AS u(${[...LISTING_COLUMNS, 'kafka_offset'].join(', ')})),
  s AS (
    SELECT DISTINCT ON (market, market_hash_name, phase) * FROM u
    ORDER BY market, market_hash_name, phase, observed_at DESC, kafka_offset DESC
  ),
  old`,
).replace('FROM stage_floor\n  )', 'FROM u\n  )');

async function staged(client: PoolClient, b: ConsumedBatch<MaterializedKind>): Promise<void> {
  await client.query(`${STAGE}; DELETE FROM stage_floor`);
  await copyRows(client, 'stage_floor', [...LISTING_COLUMNS, 'kafka_offset'], rowsOf(b));
}
async function nextOffset(client: PoolClient, b: ConsumedBatch<MaterializedKind>): Promise<void> {
  await client.query(
    `INSERT INTO consumer_offsets (group_id, topic, partition, next_offset) VALUES ('floor', $1, $2, $3)
     ON CONFLICT (group_id, topic, partition) DO UPDATE SET next_offset = excluded.next_offset`,
    [b.topic, b.partition, b.highWatermark],
  );
}

type Variant = 'copy' | 'copy_batches' | 'upsert' | 'minimal' | 'minimal_unnest' | 'apply';
const VARIANTS: Record<Variant, (pool: Pool) => Promise<number>> = {
  async copy(pool) {
    const client = await pool.connect();
    const rows = events.map(listingRow);
    const t0 = performance.now();
    await client.query('BEGIN');
    await copyRows(client, 'listings_current', LISTING_COLUMNS, rows);
    await client.query('COMMIT');
    client.release();
    return (performance.now() - t0) / 1000;
  },
  copy_batches: (pool) =>
    concurrently(pool, async (c, b) => {
      await copyRows(
        c,
        'listings_current',
        LISTING_COLUMNS,
        b.messages.map((m) => listingRow(m.value as ListingEvent)),
      );
    }),
  upsert: (pool) =>
    concurrently(pool, async (c, b) => {
      await staged(c, b);
      await c.query(UPSERT);
    }),
  async minimal(pool) {
    await pool.query(`CREATE TABLE floor_observations (market text, market_hash_name text, phase text,
      price numeric, count integer, observed_at timestamptz, kafka_offset bigint)`);
    return concurrently(pool, async (c, b) => {
      await staged(c, b);
      await c.query(MINIMAL);
      await nextOffset(c, b);
    });
  },
  async minimal_unnest(pool) {
    await pool.query(`CREATE TABLE floor_observations (market text, market_hash_name text, phase text,
      price numeric, count integer, observed_at timestamptz, kafka_offset bigint)`);
    return concurrently(pool, async (c, b) => {
      const rows = rowsOf(b);
      const columns = UNNEST_TYPES.map((_, i) =>
        rows.map((r) => {
          const v = r[i];
          return v instanceof Date ? v.toISOString() : typeof v === 'bigint' ? v.toString() : v;
        }),
      );
      await c.query(MINIMAL_UNNEST, columns);
      await nextOffset(c, b);
    });
  },
  apply(pool) {
    const options = { groupId: 'bench-floor', outbox: true, hourlyRetentionDays: 100, clusterId: 'bench' };
    return concurrently(
      pool,
      async (c, b) => {
        await applyBatch(c, 'listing', b, options);
      },
      true,
    );
  },
};

const order = (process.env.BENCH_VARIANTS?.split(',') as Variant[] | undefined) ?? (Object.keys(VARIANTS) as Variant[]);
const runs: Record<string, number>[] = [];
for (let run = 0; run < args.runs; run++) {
  const r: Record<string, number> = {};
  for (const v of order) {
    const pool = await freshSchema(databaseUrl, SCHEMA, CONCURRENCY + 1, 'bench-ingest-floor');
    // Wall time per statement (several connections at once), printed after the variant.
    const sql = sqlProfile(pool);
    const busy0 = machineBusySeconds();
    const node0 = process.cpuUsage();
    r[v] = round(await VARIANTS[v](pool));
    const node = process.cpuUsage(node0);
    // CPU-seconds of the whole machine (PostgreSQL's backends, this process, what else runs) and
    // of this process, over the variant (with its pool's setup, which is small beside it).
    r[`${v}_machine_cpu_s`] = round(machineBusySeconds() - busy0);
    r[`${v}_bench_cpu_s`] = round((node.user + node.system) / 1e6);
    const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM listings_current');
    if (rows[0]?.n !== events.length) throw new Error(`${v}: ${rows[0]?.n} rows of ${events.length}`);
    await pool.end();
    await dropSchema(databaseUrl, SCHEMA);
    for (const t of sql.top(8))
      console.log(
        `    ${(t.ms / t.calls).toFixed(1).padStart(7)} ms × ${String(t.calls).padStart(3)}  ${t.statement.slice(0, 60)}`,
      );
    console.log(
      `run ${run + 1} ${v.padEnd(12)} ${r[v]?.toFixed(2)} s  ratio ${round((r.copy ?? NaN) / (r[v] ?? NaN))}  CPU-s: machine ${r[`${v}_machine_cpu_s`]}, bench ${r[`${v}_bench_cpu_s`]}`,
    );
  }
  runs.push(r);
}
const med = (v: string) => median(runs.map((r) => r[v] as number));
await writeResult(args.out, {
  what: 'the ingest path’s floor: item 1’s minimal path and the real one against a raw COPY, PostgreSQL only, same events and batches',
  machine: '2 cores; PostgreSQL and the benchmark on the same machine (Kafka idle)',
  catalogue_names: args.size,
  events: events.length,
  batches: batches.length,
  concurrency: CONCURRENCY,
  runs,
  seconds: Object.fromEntries(order.map((v) => [v, round(med(v))])),
  machine_cpu_seconds: Object.fromEntries(order.map((v) => [v, round(med(`${v}_machine_cpu_s`))])),
  bench_cpu_seconds: Object.fromEntries(order.map((v) => [v, round(med(`${v}_bench_cpu_s`))])),
  ratio_vs_copy: Object.fromEntries(
    order.map((v) => [v, round(median(runs.map((r) => (r.copy as number) / (r[v] as number))))]),
  ),
});
process.exit(0);

/**
 * What one small listings batch costs on the ingest path: a simulator burst arrives as ~1,000–1,650
 * batches of ~20–35 rows (bench/bottlenecks.md, Freshness), so their fixed cost — round trips and
 * statements per transaction — decides how long a burst takes to commit, more than their rows do.
 *
 *   node --import tsx bench/batch-cost.ts [--size 35000] [--runs 3] [--out bench/results/batch-cost.json]
 *     BENCH_BATCHES=600 BENCH_ROWS=20  the burst's shape
 *     BENCH_LOAD=2                     processes spinning beside it (the platform's two busy cores)
 *
 * PostgreSQL only (no Kafka): a full-size read model is built by applyBatch from one FULL cycle of
 * every listing marketplace, then the rows the simulator's next 10-minute bucket really changes
 * are applied as small batches, marketplace after marketplace in turn, one at a time, each
 * through applyBatch exactly as the materializer calls it (offsets, outbox, history, NOTIFY). The
 * figure is milliseconds per batch (median and p90) and the statements each sent. Under load
 * every round trip also waits for a core, which is how a burst meets the ingest path in the
 * platform. Not part of `make bench`: a measure for changes to the ingest path's per-batch cost,
 * run on both sides of a change (a worktree of the older commit) and alternated.
 */
import { MARKETS } from '@skinprices/domain';
import type { ConsumedBatch, ListingEvent } from '@skinprices/events';
import { applyBatch, type MaterializedKind } from '@skinprices/materializer';
import { generateCatalogue, MarketModel } from '@skinprices/simulator';
import type { PoolClient } from '@skinprices/store';
import { spawn, type ChildProcess } from 'node:child_process';
import { benchArgs, dropSchema, freshSchema, median, percentile, round, writeResult } from './support/harness.js';
import { listingBatch, snapshotListings } from './support/listings.js';

const args = benchArgs('batch-cost');
const batchCount = Number(process.env.BENCH_BATCHES ?? 600);
const rowsPerBatch = Number(process.env.BENCH_ROWS ?? 20);
const load = Number(process.env.BENCH_LOAD ?? 0);
const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/skinprices';
const AT = Date.UTC(2026, 10, 20, 12);
const TOPIC = 'listings.v1.batch_cost';
const SCHEMA = 'bench_batch_cost';

const model = new MarketModel(generateCatalogue({ seed: 7, size: args.size }), 7);
const listingMarkets = MARKETS.filter((m) => m.capabilities.includes('listings'));
const base = listingMarkets.map((m) => snapshotListings(model, m, AT + 1_000, `${m.slug}:LISTINGS:base`));
// The next bucket's rows that really changed (price or count), as a DELTA cycle would send them.
const burst = listingMarkets.map((m, i) => {
  const before = new Map((base[i] as ListingEvent[]).map((e) => [`${e.market_hash_name}\u0000${e.phase}`, e]));
  return snapshotListings(model, m, AT + 601_000, `${m.slug}:LISTINGS:burst`).filter((e) => {
    const b = before.get(`${e.market_hash_name}\u0000${e.phase}`);
    return !b || b.price !== e.price || b.count !== e.count;
  });
});

/** One batch of a partition, as the consumer hands it over (offsets counted per partition). */
const nextOffset = new Map<number, number>();
function batchOf(partition: number, events: readonly ListingEvent[]): ConsumedBatch<MaterializedKind> {
  const first = nextOffset.get(partition) ?? 0;
  nextOffset.set(partition, first + events.length);
  return listingBatch(TOPIC, partition, first, events);
}

/**
 * Counts what the client sends (each query() is a round trip, and so is a COPY) and the time until
 * each answer, by the statement's first words.
 */
const byStatement = new Map<string, { ms: number; calls: number }>();
function counting(client: PoolClient): { client: PoolClient; sent: () => number } {
  let n = 0;
  const query = client.query.bind(client) as (...a: unknown[]) => unknown;
  (client as unknown as { query: (...a: unknown[]) => unknown }).query = (...a: unknown[]) => {
    n++;
    const t0 = performance.now();
    const first = a[0] as string | { text?: string };
    const text = typeof first === 'string' ? first : (first.text ?? 'COPY');
    const what = text.replace(/\s+/g, ' ').trim().slice(0, 40);
    const out = query(...a);
    if (out instanceof Promise)
      void out.then(
        () => {
          const s = byStatement.get(what) ?? { ms: 0, calls: 0 };
          s.ms += performance.now() - t0;
          s.calls++;
          byStatement.set(what, s);
        },
        () => undefined,
      );
    return out;
  };
  return { client, sent: () => n };
}

const spinners: ChildProcess[] = [];
const stopSpinners = () => {
  for (const s of spinners) s.kill('SIGKILL');
  spinners.length = 0;
};
process.on('exit', stopSpinners);

interface Run {
  batches: number;
  rows: number;
  ms_per_batch_median: number;
  ms_per_batch_p90: number;
  ms_total: number;
  statements_per_batch: number;
}
const measured: Run[] = [];
for (let run = 0; run < args.runs; run++) {
  nextOffset.clear();
  const pool = await freshSchema(databaseUrl, SCHEMA, 2, 'bench-batch-cost');
  const options = { groupId: 'bench-batch-cost', outbox: true, hourlyRetentionDays: 100, clusterId: 'bench' };
  const raw = await pool.connect();
  // The read model before the burst: every marketplace's full cycle, in the cold start's batches.
  for (const [p, events] of base.entries())
    for (let i = 0; i < events.length; i += 2_400)
      await applyBatch(raw, 'listing', batchOf(p, events.slice(i, i + 2_400)), options);
  await raw.query('ANALYZE');
  const { client, sent } = counting(raw);
  // The burst, marketplace after marketplace in turn, as pages arrive from thirteen pollers.
  const cursors = burst.map(() => 0);
  const times: number[] = [];
  let rows = 0;
  if (load > 0)
    for (let i = 0; i < load; i++) spinners.push(spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' }));
  const before = sent();
  for (let b = 0; times.length < batchCount; b++) {
    const p = b % burst.length;
    const events = (burst[p] as ListingEvent[]).slice(cursors[p], (cursors[p] as number) + rowsPerBatch);
    if (events.length === 0) {
      if (cursors.every((c, i) => c >= (burst[i] as ListingEvent[]).length)) break;
      continue;
    }
    cursors[p] = (cursors[p] as number) + events.length;
    const t0 = performance.now();
    const r = await applyBatch(client, 'listing', batchOf(p, events), options);
    times.push(performance.now() - t0);
    if (r.applied !== events.length) throw new Error(`applied ${r.applied} of ${events.length}`);
    rows += events.length;
  }
  stopSpinners();
  const statements = (sent() - before) / times.length;
  if (process.env.BENCH_STATEMENTS)
    for (const [what, t] of [...byStatement].sort((a, b) => b[1].ms - a[1].ms))
      console.log(`  ${(t.ms / t.calls).toFixed(2).padStart(7)} ms × ${String(t.calls).padStart(4)}  ${what}`);
  byStatement.clear();
  raw.release();
  await pool.end();
  const m: Run = {
    batches: times.length,
    rows,
    ms_per_batch_median: round(median(times)),
    ms_per_batch_p90: round(percentile(times, 90)),
    ms_total: Math.round(times.reduce((a, t) => a + t, 0)),
    statements_per_batch: round(statements),
  };
  measured.push(m);
  console.log(
    `run ${run + 1}: ${m.batches} batches of ≤${rowsPerBatch} rows (${rows} rows), ${m.ms_per_batch_median} ms a batch (p90 ${m.ms_per_batch_p90}), ${m.statements_per_batch} statements each, load ${load}`,
  );
}
await dropSchema(databaseUrl, SCHEMA);
await writeResult(args.out, {
  what: 'one small listings batch through applyBatch (a burst: the next bucket’s changed rows of every listing marketplace, in turn)',
  machine: '2 cores; PostgreSQL and the benchmark on the same machine',
  catalogue_names: args.size,
  rows_per_batch: rowsPerBatch,
  spinning_processes: load,
  runs: measured,
  ms_per_batch_median: round(median(measured.map((m) => m.ms_per_batch_median))),
  ms_per_batch_p90: round(median(measured.map((m) => m.ms_per_batch_p90))),
  statements_per_batch: round(median(measured.map((m) => m.statements_per_batch))),
});
process.exit(0);

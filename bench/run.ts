/**
 * `make bench`: every benchmark, each in its own process, then bench/results.md (a table: what,
 * target from design.md, measured median, ratio) and bench/results.json (the headline numbers).
 *
 *   node --import tsx bench/run.ts                  full size (35k names), 3 runs each
 *   node --import tsx bench/run.ts --smoke --out D  300 names, 1 run, 2 s loads, results in D
 *                                                  (what `make test` runs, so the harness keeps working)
 *   add --profile D to write a --cpu-prof profile of every measured Node process into D
 *
 * Needs `make up`, nginx and wrk (`apt-get install -y nginx-light wrk`).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { writeFormatted } from './support/format.js';

const { values } = parseArgs({
  options: {
    smoke: { type: 'boolean', default: false },
    out: { type: 'string' },
    only: { type: 'string' },
    profile: { type: 'string' },
  },
  strict: true,
});
const smoke = values.smoke as boolean;
const outDir = values.out ?? (smoke ? join('.local', 'bench-smoke') : 'bench');
const size = smoke ? 300 : 35_000;
const runs = smoke ? 1 : 3;
const seconds = smoke ? 2 : 10;
const BENCHES = ['produce', 'materialize', 'api', 'platform', 'topics', 'replica', 'webhooks'] as const;
type Bench = (typeof BENCHES)[number];
const only = values.only ? new Set(values.only.split(',')) : undefined;
mkdirSync(join(outDir, 'results'), { recursive: true });

function runBench(name: Bench): Promise<void> {
  const argv = ['--import', 'tsx', `bench/${name}.ts`, '--size', String(size), '--runs', String(runs)];
  // materialize weighs the heap the materializer's listings rows take (served.ts).
  if (name === 'materialize') argv.unshift('--expose-gc');
  argv.push('--seconds', String(name === 'topics' ? (smoke ? 10 : 60) : seconds));
  argv.push('--out', join(outDir, 'results', `${name}.json`));
  if (values.profile) {
    argv.push('--profile', join(values.profile, name));
    // produce and materialize run our code inside the benchmark's own process.
    if (name === 'produce' || name === 'materialize')
      argv.unshift('--cpu-prof', `--cpu-prof-dir=${join(values.profile, name)}`);
  }
  // topics: the simulated window in minutes (one FULL period of the 5-minute kinds), one run (the
  // simulator is deterministic).
  if (name === 'topics') argv.splice(argv.indexOf('--runs') + 1, 1, '1');
  console.log(`\n== ${name}: ${argv.slice(2).join(' ')}`);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, argv, { stdio: 'inherit' });
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`bench/${name}.ts exited ${code}`))));
  });
}

const failed: string[] = [];
for (const name of BENCHES) {
  if (only && !only.has(name)) continue;
  try {
    await runBench(name);
  } catch (err) {
    failed.push(`${name}: ${String(err)}`);
  }
}

// ---- the summary: results.json and results.md ---------------------------------------------------
const read = (name: string): Record<string, unknown> => {
  const path = join(outDir, 'results', `${name}.json`);
  return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>) : {};
};
const r = Object.fromEntries(BENCHES.map((b) => [b, read(b)])) as Record<Bench, Record<string, number>>;
/** Where the API's resident memory is (bench/api.ts); absent from results made before it was recorded. */
const apiMemory = (r.api as unknown as { api_memory?: Record<string, number> }).api_memory;
/** The RSS of each of the API's processes, the primary first. */
const apiRss = (r.api as unknown as { api_rss_per_process_mb?: number[] }).api_rss_per_process_mb;
/** The ingest path's floor (bench/ingest-floor.ts), measured apart: its ratios name the limit the target has here. */
const floor = read('ingest-floor') as { ratio_vs_copy?: Record<string, number> };

/** The API against the bare node:http floor with as many processes (bench/api.ts), one answer's. */
const vsFloor = (kind: string, rps: string): string =>
  `${r.api[rps]} vs ${r.api[`floor_${kind}_rps`]} rps, ${r.api.api_processes} processes each (the floor with one: ${r.api[`floor_single_${kind}_rps`]}); p99 ${r.api[`${kind}_p99_vs_floor`]} × the floor's (${r.api[`floor_${kind}_p99_ms`]} ms)`;

/** The design's targets; `atLeast` for ratios, `atMost` for times and memory; no bound: reported only. */
const ROWS: {
  key: string;
  what: string;
  target: string;
  bound?: ['atLeast' | 'atMost', number];
  value: number | undefined;
  detail: string;
  /** What an absent value means, where that is not a missing measurement. @default 'not measured' */
  absent?: string;
}[] = [
  {
    key: 'produce_ratio',
    what: 'poller → Kafka produce (records/s) vs Kafka ProducerPerformance',
    target: '≥ 0.5',
    bound: ['atLeast', 0.5],
    value: r.produce.produce_ratio,
    detail: `${r.produce.ours_records_per_s} vs ${r.produce.theirs_records_per_s} records/s, ${r.produce.record_bytes} B records`,
  },
  {
    key: 'materialize_ratio',
    what: 'Kafka → PostgreSQL ingest path vs raw COPY of the same rows',
    target: '≥ 0.5',
    bound: ['atLeast', 0.5],
    value: r.materialize.materialize_ratio,
    detail: `${r.materialize.materialize_seconds} s vs ${r.materialize.copy_seconds} s for ${r.materialize.events} events; vs a raw COPY of its whole write set (5 tables, ${r.materialize.write_set_copy_seconds} s): ${r.materialize.materialize_write_set_ratio}; the derive path (13 markers) ${r.materialize.derive_seconds} s after; Kafka fetch and decode alone ${r.materialize.consume_seconds ?? '—'} s; issue 12 item 1's path with nothing else, PostgreSQL only (bench/ingest-floor.ts, not run by make bench): ${floor.ratio_vs_copy?.minimal ?? '—'} of a raw COPY`,
  },
  {
    key: 'replay_vs_ingest',
    what: 'make replay (ingest + derive, outbox off) vs the ingest path, events/s',
    target: '≥ 0.5',
    bound: ['atLeast', 0.5],
    value: r.materialize.replay_vs_ingest,
    detail: `${r.materialize.replay_events_per_s} events/s: ${r.materialize.replay_seconds} s for the same topics`,
  },
  {
    key: 'replay_vs_copy',
    what: 'make replay vs a raw COPY of the same events into one table, events/s',
    target: '≥ 1',
    bound: ['atLeast', 1],
    value: r.topics.replay_vs_copy,
    detail: `the pollers' own mix: ${r.topics.replay_events ?? '—'} records of every marketplace's cycles through ${r.topics.window_minutes ?? '—'} simulated minutes (FULL and DELTA, removals, markers, sales, history) in ${r.topics.replay_seconds ?? '—'} s, ${r.topics.replay_events_per_s ?? '—'}/s, against a raw COPY of its ${r.topics.copy_rows ?? '—'} listing records (${r.topics.copy_seconds ?? '—'} s); the design's floor, fetch and decode alone: ${r.topics.decode_events_per_s ?? '—'}/s, ${r.topics.decode_vs_copy ?? '—'} of the COPY; over one cold FULL cycle (every event new) ${r.materialize.replay_vs_copy ?? '—'}`,
  },
  {
    key: 'repeat_ingest_ratio',
    what: 'a FULL cycle of unchanged listings through the ingest path vs a raw COPY of the same events, events/s',
    target: '≥ 2',
    bound: ['atLeast', 2],
    value: r.materialize.repeat_ingest_ratio,
    detail: `${r.materialize.repeat_seconds} s for the repeats; skipping must beat writing; recognised against ${r.materialize.served_rows ?? '—'} rows held in memory (loaded on assignment in ${r.materialize.served_load_seconds ?? '—'} s, ${r.materialize.served_heap_mb ?? '—'} MB of heap)`,
  },
  {
    key: 'full_cycle_row_versions',
    what: 'listings_current row versions a FULL cycle of unchanged listings makes',
    target: '= 0',
    bound: ['atMost', 0],
    value: r.materialize.full_cycle_row_versions,
    detail: `rows at a new ctid (every rewrite makes one); the change journal named ${r.materialize.full_cycle_rows_changed} rows changed`,
  },
  {
    key: 'full_cycle_segments_redeflated',
    what: 'list segments a FULL cycle of unchanged listings makes the API re-deflate',
    target: '= 0',
    bound: ['atMost', 0],
    value: r.materialize.full_cycle_segments_redeflated,
    detail: 'the segments (256 rows) of the rows the change journal names, the only rows a list patch reads',
  },
  {
    key: 'api_ratio',
    what: 'GET /v1/prices/{market} full list, gzip (rps) vs nginx, same bytes',
    target: '≥ 0.7',
    bound: ['atLeast', 0.7],
    value: r.api.api_ratio,
    detail: `${r.api.api_rps} vs ${r.api.nginx_rps} rps, ${r.api.list_bytes_gzip} B body, 50 connections, nginx with ${r.api.nginx_workers ?? 1} worker(s); vs the floor ${r.api.list_vs_floor ?? '—'}: ${vsFloor('list', 'api_rps')}`,
  },
  {
    key: 'api_p99_vs_nginx',
    what: 'GET /v1/prices/{market} p99 at 50 connections vs nginx p99, same bytes, same run',
    target: '≤ 1.5',
    bound: ['atMost', 1.5],
    value: r.api.api_p99_vs_nginx,
    detail: `${r.api.api_p99_ms} ms vs nginx ${r.api.nginx_p99_ms} ms; vs the floor's ${r.api.floor_list_p99_ms ?? '—'} ms: ${r.api.list_p99_vs_floor ?? '—'}`,
  },
  {
    key: 'post_latest_p99_vs_nginx',
    what: 'POST /v1/prices/latest (100 items) p99 at 50 connections vs nginx p99 serving its answer',
    target: '≤ 2',
    bound: ['atMost', 2],
    value: r.api.post_latest_p99_vs_nginx,
    detail: `${r.api.post_latest_p99_ms} ms vs nginx ${r.api.nginx_post_body_p99_ms} ms (its answer to a GET); vs the floor's to the same POST ${r.api.floor_post_latest_p99_ms ?? '—'} ms: ${r.api.post_latest_p99_vs_floor ?? '—'}; ${r.api.post_latest_bytes} B answers`,
  },
  {
    key: 'post_latest_vs_floor',
    what: 'POST /v1/prices/latest (100 items), rps vs a bare node:http server answering the same POST with the same bytes, same processes',
    target: '≥ 0.7',
    bound: ['atLeast', 0.7],
    value: r.api.post_latest_vs_floor,
    detail: vsFloor('post_latest', 'post_latest_rps'),
  },
  {
    key: 'history_p99_vs_nginx',
    what: 'GET /v1/prices/{market}/history p99 at 50 connections vs nginx p99 serving the same answers',
    target: '≤ 2',
    bound: ['atMost', 2],
    value: r.api.history_p99_vs_nginx,
    detail: `${r.api.history_p99_ms} ms vs nginx ${r.api.nginx_history_p99_ms} ms; a year of daily points, 100 items in turn`,
  },
  {
    key: 'history_vs_floor',
    what: 'GET /v1/prices/{market}/history, rps vs a bare node:http server serving the same answers, same processes',
    target: '≥ 0.7',
    bound: ['atLeast', 0.7],
    value: r.api.history_vs_floor,
    detail: vsFloor('history', 'history_rps'),
  },
  {
    key: 'search_p99_vs_nginx',
    what: 'GET /v1/prices/search p99 at 50 connections vs nginx p99 serving the same answers',
    target: '≤ 2',
    bound: ['atMost', 2],
    value: r.api.search_p99_vs_nginx,
    detail: `${r.api.search_p99_ms} ms vs nginx ${r.api.nginx_search_p99_ms} ms; every marketplace, 100 names in turn`,
  },
  {
    key: 'search_vs_floor',
    what: 'GET /v1/prices/search, rps vs a bare node:http server serving the same answers, same processes',
    target: '≥ 0.7',
    bound: ['atLeast', 0.7],
    value: r.api.search_vs_floor,
    detail: vsFloor('search', 'search_rps'),
  },
  {
    key: 'cold_catalogue_s',
    what: 'cold full catalogue, upstream → API-visible (make run)',
    target: '≤ 30 s',
    bound: ['atMost', 30],
    value: r.platform.cold_catalogue_s,
    detail: `${r.platform.listing_marketplaces} listing marketplaces, from the first upstream request; ${r.platform.cold_with_boot_s} s counting the services' start-up`,
  },
  {
    key: 'freshness_p99_s',
    what: 'one price change, poll → visible in GET /v1/prices/{market}, p99',
    target: '≤ 2 s',
    bound: ['atMost', 2],
    value: r.platform.freshness_p99_s,
    detail: `p50 ${r.platform.freshness_p50_s} s; override → visible p50 ${r.platform.override_to_visible_p50_s} s (includes the wait for the poll); ${r.platform.freshness_missed ?? 0} changes missed their deadline (counted at the deadline, a lower bound), ${r.platform.freshness_unseen_upstream ?? 0} never seen upstream`,
  },
  {
    key: 'freshness_burst_p99_s',
    what: 'the same in a phase that held a simulator burst (~34k real changes at one boundary)',
    target: '≤ 2 s',
    bound: ['atMost', 2],
    value: r.platform.freshness_burst_p99_s ?? undefined,
    absent: 'no phase held a burst',
    detail: `${r.platform.freshness_burst_runs ?? 0} of the runs held a burst; calm phases' p99 ${r.platform.freshness_calm_p99_s ?? 'none'} s`,
  },
  {
    key: 'standby_freshness_p99_s',
    what: 'one price change, poll → visible through an API on a PostgreSQL hot standby, p99',
    target: '≤ 2 s + replay lag',
    bound: ['atMost', 2 + (r.replica.replay_lag_p99_s ?? 0)],
    value: r.replica.standby_freshness_p99_s,
    detail: `the same changes on an API on the primary: p99 ${r.replica.primary_freshness_p99_s} s; the standby's extra time p99 ${r.replica.standby_extra_p99_s} s; its replay lag sampled from /v1/status p99 ${r.replica.replay_lag_p99_s} s (at most ${r.replica.replay_lag_max_bytes} bytes); ${r.replica.changes_per_run} changes a run, ${r.replica.missed ?? 0} missed`,
  },
  {
    key: 'calm_rows_changed_per_price_change',
    what: 'served rows changed (any field, the six lists) per real price change, calm freshness phases',
    target: '≤ 3',
    bound: ['atMost', 3],
    value: r.platform.calm_rows_changed_per_price_change ?? undefined,
    detail: `from the change journal: listing rows whose served values changed, and each changed liquidity score once per list showing the item; measured on the day after the cold start's, with ${r.platform.scores_at_freshness ?? 'no'} items scored (a day's score reads the day before's closes)`,
  },
  {
    key: 'api_rows_read_per_change',
    what: "rows the lists' patches read by key (listing rows, score fields) per served row changed",
    target: '≤ 2',
    bound: ['atMost', 2],
    value: r.platform.api_rows_read_per_change ?? undefined,
    detail:
      'each patch reads one index range of the change journal, then the rows it names by key (and, for a row new to its list, its predecessor)',
  },
  {
    key: 'topic_bytes_per_day_35k',
    what: 'bytes the topics kept forever grow by per day at the full catalogue, GB',
    target: '≤ 7',
    bound: ['atMost', 7],
    value: r.topics.topic_bytes_per_day_35k,
    detail: `every topic of the pollers ${r.topics.topic_bytes_per_day_all_35k ?? '—'} GB/day (the rest has a 7-day retention); from ${r.topics.cycles ?? '—'} cycles of every marketplace through ${r.topics.window_minutes ?? '—'} simulated minutes at ${r.topics.size ?? '—'} names, on-disk log bytes, extrapolated per marketplace and kind; per topic below`,
  },
  {
    key: 'api_rss_mb',
    what: 'API resident memory with every cache full, its largest process',
    target: '≤ 512 MB',
    bound: ['atMost', 512],
    value: r.api.api_rss_mb,
    detail: `per process ${apiRss?.join(', ') ?? '—'} MB (the primary first)${
      apiMemory
        ? `; V8 heap ${apiMemory.heap_used_mb} MB used of ${apiMemory.heap_total_mb} MB reserved, ${apiMemory.external_mb} MB outside it (the catalogue and the list bodies as bytes), summed over the processes`
        : ''
    }`,
  },
  {
    key: 'api_rss_total_mb',
    what: 'API resident memory with every cache full, all its processes together',
    target: 'reported',
    value: r.api.api_rss_total_mb,
    detail: `${r.api.api_processes ?? 1} processes asked (API_PROCESSES), ${apiRss?.length ?? '—'} ran`,
  },
  {
    key: 'webhook_p99_s',
    what: 'webhook delivery, a change committed → its signed POST at a local receiver, p99 (steady stream)',
    target: '≤ 2 s',
    bound: ['atMost', 2],
    value: r.webhooks.webhook_p99_s,
    detail: `p50 ${r.webhooks.webhook_p50_s ?? '—'} s; ${r.webhooks.steady_changes_per_s ?? '—'} changes/s for ${r.webhooks.steady_seconds ?? '—'} s, each to ${r.webhooks.subscriptions ?? '—'} subscriptions; signatures not verified by standardwebhooks: ${r.webhooks.webhook_bad_signatures ?? '—'}`,
  },
  {
    key: 'webhook_deliveries_per_s',
    what: 'webhook deliveries per second, a burst of changes to 8 subscriptions, first produce → last delivery',
    target: 'reported',
    value: r.webhooks.webhook_deliveries_per_s,
    detail: `${r.webhooks.burst_deliveries ?? '—'} deliveries; a bare undici client POSTing as many signed bodies at the notifier's in-flight cap (64) to a receiver of the same kind: ${r.webhooks.webhook_floor_per_s ?? '—'}/s, so ${r.webhooks.webhook_vs_floor ?? '—'} of the floor`,
  },
];

interface TopicGrowth {
  topic: string;
  retention_ms: string | null;
  cleanup_policy: string;
  kept_forever: boolean;
  gb_per_day_35k: number;
  tb_per_year_35k: number | null;
  produced_here: boolean;
}

/** results.md's per-topic growth (bench/topics.ts): what each topic adds per day and keeps. */
function topicTable(topics: readonly TopicGrowth[]): string[] {
  const kept = (t: TopicGrowth): string =>
    t.cleanup_policy.includes('compact')
      ? 'latest per key (compacted)'
      : t.kept_forever
        ? 'forever'
        : `${Math.round(Number(t.retention_ms) / 86_400_000)} days`;
  return [
    '## Topic growth at the full catalogue',
    '',
    '| topic | kept | GB per day | kept after a year (TB) |',
    '|---|---|---|---|',
    ...topics.map(
      (t) =>
        `| ${t.topic} | ${kept(t)} | ${t.produced_here ? t.gb_per_day_35k : 'not produced by the pollers'} | ${
          t.tb_per_year_35k ??
          (t.produced_here
            ? `at most ${((t.gb_per_day_35k * Number(t.retention_ms)) / 86_400_000 / 1000).toFixed(3)}`
            : '—')
        } |`,
    ),
    '',
  ];
}

const met = (row: (typeof ROWS)[number]): boolean | undefined =>
  row.value === undefined || row.bound === undefined
    ? undefined
    : row.bound[0] === 'atLeast'
      ? row.value >= row.bound[1]
      : row.value <= row.bound[1];
const ratioOf = (row: (typeof ROWS)[number]): string =>
  row.value === undefined || row.bound === undefined
    ? ''
    : row.bound[0] === 'atLeast'
      ? row.value.toFixed(3)
      : row.bound[1] === 0
        ? ''
        : `${(row.value / row.bound[1]).toFixed(2)} of the budget`;

const summary: Record<string, unknown> = { mode: smoke ? 'smoke' : 'full', catalogue_names: size, runs };
for (const row of ROWS) summary[row.key] = row.value ?? null;
summary.freshness_p50_s = r.platform.freshness_p50_s ?? null;
// The absolute figures behind the ratios (they vary 2× between machines of this kind).
for (const key of ['api_p99_ms', 'post_latest_p99_ms', 'history_p99_ms', 'search_p99_ms'])
  summary[key] = r.api[key] ?? null;
// The API against the bare node:http floor beside the targets': the list, and every p99.
for (const key of [
  'api_processes',
  'list_vs_floor',
  'list_p99_vs_floor',
  'post_latest_p99_vs_floor',
  'search_p99_vs_floor',
  'history_p99_vs_floor',
])
  summary[key] = r.api[key] ?? null;
summary.replay_events_per_s = r.materialize.replay_events_per_s ?? null;
summary.derive_seconds = r.materialize.derive_seconds ?? null;
summary.materialize_write_set_ratio = r.materialize.materialize_write_set_ratio ?? null;
summary.targets_met = Object.fromEntries(ROWS.filter((row) => row.bound).map((row) => [row.key, met(row) ?? null]));
summary.failed = failed;
// When the newest of the benches' own results was measured: a summary regenerated with
// `--only none` (after editing bottlenecks.md, say) must not claim a measurement of its own.
summary.measured_at =
  BENCHES.map((b) => r[b] as Record<string, unknown>)
    .map((res) => res.measured_at)
    .filter((at): at is string => typeof at === 'string')
    .sort()
    .at(-1) ?? new Date().toISOString();
await writeFormatted(join(outDir, 'results.json'), `${JSON.stringify(summary, null, 2)}\n`);

const lines = [
  '# Benchmark results',
  '',
  `Generated by \`make bench\` (bench/run.ts) on ${summary.measured_at as string}: ${size} catalogue names,`,
  `median of ${runs} run${runs > 1 ? 's' : ''} each, every ratio taken against its limit in the same run on this 2-core machine.`,
  'Raw runs: `bench/results/*.json`. Targets: design.md, "Performance targets".',
  '',
  '| what | target | measured (median) | ratio | met | detail |',
  '|---|---|---|---|---|---|',
  ...ROWS.map(
    (row) =>
      `| ${row.what} | ${row.target} | ${row.value ?? row.absent ?? 'not measured'} | ${ratioOf(row)} | ${
        met(row) === undefined ? '' : met(row) ? 'yes' : '**no**'
      } | ${row.detail} |`,
  ),
  '',
  ...(failed.length ? ['Failed benchmarks:', '', ...failed.map((f) => `- ${f}`), ''] : []),
];
const perTopic = (r.topics as unknown as { topics?: TopicGrowth[] }).topics;
if (perTopic) lines.push(...topicTable(perTopic));
// The bottleneck analysis is written by people (with the profiles it cites), not generated.
if (!smoke && existsSync('bench/bottlenecks.md')) lines.push(readFileSync('bench/bottlenecks.md', 'utf8'));
await writeFormatted(join(outDir, 'results.md'), `${lines.join('\n')}\n`);
console.log(`\n${lines.slice(6, 8 + ROWS.length).join('\n')}\n\nwrote ${join(outDir, 'results.md')} and results.json`);
process.exit(failed.length ? 1 : 0);

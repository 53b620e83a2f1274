/**
 * The read API against two limits on the same run, each serving the API's own answer bytes: nginx
 * (Debian's package; the machine's limit) and the floor, a bare `node:http` server
 * (support/floor-server.ts; the runtime's limit), with one process and with N. Four answers: the
 * list `GET /v1/prices/cn-a` (gzip), `POST /v1/prices/latest` with 100 items, search and history
 * (100 names in turn), each loaded by wrk at 50 connections, the servers alternating within a run.
 * nginx runs both with sendfile and with one large buffer, the faster of the two counting. Also the
 * API's RSS, every process's, once every process has filled its caches.
 *
 *   node --import tsx bench/api.ts [--size 35000] [--runs 3] [--seconds 10] [--processes N] [--profile dir]
 *
 * The read model is seeded straight into its own schema (COPY of one full listings snapshot of
 * every marketplace from the simulator's model, a year of daily closes for 100 items); the API
 * runs as its own process tree, as deployed, with API_PROCESSES=N (default: one per core the
 * runtime may use). nginx runs N workers, the floor N processes (and 1, for what more processes
 * buy on this machine).
 * Writes bench/results/api.json. Needs `make up` (PostgreSQL), nginx and wrk (`apt-get install nginx-light wrk`).
 */
import { get } from 'node:http';
import { availableParallelism } from 'node:os';
import { gunzipSync } from 'node:zlib';
import { API_MIGRATIONS_DIR } from '@skinprices/api';
import { MARKETS } from '@skinprices/domain';
import { LISTING_COLUMNS, listingRow, MIGRATIONS_DIR } from '@skinprices/materializer';
import { generateCatalogue, MarketModel } from '@skinprices/simulator';
import { waitForUrl } from '@skinprices/runtime';
import { copyRows, createPool, ensureSchema, migrate } from '@skinprices/store';
import {
  benchArgs,
  benchKey,
  median,
  requireTool,
  round,
  rssMb,
  startNginx,
  startService,
  stopProcess,
  wrk,
  writeResult,
  type Load,
} from './support/harness.js';
import { buildDirectory, buildServices } from '../infra/local/build.js';
import { FLOOR_ENTRY, startFloor, type FloorAnswer } from './support/floor.js';
import { snapshotListings } from './support/listings.js';
import { descendants } from './support/proc.js';

const args = benchArgs('api', { ints: { processes: availableParallelism() } });
const size = args.size;
/** The API's processes (API_PROCESSES), nginx's workers and the floor's processes compared with it. */
const processes = args.ints.processes;
requireTool('wrk', 'wrk');
requireTool('nginx', 'nginx-light');
const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5442/skinprices';
const SCHEMA = 'bench_api';
const KEYS = 'bench_api_keys';
const API_PORT = 18_480;
const NGINX_PORT = 18_481; // and the next, nginx's buffered way
const FLOOR_PORT = 18_483; // one process; the next, N processes
const METRICS_PORT = 18_489;
const AT = Date.UTC(2026, 10, 20, 12);

// ---- seed the read model ----------------------------------------------------------------------
const admin = createPool({ databaseUrl, max: 1 });
await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE; DROP SCHEMA IF EXISTS ${KEYS} CASCADE`);
await admin.end();
const pool = createPool({ databaseUrl, schema: SCHEMA, max: 2 });
await ensureSchema(pool, SCHEMA);
await migrate(pool, MIGRATIONS_DIR);
const model = new MarketModel(generateCatalogue({ seed: 7, size }), 7);
let rows = 0;
for (const market of MARKETS.filter((m) => m.capabilities.includes('listings'))) {
  const listed = snapshotListings(model, market, AT, 'bench').filter((e) => e.price !== null);
  const client = await pool.connect();
  await copyRows(client, 'listings_current', LISTING_COLUMNS, listed.map(listingRow));
  client.release();
  rows += listed.length;
}
await pool.query(`INSERT INTO read_model_clock (now) VALUES ($1)`, [new Date(AT)]);
// A year of daily closes for the first 100 CN-A items: the history endpoint's load.
await pool.query(`
  INSERT INTO listing_daily (market, market_hash_name, phase, day, close, count, observed_at)
  SELECT c.market, c.market_hash_name, c.phase, d::date, round(c.price * (1 + 0.05 * sin(extract(doy FROM d))::numeric), 2), c.count, d
  FROM (SELECT * FROM listings_current WHERE market = 'cn-a' ORDER BY market_hash_name LIMIT 100) c
  CROSS JOIN generate_series(timestamptz '2025-11-20', timestamptz '2026-11-19', interval '1 day') d`);
const names = (
  await pool.query<{ market_hash_name: string }>(
    `SELECT DISTINCT market_hash_name FROM listing_daily WHERE market = 'cn-a' ORDER BY 1 LIMIT 100`,
  )
).rows.map((r) => r.market_hash_name);
console.log(`seeded ${rows} listings (${size} names), history for ${names.length} items`);

const keysPool = createPool({ databaseUrl, schema: KEYS, max: 1 });
await ensureSchema(keysPool, KEYS);
await migrate(keysPool, API_MIGRATIONS_DIR);
await keysPool.end();
const secret = await benchKey(databaseUrl, KEYS);

// ---- the API as its own process tree, and the floor ---------------------------------------------
// Compiled ahead, as make run deploys it (its resident memory is one of the figures); the floor
// too, so that neither pays tsx's loader.
const build = buildDirectory('bench-api-');
process.on('exit', build.remove);
const API_ENTRY = 'services/api/src/main.ts';
const bundles = await buildServices([API_ENTRY, FLOOR_ENTRY], build.dir);
const api = startService(
  bundles.get(API_ENTRY) as string,
  {
    API_PORT: String(API_PORT),
    METRICS_PORT: String(METRICS_PORT),
    API_PROCESSES: String(processes),
    DATABASE_SCHEMA: SCHEMA,
    KEYS_SCHEMA: KEYS,
    LOG_LEVEL: 'warn',
  },
  args.profileDir,
);
const base = `http://127.0.0.1:${API_PORT}`;
await waitForUrl(`${base}/openapi.json`);
const headers = { 'x-api-key': secret, 'accept-encoding': 'gzip' };

/**
 * The raw (still gzipped) bytes and headers of one answer; `fresh`: on a connection of its own
 * (the cluster's round robin hands each new connection to the next process).
 */
function getRaw(
  url: string,
  fresh = false,
): Promise<{ body: Buffer; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    get(url, { headers, ...(fresh ? { agent: false } : {}) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ body: Buffer.concat(chunks), headers: res.headers }));
    }).on('error', reject);
  });
}
const LIST_PATH = '/v1/prices/cn-a';
const raw = (await getRaw(`${base}${LIST_PATH}`)).body;
const listJson = JSON.parse(gunzipSync(raw).toString()) as { data: unknown[] };
console.log(`GET ${LIST_PATH}: ${listJson.data.length} rows, ${raw.length} bytes gzip`);

const post = { headers, body: JSON.stringify({ items: names }) };
const seconds = args.seconds;
// The catalogue's first build is a cold-start cost, not the steady state measured; the answer's
// bytes are also what nginx and the floor serve as the limits for a body of that size.
const postResponse = await fetch(`${base}/v1/prices/latest`, {
  method: 'POST',
  headers: { ...headers, 'content-type': 'application/json' },
  body: post.body,
});
const postAnswer = Buffer.from(new Uint8Array(await postResponse.arrayBuffer()));

// The search and history answers for the 100 names, as the API sends them (gzip where it does):
// nginx serves the same bytes under the same rotation at paths of its own (`path`), the floor at
// the API's own URLs (`url`); the limits for those answers (design.md states their targets
// against nginx).
const searchPath = (n: string) => `/v1/prices/search?market_hash_name=${encodeURIComponent(n)}`;
const historyPath = (n: string) => `/v1/prices/cn-a/history?market_hash_name=${encodeURIComponent(n)}`;
const answers = async (kind: string, pathOf: (n: string) => string) =>
  Promise.all(
    names.map(async (n, i) => {
      const got = await getRaw(`${base}${pathOf(n)}`);
      const encoding = got.headers['content-encoding'];
      return {
        path: `/${kind}-${i}`,
        url: pathOf(n),
        body: got.body,
        headers: {
          'Cache-Control': 'public, max-age=30',
          ...(typeof encoding === 'string' ? { 'Content-Encoding': encoding } : {}),
        },
      };
    }),
  );
const searchAnswers = await answers('search', searchPath);
const historyAnswers = await answers('history', historyPath);

// ---- nginx and the floor serving the identical bytes -------------------------------------------
const listHeaders = { 'Content-Encoding': 'gzip', 'Cache-Control': 'public, max-age=30', ETag: 'W/"bench"' };
const postHeaders = { 'Cache-Control': 'public, max-age=30' };
const served: { path: string; body: Buffer; headers: Record<string, string> }[] = [
  { path: LIST_PATH, body: raw, headers: listHeaders },
  { path: '/post-latest-100', body: postAnswer, headers: postHeaders },
  ...searchAnswers,
  ...historyAnswers,
];
// nginx in both of its ways (see startNginx), with as many workers as the API has processes.
const nginxSendfile = await startNginx(NGINX_PORT, served, { sendfile: true, workers: processes });
const nginxBuffered = await startNginx(NGINX_PORT + 1, served, { sendfile: false, workers: processes });
// The floor answers the API's own requests (the POST included), so wrk sends both the same.
const floorAnswers: FloorAnswer[] = [
  { url: LIST_PATH, body: raw, headers: listHeaders },
  { method: 'POST', url: '/v1/prices/latest', body: postAnswer, headers: postHeaders },
  ...[...searchAnswers, ...historyAnswers].map((a) => ({ url: a.url, body: a.body, headers: a.headers })),
];
const floorScript = bundles.get(FLOOR_ENTRY) as string;
const floorSingle = await startFloor(floorScript, FLOOR_PORT, floorAnswers, 1);
const floorMany = processes > 1 ? await startFloor(floorScript, FLOOR_PORT + 1, floorAnswers, processes) : undefined;

// ---- the load -----------------------------------------------------------------------------------
type Kind = 'list' | 'post_latest' | 'search' | 'history';
const KINDS: readonly Kind[] = ['list', 'post_latest', 'search', 'history'];
type ByKind = Record<Kind, Load>;
interface Request {
  path: string;
  opts: { headers: Record<string, string>; body?: string; paths?: readonly string[] };
}
/** The API's requests, sent alike to the floor. */
const REQUESTS: Record<Kind, Request> = {
  list: { path: LIST_PATH, opts: { headers } },
  post_latest: { path: '/v1/prices/latest', opts: post },
  search: { path: '/v1/prices/search', opts: { headers, paths: names.map(searchPath) } },
  history: { path: '/v1/prices/cn-a/history', opts: { headers, paths: names.map(historyPath) } },
};
/** nginx's: the same bytes at its own paths, the POST's answer to a GET (a static file takes no POST). */
const NGINX_REQUESTS: Record<Kind, Request> = {
  list: { path: LIST_PATH, opts: { headers } },
  post_latest: { path: '/post-latest-100', opts: { headers } },
  search: { path: '/search-0', opts: { headers, paths: searchAnswers.map((a) => a.path) } },
  history: { path: '/history-0', opts: { headers, paths: historyAnswers.map((a) => a.path) } },
};
const wrkOn = (port: number, request: Request, s = seconds): Promise<Load> =>
  wrk(`http://127.0.0.1:${port}${request.path}`, { seconds: s, ...request.opts });

interface Run {
  nginx_sendfile: Load;
  nginx_buffered: Load;
  /** The faster of the two: the limit of this run. */
  nginx: Load;
  api: Load;
  post_latest_100: Load;
  /** nginx serving the bytes of the POST's answer (to a GET): the p99 floor for a body that size. */
  nginx_post_body: Load;
  search: Load;
  history: Load;
  /** nginx serving the search and history answers' bytes, the same 100 in turn. */
  nginx_search: Load;
  nginx_history: Load;
  /** The bare node:http floor with one process, and with N (the same loads when N is 1). */
  floor_single: ByKind;
  floor: ByKind;
}

/** One run: each answer on nginx, on the floor with 1 process and with N, then on the API. */
async function measureRun(): Promise<Run> {
  const sendfile = await wrkOn(NGINX_PORT, NGINX_REQUESTS.list);
  const buffered = await wrkOn(NGINX_PORT + 1, NGINX_REQUESTS.list);
  const bestPort = sendfile.rps >= buffered.rps ? NGINX_PORT : NGINX_PORT + 1;
  const nginx: Partial<ByKind> = { list: bestPort === NGINX_PORT ? sendfile : buffered };
  const single: Partial<ByKind> = {};
  const many: Partial<ByKind> = {};
  const ours: Partial<ByKind> = {};
  for (const kind of KINDS) {
    nginx[kind] ??= await wrkOn(bestPort, NGINX_REQUESTS[kind]);
    single[kind] = await wrkOn(FLOOR_PORT, REQUESTS[kind]);
    many[kind] = floorMany ? await wrkOn(FLOOR_PORT + 1, REQUESTS[kind]) : single[kind];
    ours[kind] = await wrkOn(API_PORT, REQUESTS[kind]);
  }
  const [n, o] = [nginx as ByKind, ours as ByKind];
  return {
    nginx_sendfile: sendfile,
    nginx_buffered: buffered,
    nginx: n.list,
    api: o.list,
    post_latest_100: o.post_latest,
    nginx_post_body: n.post_latest,
    search: o.search,
    history: o.history,
    nginx_search: n.search,
    nginx_history: n.history,
    floor_single: single as ByKind,
    floor: many as ByKind,
  };
}

// Warm-up, not recorded: the first seconds of a fresh process measure V8's tiers and the heap
// growing (the first of three runs had 3-4× the p99 of the others), not the service's steady state.
// The floor's handler is a few lines: a second of each answer brings it to V8's top tier.
for (const kind of KINDS) await wrkOn(API_PORT, REQUESTS[kind], Math.min(3, seconds));
for (const port of floorMany ? [FLOOR_PORT, FLOOR_PORT + 1] : [FLOOR_PORT])
  for (const kind of KINDS) await wrkOn(port, REQUESTS[kind], 1);

const runs: Run[] = [];
for (let run = 0; run < args.runs; run++) {
  runs.push(await measureRun());
  console.log(`run ${run + 1}:`, JSON.stringify(runs.at(-1)));
}

// ---- the API's memory with every cache full ---------------------------------------------------------

/**
 * The RSS of every process of the API (the primary first), after every large body (the full
 * catalogue and every list) went through 4×N connections of their own: the cluster hands each new
 * connection to the next process, so each has built and holds the caches it serves from.
 */
async function rssWithFullCaches(): Promise<number[]> {
  const large = [
    '/v1/prices/latest',
    ...MARKETS.filter((m) => m.capabilities.includes('listings')).map((m) => `/v1/prices/${m.slug}`),
  ];
  for (const path of large) for (let i = 0; i < 4 * processes; i++) await getRaw(`${base}${path}`, true);
  const pid = api.pid as number;
  return [pid, ...descendants(pid)].map(rssMb);
}

/**
 * Where the resident memory is: V8's heap (used and reserved) and the bytes outside it (Buffers),
 * from the API's /metrics (summed over its workers when it runs several); absent if it serves none.
 */
async function heapFigures(): Promise<Record<string, number> | undefined> {
  let scraped: string;
  try {
    scraped = await (await fetch(`http://127.0.0.1:${METRICS_PORT}/metrics`)).text();
  } catch {
    return undefined;
  }
  const gauge = (name: string) =>
    Math.round(Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(scraped)?.[1] ?? Number.NaN) / 2 ** 20);
  return {
    heap_used_mb: gauge('nodejs_heap_size_used_bytes'),
    heap_total_mb: gauge('nodejs_heap_size_total_bytes'),
    external_mb: gauge('nodejs_external_memory_bytes'),
  };
}

const rss = await rssWithFullCaches();
const memory = await heapFigures();
console.log(`api RSS with full caches, per process: ${rss.join(', ')} MB`, memory);

// ---- results ------------------------------------------------------------------------------------
const med = (pick: (r: Run) => number) => median(runs.map(pick));
/** Each answer's load on the API and on nginx, by kind. */
const API_LOAD: Record<Kind, (r: Run) => Load> = {
  list: (r) => r.api,
  post_latest: (r) => r.post_latest_100,
  search: (r) => r.search,
  history: (r) => r.history,
};

/**
 * Per answer: the floor's rps and p99 with 1 process (`floor_single_*`) and with N (`floor_*`),
 * what the N buy (`floor_n_vs_1_*`), and the API against the floor with its own number of
 * processes: `*_vs_floor` (rps, the issue's targets) and `*_p99_vs_floor`.
 */
function floorFigures(): Record<string, number> {
  return Object.fromEntries(
    KINDS.flatMap((k) => [
      [`floor_single_${k}_rps`, med((r) => r.floor_single[k].rps)],
      [`floor_single_${k}_p99_ms`, med((r) => r.floor_single[k].p99_ms)],
      [`floor_${k}_rps`, med((r) => r.floor[k].rps)],
      [`floor_${k}_p99_ms`, med((r) => r.floor[k].p99_ms)],
      [`floor_n_vs_1_${k}`, round(med((r) => r.floor[k].rps / r.floor_single[k].rps))],
      [`${k}_vs_floor`, round(med((r) => API_LOAD[k](r).rps / r.floor[k].rps))],
      [`${k}_p99_vs_floor`, round(med((r) => API_LOAD[k](r).p99_ms / r.floor[k].p99_ms))],
    ]),
  );
}

await writeResult(args.out, {
  what: 'the API vs nginx and vs a bare node:http server (the floor) serving its identical answer bytes: GET /v1/prices/cn-a (gzip, full list), POST latest (100 items), search, history; RSS of every API process',
  machine: `${availableParallelism()} cores; PostgreSQL, the API (API_PROCESSES=${processes}; ${rss.length} processes ran, its primary included), nginx (${processes} worker${processes > 1 ? 's' : ''}), the floor (1 process${processes > 1 ? `, and ${processes} via node:cluster` : ''}) and wrk (2 threads) on the same machine`,
  catalogue_names: size,
  listings: rows,
  list_rows: listJson.data.length,
  list_bytes_gzip: raw.length,
  connections: 50,
  seconds,
  runs,
  nginx_rps: med((r) => r.nginx.rps),
  api_rps: med((r) => r.api.rps),
  api_ratio: round(med((r) => r.api.rps / r.nginx.rps)),
  api_p99_ms: med((r) => r.api.p99_ms),
  nginx_p99_ms: med((r) => r.nginx.p99_ms),
  nginx_post_body_p99_ms: med((r) => r.nginx_post_body.p99_ms),
  post_latest_bytes: postAnswer.length,
  post_latest_p99_ms: med((r) => r.post_latest_100.p99_ms),
  search_p99_ms: med((r) => r.search.p99_ms),
  history_p99_ms: med((r) => r.history.p99_ms),
  nginx_search_p99_ms: med((r) => r.nginx_search.p99_ms),
  nginx_history_p99_ms: med((r) => r.nginx_history.p99_ms),
  // design.md's targets: each p99 against nginx's serving the same bytes in the same run.
  api_p99_vs_nginx: round(med((r) => r.api.p99_ms / r.nginx.p99_ms)),
  post_latest_p99_vs_nginx: round(med((r) => r.post_latest_100.p99_ms / r.nginx_post_body.p99_ms)),
  search_p99_vs_nginx: round(med((r) => r.search.p99_ms / r.nginx_search.p99_ms)),
  history_p99_vs_nginx: round(med((r) => r.history.p99_ms / r.nginx_history.p99_ms)),
  // The largest process is what the design's per-process budget (512 MB) is about.
  api_rss_mb: Math.max(...rss),
  api_rss_total_mb: rss.reduce((a, b) => a + b, 0),
  api_rss_per_process_mb: rss,
  api_memory: memory,
  api_processes: processes,
  floor_processes: processes,
  nginx_workers: processes,
  post_latest_rps: med((r) => r.post_latest_100.rps),
  search_rps: med((r) => r.search.rps),
  history_rps: med((r) => r.history.rps),
  nginx_post_body_rps: med((r) => r.nginx_post_body.rps),
  nginx_search_rps: med((r) => r.nginx_search.rps),
  nginx_history_rps: med((r) => r.nginx_history.rps),
  ...floorFigures(),
});

for (const child of [nginxSendfile, nginxBuffered, floorSingle, ...(floorMany ? [floorMany] : [])])
  await stopProcess(child);
await stopProcess(api);
await pool.end();
process.exit(0);

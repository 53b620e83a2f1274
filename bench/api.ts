/**
 * The read API against the physical limit on the same run: nginx (Debian package) serving the
 * identical bytes of `GET /v1/prices/cn-a` (gzip), both loaded by wrk at 50 connections, runs
 * alternating; nginx both with sendfile and with one large buffer, the faster of the two counting. Also the p99 of `POST /v1/prices/latest` with 100 items, search and history, and
 * the API's RSS with every cache full.
 *
 *   node --import tsx bench/api.ts [--size 35000] [--runs 3] [--seconds 10] [--profile dir]
 *
 * The read model is seeded straight into its own schema (COPY of one full listings snapshot of
 * every marketplace from the simulator's model, a year of daily closes for 100 items); the API
 * runs as its own process, as deployed. nginx runs one worker, like the one Node process.
 * Writes bench/results/api.json. Needs `make up` (PostgreSQL), nginx and wrk (`apt-get install nginx-light wrk`).
 */
import { get } from 'node:http';
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
import { snapshotListings } from './support/listings.js';

const args = benchArgs('api');
const size = args.size;
requireTool('wrk', 'wrk');
requireTool('nginx', 'nginx-light');
const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5442/skinprices';
const SCHEMA = 'bench_api';
const KEYS = 'bench_api_keys';
const API_PORT = 18_480;
const NGINX_PORT = 18_481;
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

// ---- the API as its own process -----------------------------------------------------------------
// Compiled ahead, as make run deploys it (its resident memory is one of the figures).
const build = buildDirectory('bench-api-');
process.on('exit', build.remove);
const [apiBundle] = (await buildServices(['services/api/src/main.ts'], build.dir)).values();
const api = startService(
  apiBundle as string,
  {
    API_PORT: String(API_PORT),
    METRICS_PORT: String(METRICS_PORT),
    DATABASE_SCHEMA: SCHEMA,
    KEYS_SCHEMA: KEYS,
    LOG_LEVEL: 'warn',
  },
  args.profileDir,
);
const base = `http://127.0.0.1:${API_PORT}`;
await waitForUrl(`${base}/openapi.json`);
const headers = { 'x-api-key': secret, 'accept-encoding': 'gzip' };

/** The raw (still gzipped) bytes and headers of one answer. */
function getRaw(url: string): Promise<{ body: Buffer; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    get(url, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ body: Buffer.concat(chunks), headers: res.headers }));
    }).on('error', reject);
  });
}
const raw = (await getRaw(`${base}/v1/prices/cn-a`)).body;
const listJson = JSON.parse(gunzipSync(raw).toString()) as { data: unknown[] };
console.log(`GET /v1/prices/cn-a: ${listJson.data.length} rows, ${raw.length} bytes gzip`);

const post = { headers, body: JSON.stringify({ items: names }) };
const seconds = args.seconds;
// The catalogue's first build is a cold-start cost, not the steady state measured; the answer's
// bytes are also what nginx serves as the limit for a body of that size.
const postResponse = await fetch(`${base}/v1/prices/latest`, {
  method: 'POST',
  headers: { ...headers, 'content-type': 'application/json' },
  body: post.body,
});
const postAnswer = Buffer.from(new Uint8Array(await postResponse.arrayBuffer()));

// The search and history answers for the 100 names, as the API sends them (gzip where it does):
// nginx serves the same bytes under the same rotation, the p99 floor for those answers (design.md
// states their targets against it).
const searchPath = (n: string) => `/v1/prices/search?market_hash_name=${encodeURIComponent(n)}`;
const historyPath = (n: string) => `/v1/prices/cn-a/history?market_hash_name=${encodeURIComponent(n)}`;
const answers = async (kind: string, pathOf: (n: string) => string) =>
  Promise.all(
    names.map(async (n, i) => {
      const got = await getRaw(`${base}${pathOf(n)}`);
      const encoding = got.headers['content-encoding'];
      return {
        path: `/${kind}-${i}`,
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

// ---- nginx serving the identical bytes, in both of its ways (see startNginx) -------------------
const served: { path: string; body: Buffer; headers: Record<string, string> }[] = [
  {
    path: '/v1/prices/cn-a',
    body: raw,
    headers: { 'Content-Encoding': 'gzip', 'Cache-Control': 'public, max-age=30', ETag: 'W/"bench"' },
  },
  { path: '/post-latest-100', body: postAnswer, headers: { 'Cache-Control': 'public, max-age=30' } },
  ...searchAnswers,
  ...historyAnswers,
];
const nginxSendfile = await startNginx(NGINX_PORT, served, { sendfile: true });
const nginxBuffered = await startNginx(NGINX_PORT + 1, served, { sendfile: false });

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
}
// Warm-up, not recorded: the first seconds of a fresh process measure V8's tiers and the heap
// growing (the first of three runs had 3-4× the p99 of the others), not the service's steady state.
for (const [url, opts] of [
  [`${base}/v1/prices/cn-a`, { headers }],
  [`${base}/v1/prices/latest`, post],
  [`${base}${searchPath(names[0] as string)}`, { headers }],
  [`${base}${historyPath(names[0] as string)}`, { headers }],
] as const)
  await wrk(url, { seconds: Math.min(3, seconds), ...opts });

const runs: Run[] = [];
for (let run = 0; run < args.runs; run++) {
  const nginxSendfileLoad = await wrk(`http://127.0.0.1:${NGINX_PORT}/v1/prices/cn-a`, { seconds, headers });
  const nginxBufferedLoad = await wrk(`http://127.0.0.1:${NGINX_PORT + 1}/v1/prices/cn-a`, { seconds, headers });
  const bestPort = nginxSendfileLoad.rps >= nginxBufferedLoad.rps ? NGINX_PORT : NGINX_PORT + 1;
  const r: Run = {
    nginx_sendfile: nginxSendfileLoad,
    nginx_buffered: nginxBufferedLoad,
    nginx: nginxSendfileLoad.rps >= nginxBufferedLoad.rps ? nginxSendfileLoad : nginxBufferedLoad,
    api: await wrk(`${base}/v1/prices/cn-a`, { seconds, headers }),
    nginx_post_body: await wrk(`http://127.0.0.1:${bestPort}/post-latest-100`, { seconds, headers }),
    post_latest_100: await wrk(`${base}/v1/prices/latest`, { seconds, ...post }),
    search: await wrk(`${base}/v1/prices/search`, { seconds, headers, paths: names.map(searchPath) }),
    history: await wrk(`${base}/v1/prices/cn-a/history`, { seconds, headers, paths: names.map(historyPath) }),
    nginx_search: await wrk(`http://127.0.0.1:${bestPort}/search-0`, {
      seconds,
      headers,
      paths: searchAnswers.map((a) => a.path),
    }),
    nginx_history: await wrk(`http://127.0.0.1:${bestPort}/history-0`, {
      seconds,
      headers,
      paths: historyAnswers.map((a) => a.path),
    }),
  };
  runs.push(r);
  console.log(`run ${run + 1}:`, JSON.stringify(r));
}

// Every large body once (the full catalogue and every list), then the API's resident memory.
for (const path of [
  '/v1/prices/latest',
  ...MARKETS.filter((m) => m.capabilities.includes('listings')).map((m) => `/v1/prices/${m.slug}`),
])
  await getRaw(`${base}${path}`);
const rss = rssMb(api.pid as number);
// Where the resident memory is: V8's heap (used and reserved) and the bytes outside it (Buffers).
const scraped = await (await fetch(`http://127.0.0.1:${METRICS_PORT}/metrics`)).text();
const gauge = (name: string) =>
  Math.round(Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(scraped)?.[1] ?? Number.NaN) / 2 ** 20);
const memory = {
  heap_used_mb: gauge('nodejs_heap_size_used_bytes'),
  heap_total_mb: gauge('nodejs_heap_size_total_bytes'),
  external_mb: gauge('nodejs_external_memory_bytes'),
};
console.log(`api RSS with full caches: ${rss} MB`, memory);

const med = (pick: (r: Run) => number) => median(runs.map(pick));
await writeResult(args.out, {
  what: 'GET /v1/prices/cn-a (gzip, full list) on the API vs nginx serving the identical bytes; p99 of POST latest (100 items), search, history; RSS',
  machine:
    '2 cores; PostgreSQL, the API (one Node process), nginx (one worker) and wrk (2 threads) on the same machine',
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
  api_rss_mb: rss,
  api_memory: memory,
});

await stopProcess(nginxSendfile);
await stopProcess(nginxBuffered);
await stopProcess(api);
await pool.end();
process.exit(0);

/**
 * The read API against the physical limit on the same run: nginx (Debian package) serving the
 * identical bytes of `GET /v1/prices/cn-a` (gzip), both loaded by autocannon at 50 connections.
 * Also the p99 of `POST /v1/prices/latest` with 100 items, search and history, and the API's RSS
 * with its caches full.
 *
 *   npx tsx bench/api.ts [catalogueSize=35000] [seconds=10]
 *
 * The read model is seeded straight into its own schema (COPY of one full listings snapshot of
 * every marketplace from the simulator's model, a year of daily closes for 100 items); the API
 * runs as its own process, as deployed. nginx runs one worker, like the one Node process.
 * Writes bench/results/api.json. Needs `make up` (PostgreSQL) and nginx (`apt-get install nginx-light`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import autocannon from 'autocannon';
import { API_MIGRATIONS_DIR, KeyStore } from '@skinprices/api';
import { MARKETS } from '@skinprices/domain';
import { LISTING_COLUMNS, listingRow, MIGRATIONS_DIR } from '@skinprices/materializer';
import { generateCatalogue, MarketModel } from '@skinprices/simulator';
import { waitForUrl } from '@skinprices/runtime';
import { copyRows, createPool, ensureSchema, migrate } from '@skinprices/store';
import { snapshotListings } from './support/listings.js';

const size = Number(process.argv[2] ?? 35_000);
const seconds = Number(process.argv[3] ?? 10);
const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/skinprices';
const SCHEMA = 'bench_api';
const KEYS = 'bench_api_keys';
const API_PORT = 18_480;
const NGINX_PORT = 18_481;
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
const { secret } = await new KeyStore(keysPool).create({
  customer: 'bench@example.com',
  plan: 'enterprise',
  perSecond: 1_000_000,
  perMinute: 1_000_000_000,
  perDay: 1_000_000_000,
});
await keysPool.end();

// ---- the API as its own process -----------------------------------------------------------------
function start(cmd: string, args: string[], env: Record<string, string> = {}): ChildProcess {
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] });
  process.on('exit', () => child.kill('SIGTERM'));
  return child;
}
const api = start(process.execPath, ['--import', 'tsx', 'services/api/src/main.ts'], {
  API_PORT: String(API_PORT),
  DATABASE_SCHEMA: SCHEMA,
  KEYS_SCHEMA: KEYS,
  LOG_LEVEL: 'warn',
});
const base = `http://127.0.0.1:${API_PORT}`;
await waitForUrl(`${base}/openapi.json`);
const headers = { 'x-api-key': secret, 'accept-encoding': 'gzip' };
const first = await fetch(`${base}/v1/prices/cn-a`, { headers });
// fetch decodes gzip itself; take the raw bytes from a second, undecoded request below.
void (await first.arrayBuffer());
const raw = await new Promise<Buffer>((resolve, reject) => {
  import('node:http')
    .then(({ get }) =>
      get(`${base}/v1/prices/cn-a`, { headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve(Buffer.concat(chunks)));
      }).on('error', reject),
    )
    .catch(reject);
});
const listJson = JSON.parse(gunzipSync(raw).toString()) as { data: unknown[] };
console.log(`GET /v1/prices/cn-a: ${listJson.data.length} rows, ${raw.length} bytes gzip`);

// ---- nginx serving the identical bytes ---------------------------------------------------------
const dir = mkdtempSync(join(tmpdir(), 'bench-nginx-'));
writeFileSync(join(dir, 'cn-a.json.gz'), raw);
writeFileSync(
  join(dir, 'nginx.conf'),
  `worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:${NGINX_PORT};
    location = /v1/prices/cn-a {
      default_type application/json;
      add_header Content-Encoding gzip;
      add_header Cache-Control "public, max-age=30";
      alias ${dir}/cn-a.json.gz;
    }
  }
}
`,
);
// nginx's worker runs as an unprivileged user: the temp dir (0700) must be readable to it.
chmodSync(dir, 0o755);
chmodSync(join(dir, 'cn-a.json.gz'), 0o644);
const nginx = start('nginx', ['-c', join(dir, 'nginx.conf'), '-p', dir]);
await waitForUrl(`http://127.0.0.1:${NGINX_PORT}/v1/prices/cn-a`);

interface Load {
  rps: number;
  p50_ms: number;
  p99_ms: number;
  errors: number;
  non2xx: number;
}
async function load(url: string, opts: Partial<autocannon.Options> = {}): Promise<Load> {
  const r = await autocannon({ url, connections: 50, duration: seconds, headers, ...opts });
  if (r.non2xx > 0 || r.errors > 0)
    throw new Error(`${url}: ${r.non2xx} non-2xx, ${r.errors} errors: not a valid measurement`);
  return {
    rps: Math.round(r.requests.average),
    p50_ms: r.latency.p50,
    p99_ms: r.latency.p99,
    errors: r.errors,
    non2xx: r.non2xx,
  };
}

const nginxList = await load(`http://127.0.0.1:${NGINX_PORT}/v1/prices/cn-a`);
console.log('nginx  GET /v1/prices/cn-a', nginxList);
const apiList = await load(`${base}/v1/prices/cn-a`);
console.log('api    GET /v1/prices/cn-a', apiList);
// Warm the catalogue once (its first build is a cold-start cost, not the steady state measured).
await (
  await fetch(`${base}/v1/prices/latest`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ items: names }),
  })
).arrayBuffer();
const post = await load(`${base}/v1/prices/latest`, {
  method: 'POST',
  headers: { ...headers, 'content-type': 'application/json' },
  body: JSON.stringify({ items: names }),
});
console.log('api    POST /v1/prices/latest (100 items)', post);
const search = await load(`${base}/v1/prices/search?market_hash_name=${encodeURIComponent(names[0] as string)}`);
console.log('api    GET /v1/prices/search', search);
const history = await load(`${base}/v1/prices/cn-a/history?market_hash_name=${encodeURIComponent(names[0] as string)}`);
console.log('api    GET /v1/prices/cn-a/history', history);

// Every large body once, then the API's resident memory.
for (const path of [
  '/v1/prices/latest',
  ...['cn-a', 'cn-b', 'cn-c', 'cn-d', 'eu-a', 'eu-b'].map((m) => `/v1/prices/${m}`),
])
  await (await fetch(`${base}${path}`, { headers })).arrayBuffer();
const rssMb = Math.round(
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${api.pid}/status`, 'utf8'))?.[1] ?? 0) / 1024,
);
console.log(`api RSS with full caches: ${rssMb} MB`);

const report = {
  what: 'GET /v1/prices/cn-a (gzip, full list) on the API vs nginx serving the identical bytes; p99 of POST latest (100 items), search, history; RSS',
  machine: '2 cores; PostgreSQL, the API (one Node process), nginx (one worker) and autocannon on the same machine',
  catalogue_names: size,
  listings: rows,
  list_rows: listJson.data.length,
  list_bytes_gzip: raw.length,
  connections: 50,
  seconds,
  nginx: nginxList,
  api: apiList,
  api_ratio: Number((apiList.rps / nginxList.rps).toFixed(3)),
  api_p99_ms: apiList.p99_ms,
  post_latest_100: post,
  search,
  history,
  api_rss_mb: rssMb,
  targets: { api_ratio: 0.7, api_p99_ms: 20, small_p99_ms: 15, api_rss_mb: 512 },
  measured_at: new Date().toISOString(),
};
writeFileSync(new URL('./results/api.json', import.meta.url), `${JSON.stringify(report, null, 2)}\n`);
console.log(JSON.stringify({ api_ratio: report.api_ratio, api_p99_ms: report.api_p99_ms, api_rss_mb: rssMb }));

nginx.kill('SIGTERM');
api.kill('SIGTERM');
await pool.end();
process.exit(0);

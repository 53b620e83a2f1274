/**
 * The read side on a PostgreSQL streaming replica, as deployed: the pipeline (simulator, pollers,
 * one materializer) writes to the primary; API processes read from the primary or from the hot
 * standby `make up-replica` runs, sharing one Redis for their limits. Used by the replica test
 * (test/integration/replica.test.ts) and its benchmark (bench/replica.ts).
 */
import { API_MIGRATIONS_DIR, KeyStore } from '@skinprices/api';
import type { MarketSlug } from '@skinprices/domain';
import type { Poller } from '@skinprices/poller';
import { waitForUrl } from '@skinprices/runtime';
import { createPool, migrate, type Pool } from '@skinprices/store';
import { SalesExportCache } from '@skinprices/exports';
import {
  EVERY_ENDPOINT_POLLS,
  projectTopics,
  startMaterializer,
  startPoller,
  startSimulator,
  untilApplied,
  type Sim,
} from './pipeline.js';
import { freePort, startService, type Service } from './services.js';
import type { TestStack } from './stack.js';

const STANDBY_URL = process.env.STANDBY_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5443/skinprices';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

export interface ReplicaApi {
  name: string;
  on: 'primary' | 'standby';
  url: string;
  service: Service;
}

export interface ReplicaPlatform {
  sim: Sim;
  pollers: Map<MarketSlug, Poller>;
  /** The read model's schema on the primary, and pools on each server. */
  schema: string;
  keysSchema: string;
  primary: Pool;
  standby: Pool;
  keys: { reader: string; limited: string };
  apis: ReplicaApi[];
  /** Starts an API process on `on` (also used to restart one that was killed). */
  startApi: (name: string, on: 'primary' | 'standby') => Promise<ReplicaApi>;
}

/** Waits until the standby has replayed everything the primary had written when this was called. */
export async function standbyCaughtUp(primary: Pool, standby: Pool, timeoutMs = 30_000): Promise<number> {
  const t0 = Date.now();
  const { rows } = await primary.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
  const lsn = rows[0]?.lsn as string;
  for (;;) {
    const r = await standby.query<{ ok: boolean }>('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok', [lsn]);
    if (r.rows[0]?.ok) return Date.now() - t0;
    if (Date.now() - t0 > timeoutMs) throw new Error(`the standby did not replay up to ${lsn} in ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 20));
  }
}

/**
 * Starts the pipeline on the primary, polls every kind of EVERY_ENDPOINT_POLLS once (so every endpoint
 * has data), issues the keys, and starts the API processes named in `apis`.
 */
export async function startReplicaPlatform(
  stack: TestStack,
  o: { size: number; apis: [string, 'primary' | 'standby'][]; perMinute: number },
): Promise<ReplicaPlatform> {
  const standby = createPool({ databaseUrl: STANDBY_URL, max: 2, applicationName: 'replica-test' });
  stack.defer(() => standby.end());
  const answers = await standby.query<{ standby: boolean }>('SELECT pg_is_in_recovery() AS standby').catch(() => {
    throw new Error(`no hot standby answers at ${STANDBY_URL}: run \`make up-replica\` (make test does)`);
  });
  if (!answers.rows[0]?.standby) throw new Error(`${STANDBY_URL} is not a standby (pg_is_in_recovery() is false)`);
  const sim = await startSimulator(stack, o.size);
  const suffix = await projectTopics(stack);
  const { name: schema, pool: primary } = await stack.schema();
  const { name: keysSchema, pool: keysPool } = await stack.schema();
  await startMaterializer(stack, suffix, primary);
  const pollers = new Map<MarketSlug, Poller>();
  for (const [market, kinds] of EVERY_ENDPOINT_POLLS) {
    const { poller } = await startPoller(stack, sim, market, suffix);
    pollers.set(market, poller);
    for (const kind of kinds) await untilApplied(primary, (await poller.runOnce(kind)).marker.cycle_id, 60_000);
  }
  // The materializer's export loop builds and stores the sales export; the API only serves it.
  await new SalesExportCache(primary).refresh();
  await migrate(keysPool, API_MIGRATIONS_DIR);
  const store = new KeyStore(keysPool);
  const keys = {
    reader: (await store.create({ customer: 'reader@replica.test', plan: 'enterprise', perSecond: 10_000 })).secret,
    // The per-second window is raised out of the way: only the minute is counted.
    limited: (
      await store.create({ customer: 'limited@replica.test', plan: 'basic', perMinute: o.perMinute, perSecond: 1_000 })
    ).secret,
  };
  const startApi = async (name: string, on: 'primary' | 'standby'): Promise<ReplicaApi> => {
    const port = await freePort();
    const service = startService(name, 'services/api/src/main.ts', {
      DATABASE_URL: on === 'primary' ? stack.env.databaseUrl : STANDBY_URL,
      DATABASE_SCHEMA: schema,
      KEYS_SCHEMA: keysSchema,
      API_HOST: '127.0.0.1',
      API_PORT: String(port),
      REDIS_URL,
      LOG_LEVEL: 'warn',
      // API_PROCESSES left at its default: each API a cluster of workers, as deployed.
    });
    stack.defer(async () => void (await service.stop()));
    const url = `http://127.0.0.1:${port}`;
    await waitForUrl(`${url}/openapi.json`, 120_000, 200).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${service.output()}`);
    });
    return { name, on, url, service };
  };
  await standbyCaughtUp(primary, standby);
  const apis = await Promise.all(o.apis.map(([name, on]) => startApi(name, on)));
  return { sim, pollers, schema, keysSchema, primary, standby, keys, apis, startApi };
}

export interface TimedChange {
  market: MarketSlug;
  name: string;
  price: string;
  /** ms from the end of the poll that produced it to its commit on the primary. */
  commitMs: number;
  /** ms from the end of that poll until each API served it, by API name. */
  visibleMs: Record<string, number>;
  /** The standby's replay lag as its status reported right after (s). */
  lagS: number | null;
}

/**
 * Sets `count` new prices upstream on `market`, polls once, and times each change until every API
 * serves it in GET /v1/prices/{market} (and its commit on the primary, for where the time goes).
 */
export async function timeChanges(
  p: ReplicaPlatform,
  market: MarketSlug,
  count: number,
  round: number,
  timeoutMs = 30_000,
): Promise<TimedChange[]> {
  const { rows } = await p.primary.query<{ market_hash_name: string }>(
    `SELECT market_hash_name FROM listings_current WHERE market = $1 AND phase = '' AND price IS NOT NULL
     ORDER BY market_hash_name OFFSET $2 LIMIT $3`,
    [market, round * count, count],
  );
  // A price no simulated walk produces: 7 in the cents, and a per-change whole part.
  const changes = rows.map((r, i) => ({ name: r.market_hash_name, price: `${80_000 + round * 100 + i}.77` }));
  for (const c of changes)
    await p.sim.control('POST', '/_sim/override', {
      market,
      market_hash_name: c.name,
      phase: '',
      price: c.price,
      count: 1,
    });
  const poller = p.pollers.get(market) as Poller;
  await poller.runOnce('LISTINGS');
  const polledAt = Date.now();
  const visible = new Map<string, Record<string, number>>(changes.map((c) => [c.name, {}]));
  const committed = new Map<string, number>();
  const deadline = polledAt + timeoutMs;
  const watchApi = async (api: ReplicaApi) => {
    while (changes.some((c) => visible.get(c.name)?.[api.name] === undefined) && Date.now() < deadline) {
      const res = await fetch(`${api.url}/v1/prices/${market}`, { headers: { 'x-api-key': p.keys.reader } });
      const now = Date.now();
      const body = (await res.json()) as { data?: { market_hash_name: string; price?: string; price_rmb?: string }[] };
      const byName = new Map((body.data ?? []).map((r) => [r.market_hash_name, r.price ?? r.price_rmb]));
      for (const c of changes) {
        const seen = visible.get(c.name) as Record<string, number>;
        if (seen[api.name] === undefined && byName.get(c.name) === c.price) seen[api.name] = now - polledAt;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const watchCommit = async () => {
    while (committed.size < changes.length && Date.now() < deadline) {
      const r = await p.primary.query<{ market_hash_name: string; price: string }>(
        `SELECT market_hash_name, price::text AS price FROM listings_current
         WHERE market = $1 AND phase = '' AND market_hash_name = ANY($2)`,
        [market, changes.map((c) => c.name)],
      );
      const now = Date.now();
      for (const row of r.rows)
        if (
          !committed.has(row.market_hash_name) &&
          changes.find((c) => c.name === row.market_hash_name)?.price === row.price
        )
          committed.set(row.market_hash_name, now - polledAt);
      await new Promise((res) => setTimeout(res, 10));
    }
  };
  await Promise.all([...p.apis.map(watchApi), watchCommit()]);
  const standbyApi = p.apis.find((a) => a.on === 'standby');
  const status = standbyApi
    ? ((await (await fetch(`${standbyApi.url}/v1/status`, { headers: { 'x-api-key': p.keys.reader } })).json()) as {
        database?: { replay_lag_seconds: number | null };
      })
    : undefined;
  return changes.map((c) => ({
    market,
    name: c.name,
    price: c.price,
    commitMs: committed.get(c.name) ?? Number.NaN,
    visibleMs: visible.get(c.name) as Record<string, number>,
    lagS: status?.database?.replay_lag_seconds ?? null,
  }));
}

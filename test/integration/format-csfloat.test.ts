/**
 * The CSFloat format end to end: the simulator serves marketplace usd-3 as CSFloat's listings API
 * (individual listings, cursor-paged, Authorization key, rate-limit headers), a poller speaks it,
 * and the events go through the real Kafka and materializer to the read API. What a customer gets
 * from GET /v1/prices/latest for usd-3 must equal the simulator's truth as the format sees it:
 * every (name, phase) with a listing, its lowest buy-now price and its number of listings (a truth
 * row without a listing does not exist on CSFloat). Without an API key CSFloat answers 401: the
 * cycle must fail visibly and say nothing, least of all invented prices.
 */
import { API_MIGRATIONS_DIR, buildApp, KeyStore, MemoryRateLimiter, ReadModel } from '@skinprices/api';
import { catalogueKey, type PhaseOrNone } from '@skinprices/domain';
import { createLogger } from '@skinprices/runtime';
import { migrate, type Pool } from '@skinprices/store';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  projectTopics,
  startMaterializer,
  startPoller,
  startSimulator,
  untilApplied,
  type Sim,
} from '../support/pipeline.js';
import { TestStack } from '../support/stack.js';

interface TruthRow {
  market_hash_name: string;
  phase: string;
  price: string | null;
  count: number;
}
type Catalogue = Record<string, Record<string, { price: string | null; count: number; phase: string }>>;

describe('csfloat format: simulator → poller → Kafka → materializer → API', () => {
  const stack = new TestStack();
  let sim: Sim;
  let suffix: string;
  let pool: Pool;
  let keys: KeyStore;
  let key: string;
  const apps: FastifyInstance[] = [];

  /**
   * An API process over the read model. Each test asks a fresh one: a long-lived one serves the
   * catalogue body built from the previous version's shard (a cache of the API, reported).
   */
  async function api(): Promise<FastifyInstance> {
    const app = buildApp({
      keys,
      limiter: new MemoryRateLimiter(),
      read: new ReadModel(pool),
      version: () => 0,
      logger: createLogger('api', 'silent'),
    });
    apps.push(app);
    await app.ready();
    return app;
  }

  beforeAll(async () => {
    sim = await startSimulator(stack, 60, undefined, { 'usd-3': 'csfloat' });
    suffix = await projectTopics(stack);
    ({ pool } = await stack.schema());
    await startMaterializer(stack, suffix, pool);
    const { pool: keysPool } = await stack.schema();
    await migrate(keysPool, API_MIGRATIONS_DIR);
    keys = new KeyStore(keysPool);
    key = (await keys.create({ customer: 'csfloat@example.com', plan: 'basic' })).secret;
  }, 120_000);
  afterAll(async () => {
    for (const app of apps) await app.close();
    await stack.cleanup();
  });

  /** usd-3's part of the combined catalogue, as a customer asks for it. */
  async function usd3(app: FastifyInstance): Promise<Catalogue> {
    const res = await app.inject({
      method: 'GET',
      url: '/v1/prices/latest?markets=usd-3',
      headers: { 'x-api-key': key },
    });
    expect(res.statusCode, res.body).toBe(200);
    return (res.json() as { items: Catalogue }).items;
  }

  it('without an API key: CSFloat answers 401, the cycle is FAILED, and no row appears', async () => {
    const { poller } = await startPoller(stack, sim, 'usd-3', suffix, { format: 'csfloat' });
    const { marker, rejected } = await poller.runOnce('LISTINGS');
    expect(marker).toMatchObject({ market: 'usd-3', outcome: 'FAILED', items_seen: 0, events_emitted: 0 });
    expect(marker.error).toMatch(/upstream_rejected: usd-3: HTTP 401 on \/api\/v1\/listings/);
    expect(rejected).toBe(0);
    await untilApplied(pool, marker.cycle_id);
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM listings_current WHERE market = 'usd-3'`);
    expect(rows[0]).toEqual({ n: 0 });
    expect(await usd3(await api())).toEqual({});
  });

  it('with the key: every item with a listing arrives with the lowest buy-now price and the count of the truth', async () => {
    // A minute later upstream: with the clock frozen, a new poller's first cycle would have the
    // failed cycle's id (market, kind, start, cycle number), and one id is applied once.
    await sim.control('POST', '/_sim/clock', { advanceMs: 60_000 });
    const { poller } = await startPoller(stack, sim, 'usd-3', suffix, { format: 'csfloat', apiKey: 'test-key' });
    const { marker, rejected, duplicates } = await poller.runOnce('LISTINGS');
    expect(marker).toMatchObject({ outcome: 'COMPLETE', error: null, mode: 'FULL' });
    expect([rejected, duplicates]).toEqual([0, 0]);
    await untilApplied(pool, marker.cycle_id);

    const { records } = (await sim.control('GET', `/_sim/truth?market=usd-3&kind=listings&at=${sim.clock.now()}`)) as {
      records: TruthRow[];
    };
    // CSFloat lists offers, not items: a truth row with no listing has nothing to show there.
    const listed = records.filter((r) => r.count > 0);
    expect(listed.length).toBeGreaterThan(30);
    expect(records.length).toBeGreaterThan(listed.length);
    const want = listed
      .map(
        (r) =>
          `${catalogueKey({ marketHashName: r.market_hash_name, phase: r.phase as PhaseOrNone })}|${r.phase}|${r.price}|${r.count}`,
      )
      .sort();
    const got = Object.entries(await usd3(await api()))
      .map(([k, v]) => `${k}|${v['usd-3']!.phase}|${v['usd-3']!.price}|${v['usd-3']!.count}`)
      .sort();
    expect(got).toEqual(want);
    expect(marker.items_seen).toBe(listed.length);
    // The Doppler phase came through item.phase: a phase row is its own catalogue entry.
    expect(got.some((g) => /\((Phase \d|Ruby|Sapphire|Black Pearl|Emerald)\)\|/.test(g))).toBe(true);
  });
});

/**
 * `make replay`: the read model rebuilt from the topics equals the live one table by table
 * (checksums), subscribers hear no phantom changes, a running materializer blocks the replay,
 * and after a swap the live materializer resumes where the replay stopped.
 */
import { AppError, type MarketSlug } from '@skinprices/domain';
import { topicFor } from '@skinprices/events';
import type { Kind } from '@skinprices/marketplaces';
import {
  MIGRATIONS_DIR,
  replay,
  tableChecksums,
  type Materializer,
  type OutboxPublisher,
} from '@skinprices/materializer';
import type { Poller } from '@skinprices/poller';
import { createLogger } from '@skinprices/runtime';
import { createPool, type Pool } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  projectTopics,
  readTopic,
  startMaterializer,
  startOutbox,
  startPoller,
  startSimulator,
  untilApplied,
  type Sim,
} from '../support/pipeline.js';
import { TestStack } from '../support/stack.js';

const PLAN: [MarketSlug, Kind[]][] = [
  ['cn-a', ['LISTINGS', 'BUYORDERS', 'FLOAT_RANGED', 'FLOAT_BUYORDERS', 'SALES']],
  ['cn-b', ['LISTINGS', 'BUYORDERS']],
  ['eu-a', ['LISTINGS']],
  ['store', ['LISTINGS', 'ORDER_BOOK']],
  ['hist-a', ['HISTORY']],
];

describe('materializer: replay', () => {
  const stack = new TestStack();
  let sim: Sim;
  let suffix: string;
  let schema: string;
  let pool: Pool;
  const groupId = stack.groupId();
  const pollers = new Map<MarketSlug, Poller>();
  const logger = createLogger('replay', 'silent');
  let outbox: OutboxPublisher;
  let live: Materializer;

  async function round(): Promise<void> {
    for (const [market, kinds] of PLAN)
      for (const kind of kinds) {
        const { marker } = await (pollers.get(market) as Poller).runOnce(kind);
        await untilApplied(pool, marker.cycle_id);
      }
  }

  async function drained(): Promise<number> {
    for (;;) {
      const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM price_change_outbox');
      if (rows[0]?.n === 0) return outbox.published;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  const changesTopic = () => `${topicFor('priceChange').name}${suffix}`;

  beforeAll(async () => {
    sim = await startSimulator(stack, 120);
    suffix = await projectTopics(stack);
    ({ name: schema, pool } = await stack.schema());
    stack.defer(async () => {
      const admin = createPool({ databaseUrl: stack.env.databaseUrl, max: 1 });
      await admin.query(`DROP SCHEMA IF EXISTS ${schema}_rb CASCADE; DROP SCHEMA IF EXISTS ${schema}_previous CASCADE`);
      await admin.end();
    });
    live = await startMaterializer(stack, suffix, pool, { groupId });
    outbox = await startOutbox(stack, suffix, pool);
    for (const [m] of PLAN) pollers.set(m, (await startPoller(stack, sim, m, suffix)).poller);

    // Three rounds across a day boundary, with a removal and a partial cycle in between.
    await round();
    await sim.control('POST', '/_sim/clock', { advanceMs: 3 * 3_600_000 });
    const { records } = (await sim.control('GET', '/_sim/truth?market=cn-b&kind=listings')) as {
      records: { market_hash_name: string; phase: string; price: string | null }[];
    };
    const gone = records.find((r) => r.price !== null)!;
    await sim.control('POST', '/_sim/override', { market: 'cn-b', ...gone, price: null });
    await sim.control('POST', '/_sim/faults', { market: 'eu-a', kind: 'zeroPrices' });
    await round();
    await sim.control('DELETE', '/_sim/faults');
    await sim.control('POST', '/_sim/clock', { advanceMs: 22 * 3_600_000 });
    await round();
    await drained();
  }, 180_000);
  afterAll(() => stack.cleanup());

  const options = () => ({
    databaseUrl: stack.env.databaseUrl,
    schema,
    groupId,
    topicSuffix: suffix,
    migrationsDir: MIGRATIONS_DIR,
    hourlyRetentionDays: 100,
  });

  it('refuses while a materializer runs on the schema', async () => {
    const err = await replay(
      { ...options(), swap: false, target: `${schema}_rb` },
      { kafka: stack.kafka, serde: stack.serde, logger },
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe('busy');
  });

  it('rebuilds every table equal to the live one, without a single phantom change', async () => {
    const published = await drained();
    expect(published).toBeGreaterThan(200);
    // The live materializer must be stopped for a replay (the test above shows the lock).
    await live.stop();
    const liveSums = await tableChecksums(pool);
    const result = await replay(
      { ...options(), swap: false, target: `${schema}_rb` },
      { kafka: stack.kafka, serde: stack.serde, logger },
    );
    expect(result.events).toBeGreaterThan(1000);
    // Not vacuous: the read model is full of every kind.
    for (const t of [
      'listings_current',
      'listing_hourly',
      'listing_daily',
      'buyorders_current',
      'float_ranged_current',
      'float_buyorders_current',
      'order_book_current',
      'sales',
      'item_liquidity',
      'item_liquidity_score',
      'market_cap_hourly',
      'poll_cycles',
    ])
      expect(liveSums[t]?.rows, t).toBeGreaterThan(0);
    expect(result.checksums).toEqual(liveSums);
    const events = await readTopic(stack, changesTopic(), 'priceChange', () => false, 3_000);
    expect(events).toHaveLength(published);
  });

  it('swaps the rebuilt model in; the live materializer resumes after it and publishes only new changes', async () => {
    const before = await tableChecksums(pool);
    const result = await replay({ ...options(), swap: true }, { kafka: stack.kafka, serde: stack.serde, logger });
    expect(result.schema).toBe(schema);
    expect(await tableChecksums(pool)).toEqual(before);

    const published = outbox.published;
    await startMaterializer(stack, suffix, pool, { groupId });
    await sim.control('POST', '/_sim/clock', { advanceMs: 3_600_000 });
    const { marker } = await (pollers.get('cn-a') as Poller).runOnce('LISTINGS');
    await untilApplied(pool, marker.cycle_id);
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM listings_current WHERE cycle_id = $1`,
      [marker.cycle_id],
    );
    expect(rows[0]?.n).toBeGreaterThan(0);
    const total = await drained();
    // Only the changes of the new cycle went out (at most one per row it touched).
    expect(total - published).toBeGreaterThan(0);
    expect(total - published).toBeLessThanOrEqual(marker.events_emitted);
  });
});

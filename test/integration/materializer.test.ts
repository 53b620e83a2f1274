/**
 * Simulator → pollers → real Kafka → materializer → real PostgreSQL: the read model equals the
 * simulator's truth; vanished items become NULL (never zero) only after a complete cycle; a
 * partial cycle changes nothing; committed changes reach price-changes.v1.
 */
import { topicFor } from '@skinprices/events';
import type { OutboxPublisher } from '@skinprices/materializer';
import type { Pool } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  projectTopics,
  readTopic,
  startMaterializer,
  startOutbox,
  startPoller,
  startSimulator,
  type Sim,
  untilApplied,
} from '../support/pipeline.js';
import { TestStack } from '../support/stack.js';

type MarketSlug = 'cn-a' | 'cn-b' | 'eu-a';

describe('materializer: listings', () => {
  const stack = new TestStack();
  let sim: Sim;
  let suffix: string;
  let pool: Pool;
  const pollers = new Map<MarketSlug, Awaited<ReturnType<typeof startPoller>>['poller']>();
  let outbox: OutboxPublisher;

  beforeAll(async () => {
    sim = await startSimulator(stack, 200);
    suffix = await projectTopics(stack);
    ({ pool } = await stack.schema());
    await startMaterializer(stack, suffix, pool);
    outbox = await startOutbox(stack, suffix, pool);
    for (const m of ['cn-a', 'cn-b', 'eu-a'] as const)
      pollers.set(m, (await startPoller(stack, sim, m, suffix)).poller);
  }, 60_000);
  afterAll(() => stack.cleanup());

  /** Runs a listings cycle and waits until the materializer has applied its marker. */
  async function cycle(market: MarketSlug, poller = pollers.get(market)!) {
    const { marker } = await poller.runOnce('LISTINGS');
    await untilApplied(pool, marker.cycle_id, 20_000);
    return marker;
  }

  async function state(market: MarketSlug): Promise<Map<string, string>> {
    const { rows } = await pool.query<{ k: string; v: string }>(
      `SELECT market_hash_name || chr(31) || phase AS k, price::text || ' x' || count AS v
       FROM listings_current WHERE market = $1 AND price IS NOT NULL`,
      [market],
    );
    return new Map(rows.map((r) => [r.k, r.v]));
  }

  async function truth(market: MarketSlug): Promise<Map<string, string>> {
    const { records } = (await sim.control('GET', `/_sim/truth?market=${market}&kind=listings`)) as {
      records: { market_hash_name: string; phase: string; price: string | null; count: number }[];
    };
    return new Map(
      records
        .filter((r) => r.price !== null)
        .map((r) => [`${r.market_hash_name}\u001f${r.phase}`, `${r.price} x${r.count}`]),
    );
  }

  it('materializes a full cycle of each marketplace equal to the truth', async () => {
    for (const m of pollers.keys()) await cycle(m);
    for (const m of pollers.keys()) expect(await state(m)).toEqual(await truth(m));
    const { rows } = await pool.query('SELECT market, last_outcome FROM market_freshness ORDER BY market');
    expect(rows).toEqual([
      { market: 'cn-a', last_outcome: 'COMPLETE' },
      { market: 'cn-b', last_outcome: 'COMPLETE' },
      { market: 'eu-a', last_outcome: 'COMPLETE' },
    ]);
  });

  it('follows price moves through delta cycles, with hourly and daily history', async () => {
    await sim.control('POST', '/_sim/clock', { advanceMs: 2 * 3_600_000 });
    for (const m of pollers.keys()) {
      const marker = await cycle(m);
      expect(marker.mode).toBe('DELTA');
      expect(await state(m)).toEqual(await truth(m));
    }
    const { rows } = await pool.query(
      `SELECT count(DISTINCT hour)::int AS hours, count(DISTINCT day)::int AS days
       FROM listing_hourly h JOIN listing_daily d USING (market, market_hash_name, phase)`,
    );
    expect(rows[0]).toEqual({ hours: 2, days: 1 });
  });

  it('nulls an item that vanished (explicit removal), never zero, and records the change', async () => {
    const [name, phase] = [...(await state('cn-b')).keys()][0]!.split('\u001f') as [string, string];
    await sim.control('POST', '/_sim/override', { market: 'cn-b', market_hash_name: name, phase, price: null });
    await cycle('cn-b');
    const { rows } = await pool.query(
      'SELECT price, count FROM listings_current WHERE market = $1 AND market_hash_name = $2 AND phase = $3',
      ['cn-b', name, phase],
    );
    expect(rows).toEqual([{ price: null, count: 0 }]);
    expect(await state('cn-b')).toEqual(await truth('cn-b'));
  });

  it('a poller restarted without memory still clears vanished items: the FULL marker does', async () => {
    const [name, phase] = [...(await state('cn-b')).keys()][1]!.split('\u001f') as [string, string];
    // CN-B leaves an item without listings out of its answer. A restarted poller has no memory
    // of what it sent, so its first (FULL) cycle carries no removal: only the marker can tell.
    await sim.control('POST', '/_sim/override', { market: 'cn-b', market_hash_name: name, phase, price: null });
    await sim.control('POST', '/_sim/clock', { advanceMs: 60_000 });
    const { poller: fresh } = await startPoller(stack, sim, 'cn-b', suffix);
    const marker = await cycle('cn-b', fresh);
    expect(marker).toMatchObject({ mode: 'FULL', outcome: 'COMPLETE' });
    const { rows } = await pool.query(
      'SELECT price, count, cycle_id FROM listings_current WHERE market = $1 AND market_hash_name = $2 AND phase = $3',
      ['cn-b', name, phase],
    );
    expect(rows).toEqual([{ price: null, count: 0, cycle_id: marker.cycle_id }]);
    expect(await state('cn-b')).toEqual(await truth('cn-b'));
  });

  it('a partial cycle (zero prices upstream) nulls nothing it did not see and invents no price', async () => {
    const before = await state('cn-a');
    await sim.control('POST', '/_sim/clock', { advanceMs: 3_600_000 });
    await sim.control('POST', '/_sim/faults', { market: 'cn-a', kind: 'zeroPrices' });
    const marker = await cycle('cn-a');
    expect(marker.outcome).toBe('PARTIAL');
    const after = await state('cn-a');
    const now = await truth('cn-a');
    // Every item keeps its price, unless the upstream validly said "no listing" (price 0 with
    // count 0) — then it follows the truth. Nothing refused in the cycle is nulled.
    let kept = 0;
    for (const [k, v] of before) {
      if (after.get(k) === v) kept++;
      else expect(after.get(k), k).toBe(now.get(k));
    }
    expect(kept).toBeGreaterThan(before.size * 0.8);
    const { rows } = await pool.query('SELECT count(*)::int AS n FROM listings_current WHERE price <= 0');
    expect(rows[0]).toEqual({ n: 0 });
    await sim.control('DELETE', '/_sim/faults');
    await cycle('cn-a');
    expect(await state('cn-a')).toEqual(await truth('cn-a'));
  });

  it('publishes every committed change to price-changes.v1, once the outbox drains', async () => {
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      const { rows } = await pool.query('SELECT count(*)::int AS n FROM price_change_outbox');
      if (rows[0].n === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const published = outbox.published;
    expect(published).toBeGreaterThan(300);
    const events = await readTopic(
      stack,
      `${topicFor('priceChange').name}${suffix}`,
      'priceChange',
      (e) => e.length >= published,
    );
    expect(events).toHaveLength(published);
    const removals = events.filter((e) => e.new_price === null && e.old_price !== null);
    expect(removals.length).toBeGreaterThanOrEqual(2);
    for (const e of events) expect(e.new_price === null || Number(e.new_price) > 0).toBe(true);
  });
});

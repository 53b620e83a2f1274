/**
 * The outlier guard on a real pipeline (simulator → four CNY pollers → Kafka → materializer →
 * PostgreSQL → outbox → API), driven by the simulator's overrides:
 * - a single listing at 5 % of the item's price on one marketplace is flagged (is_outlier, low
 *   confidence) in the read model, in prices.current.v1, in the catalogue and in search;
 * - a real market-wide move (every CNY marketplace at 10 %) is not, once the marketplaces have
 *   reported it — while only the first has, that one is flagged, and the listings markers judge
 *   it again as the others come in;
 * - the market cap leaves a flagged CN-A price out of its hour (and would have counted it);
 * - a price's updated_at is when it last changed, the same on prices.current.v1 and in the API,
 *   and a FULL cycle that sends it again unchanged moves only the list's listings-confirmed-at.
 */
import { Dec, type MarketSlug } from '@skinprices/domain';
import { topicFor } from '@skinprices/events';
import type { Poller } from '@skinprices/poller';
import type { Pool } from '@skinprices/store';
import type { FastifyInstance } from 'fastify';
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
import { startApi } from '../support/api.js';
import { TestStack } from '../support/stack.js';

const CNY: readonly MarketSlug[] = ['cn-a', 'cn-b', 'cn-c', 'cn-d'];
const DAY = 86_400_000;

interface Verdict {
  market: string;
  price: string | null;
  count: number;
  is_outlier: boolean | null;
  confidence: string | null;
  median_7d: string | null;
}

describe('the outlier guard', () => {
  const stack = new TestStack();
  let sim: Sim;
  let suffix: string;
  let pool: Pool;
  let app: FastifyInstance;
  let key: string;
  const pollers = new Map<MarketSlug, Poller>();
  /** Two items every CNY marketplace lists, with their prices there. */
  let lone: string;
  let moved: string;
  let capped: string;

  async function cycle(market: MarketSlug): Promise<void> {
    const poller = pollers.get(market) as Poller;
    await untilApplied(pool, (await poller.runOnce('LISTINGS')).marker.cycle_id, 60_000);
  }
  const advance = (ms: number) => sim.control('POST', '/_sim/clock', { advanceMs: ms });
  const override = (market: MarketSlug, name: string, price: string, count: number) =>
    sim.control('POST', '/_sim/override', { market, market_hash_name: name, phase: '', price, count });

  async function verdicts(name: string): Promise<Map<string, Verdict>> {
    const { rows } = await pool.query<Verdict>(
      `SELECT market, price::text, count, is_outlier, confidence::text, median_7d::text FROM listings_current
       WHERE market_hash_name = $1 AND phase = '' AND market = ANY($2) ORDER BY market`,
      [name, CNY],
    );
    return new Map(rows.map((r) => [r.market, r]));
  }
  const outliers = async (name: string) =>
    [...(await verdicts(name)).values()].filter((v) => v.is_outlier).map((v) => v.market);
  const price = async (market: string, name: string) => (await verdicts(name)).get(market) as Verdict;

  beforeAll(async () => {
    sim = await startSimulator(stack, 40, Date.UTC(2026, 10, 16, 12));
    suffix = await projectTopics(stack);
    pool = (await stack.schema()).pool;
    await startMaterializer(stack, suffix, pool);
    await startOutbox(stack, suffix, pool);
    for (const m of CNY) pollers.set(m, (await startPoller(stack, sim, m, suffix)).poller);
    // Five days of closes on every marketplace: the own reference (median of the 7 closes
    // before the day, at least 3) exists from the fourth day on.
    for (let d = 0; d < 5; d++) {
      if (d > 0) await advance(DAY);
      for (const m of CNY) await cycle(m);
    }
    const { rows } = await pool.query<{ market_hash_name: string }>(
      `SELECT market_hash_name FROM listings_current
       WHERE phase = '' AND market = ANY($1) AND price >= 1 AND count >= 2 AND median_7d IS NOT NULL
       GROUP BY 1 HAVING count(*) = 4 ORDER BY 1 LIMIT 3`,
      [CNY],
    );
    expect(rows.length, 'three items listed with history on all four CNY marketplaces').toBe(3);
    [lone, moved, capped] = rows.map((r) => r.market_hash_name) as [string, string, string];

    // A new version on every request: the answers always show the read model as it is.
    const api = await startApi(stack, pool, { customer: 'guard.example', deps: { version: () => Date.now() } });
    app = api.app;
    key = api.keys.basic;
  }, 300_000);
  afterAll(() => stack.cleanup());

  it('no item is flagged while prices move as markets do', async () => {
    const { rows } = await pool.query<{ n: number; judged: number }>(
      `SELECT count(*) FILTER (WHERE is_outlier)::int AS n, count(*) FILTER (WHERE confidence IS NOT NULL)::int AS judged
       FROM listings_current WHERE market = ANY($1) AND price IS NOT NULL`,
      [CNY],
    );
    expect(rows[0]?.n).toBe(0);
    expect(rows[0]?.judged).toBeGreaterThan(100);
  });

  it('a single listing at 5 % of the price on one marketplace is flagged, everywhere it is served', async () => {
    const before = await price('cn-b', lone);
    const low = new Dec(before.price as string).times('0.05').toDecimalPlaces(2).toFixed(2);
    await override('cn-b', lone, low, 1);
    await advance(60_000);
    await cycle('cn-b');
    const v = await verdicts(lone);
    expect(v.get('cn-b')).toMatchObject({ price: low, count: 1, is_outlier: true });
    // Far from both references and a single listing: confidence at most 0.4 × 1/5 + 0.
    expect(Number(v.get('cn-b')?.confidence)).toBeLessThanOrEqual(0.08);
    expect(await outliers(lone)).toEqual(['cn-b']);
    // The other marketplaces' rows of the item stay trusted (their peer median is barely moved).
    for (const m of ['cn-a', 'cn-c', 'cn-d']) expect(Number(v.get(m)?.confidence)).toBeGreaterThan(0.5);

    // prices.current.v1 carries the verdict committed with the price.
    const topic = `${topicFor('currentPrice').name}${suffix}`;
    const records = await readTopic(stack, topic, 'currentPrice', (e) =>
      e.some((r) => r.market === 'cn-b' && r.market_hash_name === lone && r.price === low),
    );
    const record = records.find((r) => r.market === 'cn-b' && r.market_hash_name === lone && r.price === low);
    expect(record).toMatchObject({ is_outlier: true, confidence: v.get('cn-b')?.confidence });

    // The catalogue and search answers carry it as additional fields.
    const latest = await app.inject({
      method: 'POST',
      url: '/v1/prices/latest',
      headers: { 'x-api-key': key },
      payload: { items: [lone], markets: CNY },
    });
    expect(latest.statusCode, latest.body).toBe(200);
    const entry = latest.json().items[lone];
    expect(entry['cn-b']).toMatchObject({ price: low, is_outlier: true, confidence: v.get('cn-b')?.confidence });
    expect(entry['cn-c']).toMatchObject({ is_outlier: false });
    const search = await app.inject({
      method: 'GET',
      url: `/v1/prices/search?market_hash_name=${encodeURIComponent(lone)}`,
      headers: { 'x-api-key': key },
    });
    const rows = search.json().data as { market: string; is_outlier: boolean }[];
    expect(rows.filter((r) => r.is_outlier).map((r) => r.market)).toEqual(['cn-b']);
  }, 120_000);

  it('a market-wide move is not an outlier once the marketplaces report it', async () => {
    const targets = new Map<MarketSlug, string>();
    for (const m of CNY) {
      const p = (await price(m, moved)).price as string;
      targets.set(m, new Dec(p).times('0.1').toDecimalPlaces(2).toFixed(2));
      await override(m, moved, targets.get(m) as string, 10);
    }
    await advance(60_000);
    // Only CN-A has reported: against its own history and its peers it looks manipulated.
    await cycle('cn-a');
    expect(await outliers(moved)).toEqual(['cn-a']);
    await cycle('cn-b');
    // Two of four: each mover still disagrees with its own history and with its peers' median.
    expect(await outliers(moved)).toEqual(['cn-a', 'cn-b']);
    await cycle('cn-c');
    // Three of four: the peers' median moved with them, and CN-C's marker judged CN-A's and CN-B's
    // rows again. CN-D, not yet moved, agrees with its own history: not an outlier either.
    expect(await outliers(moved)).toEqual([]);
    await cycle('cn-d');
    const v = await verdicts(moved);
    expect(await outliers(moved)).toEqual([]);
    for (const m of CNY) expect(v.get(m)?.price).toBe(targets.get(m));
  }, 120_000);

  it('the market cap leaves a flagged CN-A price out of its hour, and would have counted it', async () => {
    const hourOf = async () =>
      (
        await pool.query<{ hour: Date; market_cap: string; items: number }>(
          'SELECT hour, market_cap::text, items FROM market_cap_hourly ORDER BY hour DESC LIMIT 1',
        )
      ).rows[0] as { hour: Date; market_cap: string; items: number };
    const before = await hourOf();
    const old = await price('cn-a', capped);
    // Three listings (the cap's own cleaning keeps counts ≥ 2) at 5 %: only the guard can drop it.
    const low = new Dec(old.price as string).times('0.05').toDecimalPlaces(2).toFixed(2);
    await override('cn-a', capped, low, 3);
    await advance(1_000); // the same hour, the same 10-minute price bucket: nothing else moves
    await cycle('cn-a');
    expect(await outliers(capped)).toEqual(['cn-a']);
    const after = await hourOf();
    expect(after.hour).toEqual(before.hour);
    expect(after.items).toBe(before.items - 1);
    expect(after.market_cap).toBe(
      new Dec(before.market_cap).minus(new Dec(old.price as string).times(old.count)).toFixed(2),
    );
  }, 120_000);

  it('updated_at is when the price last changed, equal on prices.current.v1 and in the API; a FULL cycle re-confirms the list, not the row', async () => {
    const { rows } = await pool.query<{ market_hash_name: string; price: string }>(
      `SELECT market_hash_name, price::text FROM listings_current
       WHERE market = 'cn-d' AND phase = '' AND price IS NOT NULL AND NOT (market_hash_name = ANY($1))
       ORDER BY market_hash_name LIMIT 1`,
      [[lone, moved, capped]],
    );
    const item = rows[0]?.market_hash_name as string;
    const changed = new Dec(rows[0]?.price as string).plus('0.37').toFixed(2);
    await override('cn-d', item, changed, 4);
    await advance(60_000);
    await cycle('cn-d');
    const topic = `${topicFor('currentPrice').name}${suffix}`;
    const records = await readTopic(stack, topic, 'currentPrice', (e) =>
      e.some((r) => r.market === 'cn-d' && r.market_hash_name === item && r.price === changed),
    );
    const record = records.find((r) => r.market === 'cn-d' && r.market_hash_name === item && r.price === changed);
    const published = new Date(record?.updated_at as unknown as string | number).toISOString();
    const list = async () => {
      const res = await app.inject({ method: 'GET', url: '/v1/prices/cn-d', headers: { 'x-api-key': key } });
      expect(res.statusCode).toBe(200);
      const row = (res.json().data as { market_hash_name: string; updated_at: string; price: string }[]).find(
        (r) => r.market_hash_name === item,
      );
      return { row, confirmed: res.headers['listings-confirmed-at'] as string };
    };
    const first = await list();
    expect(first.row).toMatchObject({ price: changed, updated_at: published });
    // Every 12th cycle is FULL (FAST.fullEvery): every row is sent again, this one unchanged.
    const lastCycle = async () =>
      (
        await pool.query<{ mode: string; finished_at: Date }>(
          `SELECT mode, finished_at FROM poll_cycles WHERE market = 'cn-d' AND kind = 'LISTINGS' ORDER BY finished_at DESC LIMIT 1`,
        )
      ).rows;
    let cycles = await lastCycle();
    for (let n = 0; n < 12 && cycles[0]?.mode !== 'FULL'; n++) {
      await advance(60_000);
      await cycle('cn-d');
      cycles = await lastCycle();
    }
    expect(cycles[0]?.mode).toBe('FULL');
    // A list is served while its refresh runs (stale-while-revalidate): asked again, as a client does.
    const confirmed = cycles[0]?.finished_at.toISOString();
    let again = await list();
    for (const deadline = Date.now() + 5_000; again.confirmed !== confirmed && Date.now() < deadline;)
      again = await new Promise((r) => setTimeout(r, 100)).then(list);
    expect(again.row).toMatchObject({ price: changed, updated_at: published });
    expect(again.confirmed).toBe(confirmed);
    expect(Date.parse(again.confirmed)).toBeGreaterThan(Date.parse(published));
    expect(Date.parse(again.confirmed)).toBeGreaterThan(Date.parse(first.confirmed));
  }, 120_000);
});

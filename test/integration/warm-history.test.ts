/**
 * The warm demo's mechanism on a real pipeline: a listing marketplace's poller imports its daily
 * closes from the upstream's history endpoint (the simulator serves one for every marketplace
 * when asked), after its first prices are in, and every row with history then has all its
 * changes and averages — equal to an independent computation from the simulator's closes.
 */
import { Decimal } from 'decimal.js';
import { DAY_MS } from '@skinprices/domain';
import { adapterFor } from '@skinprices/marketplaces';
import type { Pool } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi } from '../support/api.js';
import {
  projectTopics,
  startMaterializer,
  startPoller,
  startSimulator,
  untilApplied,
  type Sim,
} from '../support/pipeline.js';
import { TestStack } from '../support/stack.js';

const DAYS = 95;
const START = Date.UTC(2026, 10, 20, 12);

interface Row {
  market_hash_name: string;
  phase: string;
  price: string;
  change_24h: string | null;
  change_7d: string | null;
  change_30d: string | null;
  change_90d: string | null;
  avg_7d: string | null;
  avg_30d: string | null;
  avg_90d: string | null;
}

describe('daily history of a listing marketplace (the warm demo)', () => {
  const stack = new TestStack();
  let sim: Sim;
  let pool: Pool;
  let imported = 0;

  beforeAll(async () => {
    sim = await startSimulator(stack, 40, START, {}, { dailyHistory: true });
    const suffix = await projectTopics(stack);
    ({ pool } = await stack.schema());
    await startMaterializer(stack, suffix, pool);
    const { poller } = await startPoller(stack, sim, 'cn-b', suffix, {
      dailyHistory: adapterFor('history'),
      historyBackfillDays: DAYS,
    });
    expect(poller.kinds).toContain('HISTORY');
    // Prices first (a started poller does the same): their statistics find no closes yet…
    await untilApplied(pool, (await poller.runOnce('LISTINGS')).marker.cycle_id);
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM listings_current WHERE market = 'cn-b' AND avg_7d IS NOT NULL`,
    );
    expect(rows[0]?.n).toBe(0);
    // …then the history, one closed day per cycle, oldest first.
    for (let d = 0; d < DAYS; d++) {
      const { marker } = await poller.runOnce('HISTORY');
      expect(marker.outcome).toBe('COMPLETE');
      imported += marker.events_emitted;
      await untilApplied(pool, marker.cycle_id);
    }
  }, 240_000);
  afterAll(() => stack.cleanup());

  it('imports a close for every day and item the upstream had', async () => {
    // Closed days only: today's close so far comes from the live prices, not the import.
    const { rows } = await pool.query<{ days: number; closes: number }>(
      `SELECT count(DISTINCT day)::int AS days, count(*)::int AS closes FROM listing_daily
       WHERE market = 'cn-b' AND day < $1::date`,
      [new Date(START).toISOString().slice(0, 10)],
    );
    expect(rows[0]?.days).toBe(DAYS);
    expect(rows[0]?.closes).toBe(imported);
    expect(imported).toBeGreaterThan(DAYS * 20);
  });

  it('every row with history has all its changes and averages, equal to the closes', async () => {
    const today = Math.floor(START / DAY_MS);
    const close = new Map<string, string>();
    for (const back of [1, 7, 30, 90]) {
      const at = (today - back + 1) * DAY_MS; // the truth's history at `at` is the close of the day before
      const { records } = (await sim.control('GET', `/_sim/truth?market=cn-b&kind=history&at=${at}`)) as {
        records: { market_hash_name: string; phase: string; price: string }[];
      };
      for (const r of records) close.set(`${r.market_hash_name}|${r.phase}|${back}`, r.price);
    }
    const { rows } = await pool.query<Row>(
      `SELECT market_hash_name, phase, price::text, change_24h::text, change_7d::text, change_30d::text, change_90d::text,
              avg_7d::text, avg_30d::text, avg_90d::text
       FROM listings_current WHERE market = 'cn-b' AND price IS NOT NULL`,
    );
    let checked = 0;
    for (const r of rows) {
      const base = (back: number) => close.get(`${r.market_hash_name}|${r.phase}|${back}`);
      // An item not listed on one of those days has no close there (missing days are missing),
      // and the change that needs it stays null; young items likewise.
      if (![1, 7, 30, 90].every((back) => base(back))) continue;
      checked++;
      for (const f of ['change_24h', 'change_7d', 'change_30d', 'change_90d', 'avg_7d', 'avg_30d', 'avg_90d'] as const)
        expect(r[f], `${r.market_hash_name} ${f}`).not.toBeNull();
      const b1 = new Decimal(base(1) as string);
      const want = new Decimal(r.price).minus(b1).div(b1).times(100).toDecimalPlaces(2, Decimal.ROUND_HALF_UP);
      expect(new Decimal(r.change_24h as string).toFixed(2)).toBe(want.toFixed(2));
    }
    expect(checked).toBeGreaterThan(20);
  });

  it('the API serves them: no null change or average on a row with history', async () => {
    const { rows: full } = await pool.query<{ market_hash_name: string; phase: string }>(
      `SELECT market_hash_name, phase FROM listings_current
       WHERE market = 'cn-b' AND price IS NOT NULL AND base_1d IS NOT NULL AND base_7d IS NOT NULL
         AND base_30d IS NOT NULL AND base_90d IS NOT NULL`,
    );
    const hasHistory = new Set(full.map((r) => `${r.market_hash_name}|${r.phase}`));
    const api = await startApi(stack, pool);
    const res = await api.app.inject({
      method: 'GET',
      url: '/v1/prices/cn-b',
      headers: { 'x-api-key': api.keys.basic },
    });
    expect(res.statusCode).toBe(200);
    const data = res.json().data as Record<string, unknown>[];
    const withHistory = data.filter((r) => hasHistory.has(`${String(r.market_hash_name)}|${String(r.phase)}`));
    expect(withHistory.length).toBeGreaterThan(20);
    for (const r of withHistory)
      for (const f of ['change_24h', 'change_7d', 'change_30d', 'change_90d', 'avg_7d', 'avg_30d', 'avg_90d'])
        expect(r[f], `${String(r.market_hash_name)} ${f}`).toEqual(expect.stringMatching(/^-?\d+(\.\d+)?$/));
  });
});

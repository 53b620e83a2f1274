/**
 * 92 simulated days through the real pipeline (the simulator's clock jumps 12 h between cycles):
 * hourly and daily history exist, hourly partitions older than the retention are dropped, and
 * every item's changes (24h/7d/30d/90d) and averages (7/30/90 days) equal an independent
 * decimal.js computation from the simulator's truth at each poll.
 */
import { Decimal } from 'decimal.js';
import type { Poller } from '@skinprices/poller';
import type { UpstreamClient } from '@skinprices/marketplaces';
import type { Pool } from '@skinprices/store';
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

const DAY = 86_400_000;
const DAYS = 92;
const RETENTION_DAYS = 30;
const MARKET = 'cn-c';
const START = Date.UTC(2026, 7, 1);
const POLL_HOURS = [6, 18];

type Truth = { market_hash_name: string; phase: string; price: string | null; count: number };
const keyOf = (r: { market_hash_name: string; phase: string }) => `${r.market_hash_name}\u001f${r.phase}`;

describe('materializer: 92 days of history, changes and averages', () => {
  const stack = new TestStack();
  let sim: Sim;
  let pool: Pool;
  let poller: Poller;
  let client: UpstreamClient;
  /** item → UTC day number → the last price seen that day (the daily close). */
  const closes = new Map<string, Map<number, string>>();
  let last: Truth[] = [];
  let lastDay = 0;

  beforeAll(async () => {
    sim = await startSimulator(stack, 80, START);
    const suffix = await projectTopics(stack);
    ({ pool } = await stack.schema());
    await startMaterializer(stack, suffix, pool, { hourlyRetentionDays: RETENTION_DAYS });
    ({ poller, client } = await startPoller(stack, sim, MARKET, suffix));

    for (let d = 0; d < DAYS; d++) {
      for (const h of POLL_HOURS) {
        const at = START + d * DAY + h * 3_600_000;
        await sim.control('POST', '/_sim/clock', { setMs: at });
        // The clock jumped: learn it before the cycle decides its day (a real upstream's clock
        // only drifts, so the poller learns it from the responses it gets anyway).
        await client.syncClock();
        const { marker } = await poller.runOnce('LISTINGS');
        expect(marker.outcome).toBe('COMPLETE');
        await untilApplied(pool, marker.cycle_id);
        const q = new URLSearchParams({ market: MARKET, kind: 'listings', at: String(at) });
        last = ((await sim.control('GET', `/_sim/truth?${q}`)) as { records: Truth[] }).records;
        lastDay = Math.floor(at / DAY);
        for (const r of last) {
          if (r.price === null) continue;
          const byDay = closes.get(keyOf(r)) ?? new Map<number, string>();
          byDay.set(lastDay, r.price);
          closes.set(keyOf(r), byDay);
        }
      }
    }
  }, 600_000);
  afterAll(() => stack.cleanup());

  it('keeps daily closes for every day and hourly snapshots only within the retention', async () => {
    const daily = await pool.query<{ days: number }>(
      `SELECT count(DISTINCT day)::int AS days FROM listing_daily WHERE market = $1`,
      [MARKET],
    );
    expect(daily.rows[0]?.days).toBe(DAYS);
    const hourly = await pool.query<{ first: Date; hours: number }>(
      `SELECT min(hour) AS first, count(DISTINCT hour)::int AS hours FROM listing_hourly WHERE market = $1`,
      [MARKET],
    );
    const cutoff = (lastDay - RETENTION_DAYS) * DAY;
    expect(hourly.rows[0]?.first.getTime()).toBe(cutoff + POLL_HOURS[0]! * 3_600_000);
    expect(hourly.rows[0]?.hours).toBe((RETENTION_DAYS + 1) * POLL_HOURS.length);
    const parts = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent
       WHERE p.relname = 'listing_hourly' AND p.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())`,
    );
    expect(parts.rows[0]?.n).toBe(RETENTION_DAYS + 1);
  });

  it('changes and averages of every item equal an independent computation from the truth', async () => {
    const { rows } = await pool.query<Record<string, string | null>>(
      `SELECT market_hash_name, phase, price, stats_day::text,
              change_24h, change_7d, change_30d, change_90d, avg_7d, avg_30d, avg_90d
       FROM listings_current WHERE market = $1`,
      [MARKET],
    );
    const round = (d: Decimal) => d.toDecimalPlaces(2, Decimal.ROUND_HALF_UP).toFixed(2);
    const now = new Map(last.map((r) => [keyOf(r), r.price]));
    let withChange90 = 0;
    expect(rows.length).toBeGreaterThan(40);
    for (const row of rows) {
      const k = keyOf(row as unknown as Truth);
      const byDay = closes.get(k) ?? new Map<number, string>();
      const price = now.get(k) ?? null;
      // The base: the last close at or before the day n days back (none that old: null).
      const change = (n: number) => {
        let baseDay = -Infinity;
        for (const day of byDay.keys()) if (day <= lastDay - n && day > baseDay) baseDay = day;
        const base = byDay.get(baseDay);
        return price === null || base === undefined ? null : round(new Decimal(price).minus(base).times(100).div(base));
      };
      const avg = (n: number) => {
        const window = [];
        for (let d = lastDay - n; d < lastDay; d++) if (byDay.has(d)) window.push(new Decimal(byDay.get(d)!));
        return window.length === 0 ? null : round(window.reduce((a, b) => a.plus(b)).div(window.length));
      };
      const want = {
        price,
        stats_day: new Date(lastDay * DAY).toISOString().slice(0, 10),
        change_24h: change(1),
        change_7d: change(7),
        change_30d: change(30),
        change_90d: change(90),
        avg_7d: avg(7),
        avg_30d: avg(30),
        avg_90d: avg(90),
      };
      const { market_hash_name: _n, phase: _p, ...got } = row;
      expect(got, k).toEqual(want);
      if (want.change_90d !== null) withChange90++;
    }
    // Not a vacuous pass: most items have a 90-day baseline, and prices moved.
    expect(withChange90).toBeGreaterThan(rows.length / 2);
    expect(rows.some((r) => r.change_30d !== null && r.change_30d !== '0.00')).toBe(true);
  });
});

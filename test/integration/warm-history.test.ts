/**
 * The warm demo's mechanism on a real pipeline: a listing marketplace's poller imports its daily
 * closes from the upstream's history endpoint (the simulator serves one for every marketplace
 * when asked), after its first prices are in, and every row with history then has all its
 * changes and averages — equal to an independent computation from the simulator's closes. The
 * most recent days come with their hourly candles (the upstream's hourly endpoint): they are the
 * hourly history, equal to the upstream's, make those days' daily candles, and merge with an hour
 * the live pipeline saw.
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
/** Of those, the most recent days imported with their hours. */
const HOURLY = 6;
const START = Date.UTC(2026, 10, 20, 12);

interface UpstreamHour {
  time: string;
  open: string;
  high: string;
  low: string;
  close: string;
  volume: number;
}

/** The upstream's hourly candles of one day, keyed `name|phase|ISO hour`, asked of the simulator directly. */
async function upstreamHours(sim: Sim, day: number): Promise<Map<string, UpstreamHour>> {
  const date = new Date(day * DAY_MS).toISOString().slice(0, 10);
  const res = await fetch(`${sim.running.marketUrls['cn-b']}/api/history/hourly?date=${date}&per_page=5000`);
  const body = (await res.json()) as { items: { name: string; phase: string | null; hours: UpstreamHour[] }[] };
  const out = new Map<string, UpstreamHour>();
  for (const it of body.items) for (const h of it.hours) out.set(`${it.name}|${it.phase ?? ''}|${h.time}`, h);
  return out;
}

/** The priced hours of listing_hourly of cn-b for one day, keyed as upstreamHours. */
async function storedHours(pool: Pool, day: number): Promise<Map<string, UpstreamHour>> {
  const { rows } = await pool.query<{
    market_hash_name: string;
    phase: string;
    hour: Date;
    open: string;
    high: string;
    low: string;
    close: string;
    count: number;
  }>(
    `SELECT market_hash_name, phase, hour, open::text, high::text, low::text, price::text AS close, count
     FROM listing_hourly WHERE market = 'cn-b' AND hour >= $1 AND hour < $2 AND price IS NOT NULL`,
    [new Date(day * DAY_MS), new Date((day + 1) * DAY_MS)],
  );
  return new Map(
    rows.map((r) => {
      const time = r.hour.toISOString();
      return [
        `${r.market_hash_name}|${r.phase}|${time}`,
        { time, open: r.open, high: r.high, low: r.low, close: r.close, volume: r.count },
      ];
    }),
  );
}

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
  let poller: Awaited<ReturnType<typeof startPoller>>['poller'];

  beforeAll(async () => {
    sim = await startSimulator(stack, 40, START, {}, { dailyHistory: true });
    const suffix = await projectTopics(stack);
    ({ pool } = await stack.schema());
    await startMaterializer(stack, suffix, pool);
    ({ poller } = await startPoller(stack, sim, 'cn-b', suffix, {
      dailyHistory: adapterFor('history'),
      historyBackfillDays: DAYS,
      hourlyBackfillDays: HOURLY,
    }));
    expect(poller.kinds).toContain('HISTORY');
    // Prices first (a started poller does the same): their statistics find no closes yet…
    await untilApplied(pool, (await poller.runOnce('LISTINGS')).marker.cycle_id);
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM listings_current WHERE market = 'cn-b' AND avg_7d IS NOT NULL`,
    );
    expect(rows[0]?.n).toBe(0);
    // …then the history, one closed day per cycle, oldest first; then the last HOURLY days' hours.
    for (let d = 0; d < DAYS + HOURLY; d++) {
      const { marker } = await poller.runOnce('HISTORY');
      expect(marker.outcome).toBe('COMPLETE');
      expect(marker.cycle_id.endsWith(':hours')).toBe(d >= DAYS);
      if (d < DAYS) imported += marker.events_emitted;
      await untilApplied(pool, marker.cycle_id);
    }
  }, 240_000);
  afterAll(() => stack.cleanup());

  it('imports a close for every day and item the upstream had', async () => {
    // Closed days only: today's close so far comes from the live prices, not the import.
    const { rows } = await pool.query<{ days: number; closes: number }>(
      // An imported close is observed after its day; a day's candle made only of imported hours (an
      // item listed during the day, not at its end) has the last priced hour's close, observed in it.
      `SELECT count(DISTINCT day)::int AS days,
              count(*) FILTER (WHERE observed_at >= (day + 1)::timestamp AT TIME ZONE 'UTC')::int AS closes
       FROM listing_daily
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

  it('the last HOURLY days come with their hours: listing_hourly equals the upstream hourly history', async () => {
    const today = Math.floor(START / DAY_MS);
    for (const day of [today - HOURLY, today - 1]) {
      const want = await upstreamHours(sim, day);
      expect(want.size).toBeGreaterThan(20 * 24);
      const got = await storedHours(pool, day);
      expect(got.size).toBe(want.size);
      for (const [k, h] of want) expect(got.get(k), k).toEqual(h);
    }
    // Before the hourly window: closes only, no hours.
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM listing_hourly WHERE market = 'cn-b' AND hour < $1`,
      [new Date((today - HOURLY) * DAY_MS)],
    );
    expect(rows[0]?.n).toBe(0);
  });

  it('a day with hours has a whole daily candle (open, high, low from them); older days only the close', async () => {
    const today = Math.floor(START / DAY_MS);
    const day = today - 2;
    const hours = await upstreamHours(sim, day);
    const { rows } = await pool.query<{ k: string; open: string | null; high: string; low: string; close: string }>(
      `SELECT market_hash_name || '|' || phase AS k, open::text, high::text, low::text, close::text
       FROM listing_daily WHERE market = 'cn-b' AND day = $1::date`,
      [new Date(day * DAY_MS).toISOString().slice(0, 10)],
    );
    expect(rows.length).toBeGreaterThan(20);
    for (const r of rows) {
      const hs = [...hours.entries()].filter(([k]) => k.startsWith(`${r.k}|`)).map(([, h]) => h);
      expect(hs.length, r.k).toBeGreaterThan(0);
      expect(r.open, r.k).toBe(hs[0]!.open);
      expect(r.high).toBe(Decimal.max(...hs.map((h) => h.high)).toFixed(2));
      expect(r.low).toBe(Decimal.min(...hs.map((h) => h.low)).toFixed(2));
      // The close is the day's imported close: its last hour's close here.
      if (hs.at(-1)!.time.endsWith('T23:00:00.000Z')) expect(r.close).toBe(hs.at(-1)!.close);
    }
    const { rows: old } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM listing_daily WHERE market = 'cn-b' AND day < $1::date AND open IS NOT NULL`,
      [new Date((today - HOURLY) * DAY_MS).toISOString().slice(0, 10)],
    );
    expect(old[0]?.n).toBe(0);
  });

  it('the API answers resolution=hourly with the imported candles', async () => {
    const api = await startApi(stack, pool);
    const { rows } = await pool.query<{ market_hash_name: string; phase: string }>(
      `SELECT market_hash_name, phase FROM listing_hourly WHERE market = 'cn-b' ORDER BY hour, market_hash_name LIMIT 1`,
    );
    const item = rows[0]!;
    const res = await api.app.inject({
      method: 'GET',
      url: `/v1/prices/cn-b/history?market_hash_name=${encodeURIComponent(item.market_hash_name)}&phase=${encodeURIComponent(item.phase)}&resolution=hourly`,
      headers: { 'x-api-key': api.keys.basic },
    });
    expect(res.statusCode).toBe(200);
    const points = res.json().points as { time: string; open: string; high: string; low: string; close: string }[];
    expect(points.length).toBeGreaterThan(HOURLY * 20);
    const first = (await upstreamHours(sim, Math.floor(Date.parse(points[0]!.time) / DAY_MS))).get(
      `${item.market_hash_name}|${item.phase}|${points[0]!.time}`,
    );
    expect(points[0]).toMatchObject({ open: first!.open, high: first!.high, low: first!.low, close: first!.close });
  });

  // Last: it moves the upstream's clock a day on.
  it('an hour the live pipeline saw merges with its imported candle: the day closes as the upstream says', async () => {
    const day = Math.floor(START / DAY_MS);
    const live = await storedHours(pool, day);
    // The live LISTINGS cycle at START wrote hour 12 of this day (one observation; priced ones here).
    expect([...live.keys()].every((k) => k.endsWith('T12:00:00.000Z'))).toBe(true);
    expect(live.size).toBeGreaterThan(20);
    sim.clock.set(START + DAY_MS);
    const { marker } = await poller.runOnce('HISTORY');
    expect(marker.outcome).toBe('COMPLETE');
    await untilApplied(pool, marker.cycle_id);
    const want = await upstreamHours(sim, day);
    const got = await storedHours(pool, day);
    // Every upstream hour is stored as the upstream has it; beyond them only what the live cycle
    // saw in an hour the upstream closed unlisted (an observation is never thrown away).
    const extra = [...got.keys()].filter((k) => !want.has(k));
    for (const k of extra) expect(live.has(k), k).toBe(true);
    expect(got.size).toBe(want.size + extra.length);
    for (const [k, h] of want) expect(got.get(k), k).toEqual(h);
    // Hour 12 kept its place: the same rows, now whole candles.
    for (const k of live.keys()) if (want.has(k)) expect(got.get(k)).toEqual(want.get(k));
    const { rows } = await pool.query<{ open_at: Date }>(
      `SELECT min(open_at) AS open_at FROM listing_daily WHERE market = 'cn-b' AND day = $1::date`,
      [new Date(day * DAY_MS).toISOString().slice(0, 10)],
    );
    expect(rows[0]!.open_at.getTime()).toBe(day * DAY_MS);
  });
});

/**
 * Repeats are recognised before SQL (issue 42, item 1): once a poller sends its removals as
 * records (`removals_sent`), a FULL cycle's unchanged listings write no listings_current row
 * version and, within the quarter hour of the row's observation, no candle; a later quarter hour
 * writes only their candles. The materializer's rows survive its restart (loaded on assignment),
 * and a marker that removes unseen listings (a poller's first FULL cycle) makes it read them again.
 */
import { EventProducer, topicFor, type ListingEvent } from '@skinprices/events';
import type { BatchReport, Materializer } from '@skinprices/materializer';
import type { Poller } from '@skinprices/poller';
import type { Pool } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  projectTopics,
  startMaterializer,
  startPoller,
  startSimulator,
  type Sim,
  untilApplied,
} from '../support/pipeline.js';
import { TestStack } from '../support/stack.js';

const MINUTE = 60_000;
/** A marketplace whose answer leaves out items without listings (only a marker or a removal record can tell). */
const MARKET = 'cn-b';

describe('materializer: repeats skipped before SQL', () => {
  const stack = new TestStack();
  let sim: Sim;
  let suffix: string;
  let pool: Pool;
  let materializer: Materializer;
  let poller: Poller;
  const groupId = stack.groupId();
  const reports: BatchReport[] = [];

  const listen = (m: Materializer) => m.onBatch((r) => reports.push(r));

  async function cycle(p = poller) {
    const { marker } = await p.runOnce('LISTINGS');
    await untilApplied(pool, marker.cycle_id, 30_000);
    return marker;
  }

  /** Every row of the marketplace: its address (a new one per row version), values and observation. */
  async function rows(): Promise<Map<string, { at: string; v: string; observed: string }>> {
    const { rows: r } = await pool.query<{ k: string; at: string; v: string; observed: string }>(
      `SELECT market_hash_name || chr(31) || phase AS k, ctid::text AS at,
              coalesce(price::text, '-') || ' x' || count AS v, observed_at::text AS observed
       FROM listings_current WHERE market = '${MARKET}'`,
    );
    return new Map(r.map((x) => [x.k, { at: x.at, v: x.v, observed: x.observed }]));
  }

  async function hourly(): Promise<Map<string, string>> {
    const { rows: r } = await pool.query<{ k: string; observed: string }>(
      `SELECT market_hash_name || chr(31) || phase || chr(31) || hour AS k, observed_at::text AS observed
       FROM listing_hourly WHERE market = '${MARKET}'`,
    );
    return new Map(r.map((x) => [x.k, x.observed]));
  }

  async function truth(): Promise<Map<string, string>> {
    const { records } = (await sim.control('GET', `/_sim/truth?market=${MARKET}&kind=listings`)) as {
      records: { market_hash_name: string; phase: string; price: string | null; count: number }[];
    };
    return new Map(
      records
        .filter((r) => r.price !== null)
        .map((r) => [`${r.market_hash_name}\u001f${r.phase}`, `${r.price} x${r.count}`]),
    );
  }

  async function served(): Promise<Map<string, string>> {
    const r = await rows();
    return new Map([...r].filter(([, x]) => !x.v.startsWith('-')).map(([k, x]) => [k, x.v]));
  }

  /** Row versions a cycle made, and rows whose served values changed in it. */
  function moved(before: Map<string, { at: string; v: string }>, after: Map<string, { at: string; v: string }>) {
    let versions = 0;
    let changed = 0;
    for (const [k, a] of after) {
      const b = before.get(k);
      if (!b || b.at !== a.at) versions++;
      if (!b || b.v !== a.v) changed++;
    }
    return { versions, changed };
  }

  const repeats = () =>
    reports.reduce(
      (n, r) => ({ skipped: n.skipped + (r.repeats?.skipped ?? 0), candles: n.candles + (r.repeats?.candles ?? 0) }),
      { skipped: 0, candles: 0 },
    );

  beforeAll(async () => {
    sim = await startSimulator(stack, 150);
    suffix = await projectTopics(stack);
    ({ pool } = await stack.schema());
    materializer = await startMaterializer(stack, suffix, pool, { groupId });
    listen(materializer);
    // FULL every second cycle: the first (the poller knows nothing of earlier processes) removes
    // what it did not see the old way; the DELTA after it settles; the next FULL sends removals.
    poller = (await startPoller(stack, sim, MARKET, suffix, { fullEvery: 2 })).poller;
    expect(await cycle()).toMatchObject({ mode: 'FULL', removals_sent: false });
    await sim.control('POST', '/_sim/clock', { advanceMs: 2 * MINUTE });
    expect(await cycle()).toMatchObject({ mode: 'DELTA', removals_sent: false });
    await sim.control('POST', '/_sim/clock', { advanceMs: 2 * MINUTE });
  }, 120_000);
  afterAll(() => stack.cleanup());

  it('a FULL cycle of repeats in the same quarter hour writes only what changed', async () => {
    const before = await rows();
    const hoursBefore = await hourly();
    reports.length = 0;
    const marker = await cycle();
    expect(marker).toMatchObject({ mode: 'FULL', outcome: 'COMPLETE', removals_sent: true });
    const after = await rows();
    const { versions, changed } = moved(before, after);
    expect(versions).toBe(changed);
    expect(repeats().skipped).toBeGreaterThan(after.size * 0.8);
    expect(repeats().skipped + changed).toBe(marker.items_seen);
    // No candle moved but those of changed rows.
    const hoursAfter = await hourly();
    let candles = 0;
    for (const [k, o] of hoursAfter) if (hoursBefore.get(k) !== o) candles++;
    expect(candles).toBe(changed);
    expect(await served()).toEqual(await truth());
    const { rows: stored } = await pool.query('SELECT removals_sent FROM poll_cycles WHERE cycle_id = $1', [
      marker.cycle_id,
    ]);
    expect(stored).toEqual([{ removals_sent: true }]);
  });

  it("a later quarter hour writes the repeats' candles, not their rows; a removal is a record", async () => {
    await sim.control('POST', '/_sim/clock', { advanceMs: 2 * MINUTE });
    expect(await cycle()).toMatchObject({ mode: 'DELTA', removals_sent: true });
    const [gone] = [...(await served()).keys()];
    const [name, phase] = (gone as string).split('\u001f') as [string, string];
    await sim.control('POST', '/_sim/override', { market: MARKET, market_hash_name: name, phase, price: null });
    await sim.control('POST', '/_sim/clock', { advanceMs: 20 * MINUTE });
    const before = await rows();
    reports.length = 0;
    const marker = await cycle();
    expect(marker).toMatchObject({ mode: 'FULL', outcome: 'COMPLETE', removals_sent: true });
    const after = await rows();
    const { versions, changed } = moved(before, after);
    expect(changed).toBeGreaterThan(0);
    expect(versions).toBe(changed);
    expect(repeats().candles).toBeGreaterThan(after.size * 0.5);
    const hour = new Date(marker.started_at);
    hour.setUTCMinutes(0, 0, 0);
    const { rows: h } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM listing_hourly WHERE market = '${MARKET}' AND hour = $1 AND observed_at >= $2`,
      [hour, new Date(marker.started_at)],
    );
    // Every record of the cycle (items seen, removals) has its candle in its hour, observed by this cycle.
    expect(h[0]?.n).toBe(marker.events_emitted);
    expect(after.get(gone as string)?.v).toBe('- x0');
    expect(await served()).toEqual(await truth());
  });

  it('holds its rows across a restart: loaded on assignment, repeats still skipped', async () => {
    await materializer.stop();
    materializer = await startMaterializer(stack, suffix, pool, { groupId });
    listen(materializer);
    await sim.control('POST', '/_sim/clock', { advanceMs: 2 * MINUTE });
    await cycle(); // DELTA
    await sim.control('POST', '/_sim/clock', { advanceMs: 2 * MINUTE });
    const before = await rows();
    reports.length = 0;
    const marker = await cycle();
    expect(marker.mode).toBe('FULL');
    expect(materializer.servedRows).toBeGreaterThanOrEqual(before.size);
    const { versions, changed } = moved(before, await rows());
    expect(versions).toBe(changed);
    expect(repeats().skipped + repeats().candles + changed).toBe(marker.items_seen);
    expect(repeats().skipped + repeats().candles).toBeGreaterThan(marker.items_seen * 0.5);
    expect(await served()).toEqual(await truth());
  });

  it('after a marker removed what it did not see, a repeat of the old row is written again', async () => {
    // A poller started afresh: its first FULL cycle removes what it did not see, the old way.
    const [back] = [...(await served()).keys()];
    const [name, phase] = (back as string).split('\u001f') as [string, string];
    const { rows: was } = await pool.query<ListingEvent & { price: string }>(
      `SELECT market, market_hash_name, phase, currency, price::text AS price, count, exterior, stattrak, souvenir,
              template_id::int AS template_id, item_page_url
       FROM listings_current WHERE market = '${MARKET}' AND market_hash_name = $1 AND phase = $2`,
      [name, phase],
    );
    await sim.control('POST', '/_sim/override', { market: MARKET, market_hash_name: name, phase, price: null });
    await sim.control('POST', '/_sim/clock', { advanceMs: 2 * MINUTE });
    const fresh = (await startPoller(stack, sim, MARKET, suffix, { fullEvery: 2 })).poller;
    const legacy = await cycle(fresh);
    expect(legacy).toMatchObject({ mode: 'FULL', outcome: 'COMPLETE', removals_sent: false });
    expect((await rows()).get(back as string)?.v).toBe('- x0');
    // A record of a cycle that sends removals, equal to the row as it was before the removal:
    // the materializer must not drop it as a repeat of what it held.
    const codec = await stack.serde.codec(`${topicFor('listing').name}${suffix}`, 'listing');
    const row = was[0] as ListingEvent;
    const event: ListingEvent = {
      ...row,
      observed_at: legacy.finished_at + 1_000,
      cycle_id: `${MARKET}:LISTINGS:test-after-removal`,
      removals_sent: true,
    };
    const producer = new EventProducer(stack.kafka);
    await producer.connect();
    stack.defer(() => producer.disconnect());
    await producer.send(codec, [event]);
    const deadline = Date.now() + 20_000;
    while ((await rows()).get(back as string)?.v === '- x0' && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    expect((await rows()).get(back as string)?.v).toBe(`${row.price} x${row.count}`);
  });
});

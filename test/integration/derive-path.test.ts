/**
 * The ingest path apart from the derive path (issue 12): a batch commits its prices without
 * waiting for what markers imply, and markers are applied by the derive loop in transactions of
 * their own, one deriver per schema at a time.
 *
 * The derive path is held up from outside by taking its advisory lock on another connection —
 * the way a second materializer process's long derive transaction would hold it. Prices must
 * still become visible at once; the marker waits (freshness still names the previous cycle);
 * released, the marker applies, and what the cycle did not see has no price. The markers'
 * transaction commits before the recomputation it queues (liquidity, market cap: migration 0014),
 * so a recomputation held up does not hold up the markers or ingest.
 */
import type { Pool, PoolClient } from '@skinprices/store';
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

const DERIVE_LOCK = `hashtext('skinprices-derive:' || current_schema())`;

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

type TruthRecord = { market_hash_name: string; phase: string; price: string | null };

/** CN-B's listed items as the simulator holds them. */
async function listedOnCnB(sim: Sim): Promise<TruthRecord[]> {
  const { records } = (await sim.control('GET', '/_sim/truth?market=cn-b&kind=listings')) as { records: TruthRecord[] };
  return records.filter((r) => r.price !== null);
}

/** The item leaves CN-B's answer: no listing. */
async function vanishOnCnB(sim: Sim, item: TruthRecord): Promise<void> {
  await sim.control('POST', '/_sim/override', {
    market: 'cn-b',
    market_hash_name: item.market_hash_name,
    phase: item.phase,
    price: null, // no listing: the upstream leaves the item out of its answer
    count: 0,
  });
}

/** Whether the marker of `cycleId` is applied. */
const appliedIn = async (pool: Pool, cycleId: string) =>
  (
    await pool.query<{ applied: boolean }>(
      'SELECT applied_at IS NOT NULL AS applied FROM poll_cycles WHERE cycle_id = $1',
      [cycleId],
    )
  ).rows[0]?.applied;

describe('derive path apart from ingest', () => {
  const stack = new TestStack();
  let sim: Sim;
  let suffix: string;
  let pool: Pool;
  let poller: Awaited<ReturnType<typeof startPoller>>['poller'];
  let materializer: Awaited<ReturnType<typeof startMaterializer>>;

  beforeAll(async () => {
    sim = await startSimulator(stack, 150);
    suffix = await projectTopics(stack);
    ({ pool } = await stack.schema());
    materializer = await startMaterializer(stack, suffix, pool, { deriveIntervalMs: 200 });
    poller = (await startPoller(stack, sim, 'cn-b', suffix)).poller;
  }, 60_000);
  afterAll(() => stack.cleanup());

  const applied = (cycleId: string) => appliedIn(pool, cycleId);

  it('prices commit while the derive path is held; the marker applies once it is released', async () => {
    const first = await poller.runOnce('LISTINGS');
    await untilApplied(pool, first.marker.cycle_id);
    const priced = async () =>
      (
        await pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM listings_current WHERE market = 'cn-b' AND price IS NOT NULL`,
        )
      ).rows[0]!.n;
    const before = await priced();
    expect(before).toBeGreaterThan(50);

    // One item vanishes upstream and one moves: the move is ingest's, the removal the marker's.
    const listed = await listedOnCnB(sim);
    const [gone, moved] = [listed[0]!, listed[1]!];
    await vanishOnCnB(sim, gone);
    await sim.control('POST', '/_sim/override', {
      market: 'cn-b',
      market_hash_name: moved.market_hash_name,
      phase: moved.phase,
      price: '12345.67',
    });

    const holder: PoolClient = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT pg_advisory_xact_lock(${DERIVE_LOCK})`);
      const second = await poller.runOnce('LISTINGS');
      // Ingest does not wait for the derive path: the moved price is visible…
      const price = await until('the moved price visible', async () => {
        const { rows } = await pool.query<{ price: string }>(
          `SELECT price::text FROM listings_current WHERE market = 'cn-b' AND market_hash_name = $1 AND phase = $2`,
          [moved.market_hash_name, moved.phase],
        );
        return rows[0]?.price === '12345.67' ? rows[0].price : undefined;
      });
      expect(price).toBe('12345.67');
      // …every offset of the cycle is stored, and still the marker is not applied: nothing of
      // what it implies happened (the marketplace's freshness still names the first cycle).
      await until('the cycle ingested', async () => {
        const { rows } = await pool.query<{ ready: boolean }>(
          `SELECT NOT EXISTS (
             SELECT 1 FROM poll_cycles p CROSS JOIN LATERAL jsonb_to_recordset(p.end_offsets) AS e(partition int, "offset" bigint)
             LEFT JOIN consumer_offsets o ON o.topic = p.data_topic AND o.partition = e.partition
             WHERE p.cycle_id = $1 AND coalesce(o.next_offset, 0) <= e."offset") AS ready
           FROM poll_cycles WHERE cycle_id = $1`,
          [second.marker.cycle_id],
        );
        return rows[0]?.ready ? true : undefined;
      });
      await new Promise((r) => setTimeout(r, 1_000)); // several derive ticks (200 ms) go by
      expect(await applied(second.marker.cycle_id)).toBe(false);
      const freshness = async () =>
        (
          await pool.query<{ last_cycle_id: string }>(
            `SELECT last_cycle_id FROM market_freshness WHERE market = 'cn-b' AND kind = 'LISTINGS'`,
          )
        ).rows[0]?.last_cycle_id;
      expect(await freshness()).toBe(first.marker.cycle_id);

      await holder.query('COMMIT');
      await untilApplied(pool, second.marker.cycle_id, 10_000);
      const { rows: after } = await pool.query<{ price: string | null; count: number }>(
        `SELECT price::text, count FROM listings_current WHERE market = 'cn-b' AND market_hash_name = $1 AND phase = $2`,
        [gone.market_hash_name, gone.phase],
      );
      expect(after[0]).toEqual({ price: null, count: 0 });
      expect(await priced()).toBe(before - 1);
      expect(await freshness()).toBe(second.marker.cycle_id);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
    }
  }, 60_000);

  it("judges the outlier guard again in a transaction of its own, once the markers' has committed", async () => {
    const steps: { step: string; markers: string[] }[] = [];
    const off = materializer.onDerive((r) => steps.push({ step: r.step, markers: r.markers }));
    try {
      const cycle = await poller.runOnce('LISTINGS');
      // untilApplied waits for judge_pending to empty too (migration 0017).
      await untilApplied(pool, cycle.marker.cycle_id);
      // The listener hears a transaction after its commit: wait for the reports too.
      const at = await until('the markers and the second look reported', async () => {
        const i = steps.findIndex((s) => s.step === 'markers' && s.markers.includes(cycle.marker.cycle_id));
        return i >= 0 && steps.slice(i + 1).some((s) => s.step === 'judge') ? i : undefined;
      });
      // The markers' transaction committed (reported) first; the second look came after it.
      expect(steps[at]?.step).toBe('markers');
      const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM judge_pending');
      expect(rows[0]?.n).toBe(0);
    } finally {
      off();
    }
  }, 60_000);

  it('commits the markers before liquidity and the market cap are recomputed (their row locks do not wait for it)', async () => {
    const { records } = (await sim.control('GET', '/_sim/truth?market=cn-b&kind=listings')) as {
      records: { market_hash_name: string; phase: string; price: string | null }[];
    };
    const moved = records.filter((r) => r.price !== null)[5]!;
    const priceOf = async () =>
      (
        await pool.query<{ price: string }>(
          `SELECT price::text FROM listings_current WHERE market = 'cn-b' AND market_hash_name = $1 AND phase = $2`,
          [moved.market_hash_name, moved.phase],
        )
      ).rows[0]?.price;
    const pending = async () =>
      (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM derive_pending')).rows[0]!.n;
    // The recomputation writes item_liquidity: held here, it waits (holding the derive lock).
    const holder: PoolClient = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE item_liquidity IN SHARE ROW EXCLUSIVE MODE');
      const third = await poller.runOnce('LISTINGS');
      // The marker is applied and committed (freshness names it) while the recomputation it
      // queued cannot run: with both in one transaction, nothing of it would be visible yet.
      await until('the marker applied', async () => ((await applied(third.marker.cycle_id)) ? true : undefined));
      expect(await pending()).toBeGreaterThan(0);
      // Ingest goes on meanwhile: the deriver is stuck on item_liquidity, not on listing rows.
      await sim.control('POST', '/_sim/override', {
        market: 'cn-b',
        market_hash_name: moved.market_hash_name,
        phase: moved.phase,
        price: '23456.78',
      });
      await poller.runOnce('LISTINGS');
      expect(
        await until('the next price visible', async () => ((await priceOf()) === '23456.78' ? true : undefined)),
      ).toBe(true);
      expect(await pending()).toBeGreaterThan(0);
      await holder.query('COMMIT');
      // Released: the queue is worked off, and liquidity is what a full recompute gives now.
      await until('the queue worked off', async () => ((await pending()) === 0 ? true : undefined));
      const { rows } = await pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM item_liquidity l JOIN item_liquidity_score s USING (market_hash_name, phase)
         WHERE l.score IS DISTINCT FROM s.score`,
      );
      expect(rows[0]?.n).toBe(0);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
    }
  }, 60_000);
});

describe('the recomputation paced by its cost', () => {
  const stack = new TestStack();
  let sim: Sim;
  let pool: Pool;
  let materializer: Awaited<ReturnType<typeof startMaterializer>>;
  let poller: Awaited<ReturnType<typeof startPoller>>['poller'];

  beforeAll(async () => {
    sim = await startSimulator(stack, 150);
    const suffix = await projectTopics(stack);
    ({ pool } = await stack.schema());
    // Any recomputation pauses the next one for the longest pause (MAX_RECOMPUTE_PAUSE_MS, 30 s).
    materializer = await startMaterializer(stack, suffix, pool, { deriveIntervalMs: 100, recomputeCostFactor: 1e9 });
    poller = (await startPoller(stack, sim, 'cn-b', suffix)).poller;
  }, 60_000);
  afterAll(() => stack.cleanup());

  const pending = async () =>
    (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM derive_pending')).rows[0]!.n;
  /** The clock the last liquidity refresh computed for (migration 0015), if any ran. */
  const refreshedFor = async () =>
    (await pool.query<{ clock: Date }>('SELECT clock FROM liquidity_refresh')).rows[0]?.clock.getTime();

  it('applies markers during the pause, queues their recomputation, and a settle runs it at once', async () => {
    const first = await poller.runOnce('LISTINGS');
    // The first recomputation is not paused: nothing ran before it.
    await until('the first recomputation', async () =>
      (await pending()) === 0 && (await refreshedFor()) !== undefined ? true : undefined,
    );
    const firstFor = await refreshedFor();
    expect(firstFor).toBe(first.marker.finished_at);

    // An item vanishes upstream: the next cycle's marker nulls it (markers are not paced) and
    // queues a recomputation, which waits out the pause.
    const gone = (await listedOnCnB(sim))[0]!;
    await vanishOnCnB(sim, gone);
    await sim.control('POST', '/_sim/clock', { advanceMs: 600_000 });
    const second = await poller.runOnce('LISTINGS');
    await until('the second marker applied', async () =>
      (await appliedIn(pool, second.marker.cycle_id)) ? true : undefined,
    );
    const { rows: nulled } = await pool.query<{ price: string | null }>(
      `SELECT price FROM listings_current WHERE market = 'cn-b' AND market_hash_name = $1 AND phase = $2`,
      [gone.market_hash_name, gone.phase],
    );
    expect(nulled).toEqual([{ price: null }]);
    // Twenty of the deriver's ticks later, still queued.
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await pending()).toBeGreaterThan(0);
    expect(await refreshedFor()).toBe(firstFor);

    // A replay's or a test's end is not paced.
    await materializer.settle();
    expect(await pending()).toBe(0);
    expect(await refreshedFor()).toBe(second.marker.finished_at);
  }, 60_000);
});

/**
 * Liquidity recomputed for the items whose inputs moved (migration 0015, derived.ts
 * LIQUIDITY_DIRTY), against real PostgreSQL: after every incremental refresh, a full refresh at the
 * same clock finds nothing to write — the incremental one wrote exactly the rows, values and as_of
 * a full one would have. Root cause guarded: an input the dirty set forgets (a sale crossing the
 * 7- or 30-day window as the clock moves, a buy order, a transaction that commits after the
 * refresh's snapshot was taken) leaves a stale score that no later refresh corrects, because the
 * item is never dirty again until its listing changes.
 */
import { refreshLiquidity, MIGRATIONS_DIR, type LiquidityRefresh } from '@skinprices/materializer';
import { migrate, type Pool, type PoolClient } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from '../support/stack.js';

const DAY = 86_400_000;
const ITEMS = 40;
/** CNY markets give asks and bids (the spread); the USD one only depth. */
const MARKETS = [
  { market: 'cn-a', currency: 'CNY' },
  { market: 'cn-b', currency: 'CNY' },
  { market: 'usd-1', currency: 'USD' },
] as const;
const item = (i: number) => `Liquid ${String(i).padStart(3, '0')}`;

/** A small seeded generator (mulberry32): the same rounds on every run. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Both liquidity tables, every column and the row version: equal means nothing was written. */
async function liquidityState(c: PoolClient | Pool): Promise<string> {
  const { rows } = await c.query<{ r: string }>(
    `SELECT string_agg(r, E'\\n' ORDER BY r) AS r FROM (
       SELECT format('L %s|%s|%s|%s|%s|%s|%s|%s|%s', market_hash_name, phase, listings, sales_7d, best_bid, lowest_ask, score, as_of, xmin) AS r FROM item_liquidity
       UNION ALL
       SELECT format('S %s|%s|%s|%s|%s', market_hash_name, phase, score, as_of, xmin) FROM item_liquidity_score) t`,
  );
  return rows[0]?.r ?? '';
}

describe('liquidity refreshed incrementally', () => {
  const stack = new TestStack();
  let pool: Pool;
  const random = prng(12);
  let sale = 0;
  let now = Date.UTC(2026, 10, 20, 12);

  /** One refresh in a transaction of its own, as the deriver runs it. */
  const refresh = async (at: number): Promise<LiquidityRefresh> => {
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
      const r = await refreshLiquidity(c, new Date(at));
      await c.query('COMMIT');
      return r;
    } finally {
      c.release();
    }
  };

  /**
   * What a full refresh at the same clock would write: run it (the stored snapshot removed, so
   * it takes every item) in a transaction that is rolled back, and compare both tables.
   */
  const expectFullWritesNothing = async (at: number) => {
    const before = await liquidityState(pool);
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
      await c.query('DELETE FROM liquidity_refresh');
      expect((await refreshLiquidity(c, new Date(at))).scope).toBe('all');
      expect(await liquidityState(c)).toBe(before);
    } finally {
      await c.query('ROLLBACK');
      c.release();
    }
  };

  const insertSale = (via: Pool | PoolClient, i: number, soldAt: number) =>
    via.query(
      `INSERT INTO sales (market, sale_id, market_hash_name, phase, currency, price, sold_at, observed_at)
       VALUES ('cn-a', $1, $2, '', 'CNY', 12.5, $3, $3)`,
      [`s${sale++}`, item(i), new Date(soldAt)],
    );
  const setListing = (via: Pool | PoolClient, market: string, i: number, price: string | null, count: number) =>
    via.query(
      `UPDATE listings_current SET price = $3, count = $4, observed_at = observed_at + interval '1 ms'
       WHERE market = $1 AND market_hash_name = $2`,
      [market, item(i), price, count],
    );
  const pick = (n: number) => Math.floor(random() * n);
  const money = () => (1 + random() * 200).toFixed(2);

  beforeAll(async () => {
    ({ pool } = await stack.schema());
    await migrate(pool, MIGRATIONS_DIR);
    for (let i = 0; i < ITEMS; i++) {
      for (const { market, currency } of MARKETS) {
        if (random() < 0.2) continue; // not listed there
        const priced = random() < 0.85;
        await pool.query(
          `INSERT INTO listings_current (market, market_hash_name, phase, currency, price, count, observed_at, cycle_id)
           VALUES ($1, $2, '', $3, $4, $5, $6, 'c0')`,
          [market, item(i), currency, priced ? money() : null, priced ? 1 + pick(30) : 0, new Date(now - DAY)],
        );
      }
      if (random() < 0.5)
        await pool.query(
          `INSERT INTO buyorders_current (market, market_hash_name, phase, tier, currency, price, count, observed_at, cycle_id)
           VALUES ('cn-a', $1, '', $2, 'CNY', $3, 3, $4, 'c0')`,
          [item(i), random() < 0.8 ? '' : 'T2', money(), new Date(now - DAY)],
        );
      // Sales spread over the last 40 days and the next 2 (sold after the clock: not yet counted).
      for (let k = pick(6); k > 0; k--) await insertSale(pool, i, now - 40 * DAY + random() * 42 * DAY);
    }
  });
  afterAll(() => stack.cleanup());

  it('writes after each round exactly what a full refresh at the same clock writes', async () => {
    expect((await refresh(now)).scope).toBe('all');
    await expectFullWritesNothing(now);
    const scopes: string[] = [];
    for (let round = 0; round < 24; round++) {
      // Every fourth round only the clock moves: sales enter the window and leave the 7- and
      // 30-day windows, and nothing else marks their items.
      if (round % 4 !== 3) {
        for (let k = pick(5); k > 0; k--) {
          const { market } = MARKETS[pick(MARKETS.length)] as (typeof MARKETS)[number];
          const gone = random() < 0.25;
          await setListing(pool, market, pick(ITEMS), gone ? null : money(), gone ? 0 : 1 + pick(30));
        }
        for (let k = pick(3); k > 0; k--) await insertSale(pool, pick(ITEMS), now - random() * 31 * DAY);
        if (random() < 0.5)
          await pool.query(`UPDATE buyorders_current SET price = $2 WHERE market_hash_name = $1`, [
            item(pick(ITEMS)),
            money(),
          ]);
      }
      now += Math.floor(random() * 3 * DAY);
      const r = await refresh(now);
      scopes.push(r.scope);
      await expectFullWritesNothing(now);
    }
    expect(scopes.every((s) => s === 'dirty')).toBe(true);
  });

  /** An item of its own, listed on CN-A and CN-B. */
  const listed = async (i: number) => {
    for (const market of ['cn-a', 'cn-b'])
      await pool.query(
        `INSERT INTO listings_current (market, market_hash_name, phase, currency, price, count, observed_at, cycle_id)
         VALUES ($1, $2, '', 'CNY', 20, 2, $3, 'c0')`,
        [market, item(i), new Date(now)],
      );
    return i;
  };

  it('recomputes what a transaction still running at the refresh commits after it', async () => {
    const i = await listed(ITEMS + 1);
    await setListing(pool, 'cn-a', i, '10.00', 5);
    await refresh(now);
    const slow = await pool.connect();
    try {
      // Written before the next refresh's snapshot is taken, committed after that refresh; in a
      // subtransaction, as the ingest path writes (poison.ts's savepoint): a subtransaction's id
      // is not among a snapshot's running ids, so pg_visible_in_snapshot called it visible.
      await slow.query('BEGIN');
      await slow.query(`SELECT pg_current_xact_id()`);
      await slow.query('SAVEPOINT ingest');
      await setListing(slow, 'cn-a', i, '10.00', 25);
      await slow.query('RELEASE SAVEPOINT ingest');
      // A later transaction completes before the snapshot: its xmax passes the subtransaction's id.
      await setListing(pool, 'cn-b', i, '11.00', 3);
      const during = await refresh(now);
      expect(during.scope).toBe('dirty');
      await slow.query('COMMIT');
    } finally {
      slow.release();
    }
    const after = await refresh(now);
    expect(after.items).toBeGreaterThanOrEqual(1);
    await expectFullWritesNothing(now);
  });

  /**
   * Whether the bound the next refresh uses is exact: no transaction was running as the stored
   * snapshot was taken (xmin = xmax). Else a transaction running anywhere in the cluster then (the
   * schema registry shares it) makes the bound older and the dirty set a superset.
   */
  const exactBound = async () =>
    (
      await pool.query<{ exact: boolean }>(
        'SELECT pg_snapshot_xmin(snapshot) = pg_snapshot_xmax(snapshot) AS exact FROM liquidity_refresh',
      )
    ).rows[0]?.exact === true;

  it('recomputes only the items whose inputs moved', async () => {
    await refresh(now);
    const idle = await exactBound();
    const none = await refresh(now);
    if (idle) expect(none.items).toBe(0);
    const [a, b] = [await listed(ITEMS + 2), await listed(ITEMS + 3)];
    await refresh(now);
    await setListing(pool, 'cn-b', a, '33.00', 4);
    await setListing(pool, 'cn-b', b, null, 0);
    const exact = await exactBound();
    const r = await refresh(now);
    expect(r.scope).toBe('dirty');
    if (exact) expect(r.items).toBe(2);
    else expect(r.items).toBeGreaterThanOrEqual(2);
    await expectFullWritesNothing(now);
  });
});

/**
 * Liquidity as a daily figure (migration 0020, derived.ts), against real PostgreSQL:
 * - within a day, only what is known about the days before moves a score: today's listings, bids
 *   and sales change none, and a refresh after them writes no row (the rows a customer's lists
 *   would re-read);
 * - the incremental refresh (LIQUIDITY_DIRTY) writes exactly what a full one at the same clock
 *   would: after every round, a full refresh finds nothing to write. Root cause guarded: an input
 *   the dirty set forgets (a late close, a late sale, a buy order, a transaction that commits after
 *   the refresh's snapshot was taken) leaves a stale score that no later refresh of the day fixes;
 * - the bid held at the start of a day is the same whether a key's buy orders came in one batch or
 *   one batch each (books.ts keeps each row's prior observation).
 */
import type { BuyOrderEvent, ConsumedBatch } from '@skinprices/events';
import {
  applyBatch,
  refreshLiquidity,
  MIGRATIONS_DIR,
  type LiquidityRefresh,
  type MaterializedKind,
} from '@skinprices/materializer';
import { migrate, type Pool, type PoolClient } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from '../support/stack.js';

const HOUR = 3_600_000;
const DAY = 86_400_000;
const ITEMS = 40;
/** CNY markets give asks and bids (the spread); the USD one only depth. */
const MARKETS = [
  { market: 'cn-a', currency: 'CNY' },
  { market: 'cn-b', currency: 'CNY' },
  { market: 'usd-1', currency: 'USD' },
] as const;
const item = (i: number) => `Liquid ${String(i).padStart(3, '0')}`;
const dayOf = (t: number) => new Date(Math.floor(t / DAY) * DAY).toISOString().slice(0, 10);

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

/** Buy orders through the ingest path (applyBatch), as one batch or one batch per record. */
async function applyBids(
  c: PoolClient,
  events: readonly BuyOrderEvent[],
  firstOffset: number,
  perRecord: boolean,
): Promise<void> {
  const messages = events.map((value, k) => ({
    topic: 'buyorders.t',
    partition: 0,
    offset: String(firstOffset + k),
    key: null,
    value,
  }));
  const batches = perRecord ? messages.map((m) => [m]) : [messages];
  for (const part of batches)
    await applyBatch(
      c,
      'buyorder',
      { topic: 'buyorders.t', partition: 0, messages: part } as ConsumedBatch<MaterializedKind>,
      {
        groupId: 'direct',
      },
    );
}

const bidEvent = (i: number, price: string | null, at: number, market = 'cn-a', tier: string | null = null) =>
  ({
    market,
    market_hash_name: item(i),
    phase: '',
    currency: 'CNY',
    tier,
    price,
    blue_price: null,
    count: price === null ? 0 : 3,
    template_id: null,
    type_id: null,
    observed_at: at,
    cycle_id: `c${at}`,
  }) satisfies BuyOrderEvent;

describe('liquidity, a daily figure refreshed incrementally', () => {
  const stack = new TestStack();
  let pool: Pool;
  const random = prng(12);
  let sale = 0;
  let offset = 0;
  /** Noon of a day: the clock moves within it, and to the next days. */
  let now = Date.UTC(2026, 10, 20, 12);

  const withClient = async <T>(f: (c: PoolClient) => Promise<T>): Promise<T> => {
    const c = await pool.connect();
    try {
      return await f(c);
    } finally {
      c.release();
    }
  };

  /** One refresh in a transaction of its own, as the deriver runs it. */
  const refresh = (at: number, whole = false): Promise<LiquidityRefresh> =>
    withClient(async (c) => {
      await c.query('BEGIN');
      const r = await refreshLiquidity(c, new Date(at), { whole });
      await c.query('COMMIT');
      return r;
    });

  /**
   * What a full refresh at the same clock would write: run it in a transaction that is rolled
   * back, and compare both tables.
   */
  const expectFullWritesNothing = async (at: number) => {
    const before = await liquidityState(pool);
    await withClient(async (c) => {
      try {
        await c.query('BEGIN');
        expect((await refreshLiquidity(c, new Date(at), { whole: true })).scope).toBe('all');
        expect(await liquidityState(c)).toBe(before);
      } finally {
        await c.query('ROLLBACK');
      }
    });
  };

  const insertSale = (via: Pool | PoolClient, i: number, soldAt: number) =>
    via.query(
      `INSERT INTO sales (market, sale_id, market_hash_name, phase, currency, price, sold_at, observed_at)
       VALUES ('cn-a', $1, $2, '', 'CNY', 12.5, $3, $3)`,
      [`s${sale++}`, item(i), new Date(soldAt)],
    );
  /**
   * A listing observed at `at` as the ingest path writes it: the current row, and the close of
   * its day (listing_daily) while listed.
   */
  const observe = async (
    via: Pool | PoolClient,
    market: string,
    i: number,
    price: string | null,
    count: number,
    at: number,
  ) => {
    await via.query(
      `UPDATE listings_current SET price = $3, count = $4, observed_at = greatest(observed_at + interval '1 ms', $5)
       WHERE market = $1 AND market_hash_name = $2`,
      [market, item(i), price, count, new Date(at)],
    );
    if (price !== null)
      await via.query(
        `INSERT INTO listing_daily (market, market_hash_name, phase, day, close, count, observed_at)
         VALUES ($1, $2, '', $3::date, $4, $5, $6)
         ON CONFLICT (market, market_hash_name, phase, day) DO UPDATE
           SET close = excluded.close, count = excluded.count, observed_at = excluded.observed_at`,
        [market, item(i), dayOf(at), price, count, new Date(at)],
      );
  };
  const pick = (n: number) => Math.floor(random() * n);
  const money = () => (1 + random() * 200).toFixed(2);

  beforeAll(async () => {
    ({ pool } = await stack.schema());
    await migrate(pool, MIGRATIONS_DIR);
    const bids: BuyOrderEvent[] = [];
    for (let i = 0; i < ITEMS; i++) {
      for (const { market, currency } of MARKETS) {
        if (random() < 0.2) continue; // not listed there
        await pool.query(
          `INSERT INTO listings_current (market, market_hash_name, phase, currency, price, count, observed_at, cycle_id)
           VALUES ($1, $2, '', $3, NULL, 0, $4, 'c0')`,
          [market, item(i), currency, new Date(now - 3 * DAY)],
        );
        // Closes of the three days before: some days not listed at all.
        for (let d = 3; d >= 1; d--)
          if (random() < 0.85) await observe(pool, market, i, money(), 1 + pick(30), now - d * DAY + pick(8) * HOUR);
      }
      if (random() < 0.6) {
        bids.push(bidEvent(i, money(), now - 2 * DAY, 'cn-a', random() < 0.8 ? null : 'T2'));
        bids.push(bidEvent(i, random() < 0.15 ? null : money(), now - DAY - 2 * HOUR, 'cn-a'));
      }
      // Sales spread over the last 40 days and the next 2 (sold after the clock: not yet counted).
      for (let k = pick(6); k > 0; k--) await insertSale(pool, i, now - 40 * DAY + random() * 42 * DAY);
    }
    await withClient((c) => applyBids(c, bids, offset, false));
    offset += bids.length;
  });
  afterAll(() => stack.cleanup());

  it("changes no score for today's listings, bids and sales", async () => {
    expect((await refresh(now)).scope).toBe('all');
    const scored = await pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM item_liquidity_score WHERE score IS NOT NULL',
    );
    expect(scored.rows[0]?.n).toBeGreaterThan(10);
    const before = await liquidityState(pool);
    const bids: BuyOrderEvent[] = [];
    for (let k = 0; k < 30; k++) {
      const { market } = MARKETS[pick(MARKETS.length)] as (typeof MARKETS)[number];
      await observe(pool, market, pick(ITEMS), random() < 0.2 ? null : money(), 1 + pick(30), now + k * 60_000);
      bids.push(bidEvent(pick(ITEMS), money(), now + k * 60_000));
      await insertSale(pool, pick(ITEMS), now - HOUR + k * 60_000);
    }
    await withClient((c) => applyBids(c, bids, offset, false));
    offset += bids.length;
    const r = await refresh(now + HOUR);
    expect(r.scope).toBe('dirty');
    expect(r.items).toBeGreaterThan(0);
    expect(await liquidityState(pool)).toBe(before);
  });

  it('writes after each round exactly what a full refresh at the same clock writes', async () => {
    now += HOUR;
    await refresh(now);
    await expectFullWritesNothing(now);
    const scopes: string[] = [];
    for (let round = 0; round < 24; round++) {
      // Late news about the days before (closes, sales, bids observed before the day began), and
      // today's (which must change nothing).
      for (let k = pick(5); k > 0; k--) {
        const { market } = MARKETS[pick(MARKETS.length)] as (typeof MARKETS)[number];
        const gone = random() < 0.25;
        const late = random() < 0.5;
        const at = late ? now - (now % DAY) - 1 - pick(3) * HOUR : now;
        await observe(pool, market, pick(ITEMS), gone ? null : money(), gone ? 0 : 1 + pick(30), at);
      }
      for (let k = pick(3); k > 0; k--) await insertSale(pool, pick(ITEMS), now - random() * 31 * DAY);
      if (random() < 0.5) {
        await withClient((c) => applyBids(c, [bidEvent(pick(ITEMS), money(), now)], offset, false));
        offset++;
      }
      // Every sixth round the day rolls over: every item is computed again.
      const next = round % 6 === 5 ? now + DAY : now + pick(40) * 60_000;
      const r = await refresh(next);
      scopes.push(r.scope);
      expect(r.scope).toBe(round % 6 === 5 ? 'all' : 'dirty');
      now = next;
      await expectFullWritesNothing(now);
    }
    expect(scopes.filter((s) => s === 'dirty').length).toBe(20);
  });

  /** An item of its own, listed on CN-A and CN-B, with yesterday's closes. */
  const listed = async (i: number) => {
    for (const market of ['cn-a', 'cn-b']) {
      await pool.query(
        `INSERT INTO listings_current (market, market_hash_name, phase, currency, price, count, observed_at, cycle_id)
         VALUES ($1, $2, '', 'CNY', 20, 2, $3, 'c0')`,
        [market, item(i), new Date(now - DAY)],
      );
      await observe(pool, market, i, '20.00', 2, now - DAY);
    }
    return i;
  };
  /** A close of yesterday's arriving late, as its listing row is written. */
  const lateClose = (via: Pool | PoolClient, market: string, i: number, price: string, count: number) =>
    observe(via, market, i, price, count, now - (now % DAY) - 1);

  it('recomputes what a transaction still running at the refresh commits after it', async () => {
    const i = await listed(ITEMS + 1);
    await lateClose(pool, 'cn-a', i, '10.00', 5);
    await refresh(now);
    const slow = await pool.connect();
    try {
      // Written before the next refresh's snapshot is taken, committed after that refresh; in a
      // subtransaction, as the ingest path writes (poison.ts's savepoint): a subtransaction's id
      // is not among a snapshot's running ids, so pg_visible_in_snapshot called it visible.
      await slow.query('BEGIN');
      await slow.query(`SELECT pg_current_xact_id()`);
      await slow.query('SAVEPOINT ingest');
      await lateClose(slow, 'cn-a', i, '10.00', 25);
      await slow.query('RELEASE SAVEPOINT ingest');
      // A later transaction completes before the snapshot: its xmax passes the subtransaction's id.
      await lateClose(pool, 'cn-b', i, '11.00', 3);
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

  it('recomputes only the items whose inputs moved, and everything after a restatement', async () => {
    await refresh(now);
    const idle = await exactBound();
    const none = await refresh(now);
    if (idle) expect(none.items).toBe(0);
    const [a, b] = [await listed(ITEMS + 2), await listed(ITEMS + 3)];
    await refresh(now);
    await lateClose(pool, 'cn-b', a, '33.00', 4);
    await lateClose(pool, 'cn-b', b, '7.00', 1);
    const exact = await exactBound();
    const r = await refresh(now);
    expect(r.scope).toBe('dirty');
    if (exact) expect(r.items).toBe(2);
    else expect(r.items).toBeGreaterThanOrEqual(2);
    await expectFullWritesNothing(now);
    // A history cycle's closes are no listing row: its marker makes the refresh whole.
    await pool.query(`UPDATE listing_daily SET count = count + 1 WHERE day = $1::date AND market_hash_name = $2`, [
      dayOf(now - DAY),
      item(a),
    ]);
    expect((await refresh(now, true)).scope).toBe('all');
    await expectFullWritesNothing(now);
  });

  it('takes the bid held at the start of the day, however the buy orders were batched', async () => {
    const day = now - (now % DAY) + 3 * DAY;
    const events = [
      bidEvent(90, '10.00', day - 2 * DAY),
      bidEvent(90, '11.00', day - DAY + HOUR),
      bidEvent(90, '12.00', day - HOUR),
      bidEvent(90, '13.00', day + HOUR),
      bidEvent(90, '14.00', day + 2 * HOUR),
      bidEvent(91, '20.00', day - HOUR),
      bidEvent(91, null, day + HOUR),
      bidEvent(92, '30.00', day + HOUR),
      bidEvent(92, '31.00', day + DAY + HOUR),
    ];
    const rowsAfter = async (perRecord: boolean) => {
      const { pool: p } = await stack.schema();
      await migrate(p, MIGRATIONS_DIR);
      const c = await p.connect();
      try {
        await applyBids(c, events, 0, perRecord);
        const { rows } = await c.query<{ r: string }>(
          `SELECT string_agg(format('%s|%s|%s|%s|%s', market_hash_name, price, observed_at, prior_price, prior_at), E'\\n'
                             ORDER BY market_hash_name) AS r
           FROM buyorders_current`,
        );
        const { rows: held } = await c.query<{ name: string; bid: string | null }>(
          `SELECT market_hash_name AS name,
                  (CASE WHEN observed_at < $1 THEN price WHEN prior_at < $1 THEN prior_price END)::text AS bid
           FROM buyorders_current ORDER BY 1`,
          [new Date(day)],
        );
        return { rows: rows[0]?.r, held };
      } finally {
        c.release();
      }
    };
    const together = await rowsAfter(false);
    const apart = await rowsAfter(true);
    expect(apart.rows).toBe(together.rows);
    // 90: 12.00 was the last bid before the day began; 91: 20.00, cleared since; 92: unknown (its
    // first order came the next day, and it was last seen before that on no day at all).
    expect(together.held).toEqual([
      { name: item(90), bid: '12.00' },
      { name: item(91), bid: '20.00' },
      { name: item(92), bid: null },
    ]);
  });
});

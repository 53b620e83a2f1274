/**
 * Patched list bodies against real PostgreSQL: "the rows changed since a snapshot" (the read
 * contract's row_age, migration 0012, against the snapshot's oldest running transaction) holds
 * every row the snapshot did not see whatever the order in which transactions commit, also those
 * written in a subtransaction, and a body kept by patches serves the same bytes as one rebuilt
 * from every row.
 */
import { gunzipSync } from 'node:zlib';
import { ListBodyCache, ReadModel, type ListSource } from '@skinprices/api';
import { MIGRATIONS_DIR } from '@skinprices/materializer';
import { migrate, type Pool } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from '../support/stack.js';

const MARKET = 'eu-a';
const ROWS = 700;
const name = (i: number) => `Item ${String(i).padStart(4, '0')} | Ünïcode ★`;

describe('patched list bodies over the read model', () => {
  const stack = new TestStack();
  let pool: Pool;
  let read: ReadModel;

  beforeAll(async () => {
    ({ pool } = await stack.schema());
    await migrate(pool, MIGRATIONS_DIR);
    await pool.query(
      `INSERT INTO listings_current (market, market_hash_name, phase, currency, price, count, observed_at, cycle_id)
       SELECT $1, $2::text || ' ' || i, '', 'EUR', 10 + i, 1 + i % 7, now(), 'c1' FROM generate_series(0, $3 - 1) i`,
      [MARKET, 'seed', ROWS],
    );
    await pool.query(
      `UPDATE listings_current SET market_hash_name = $1 || lpad(split_part(market_hash_name, ' ', 2), 4, '0') || ' | Ünïcode ★'`,
      ['Item '],
    );
    read = new ReadModel(pool);
  });
  afterAll(() => stack.cleanup());

  const setPrice = (i: number, price: string | null, via: Pool | { query: Pool['query'] } = pool) =>
    via.query(
      `UPDATE listings_current SET price = $2, count = CASE WHEN $2::numeric IS NULL THEN 0 ELSE count END, observed_at = now() WHERE market = $3 AND market_hash_name = $1`,
      [name(i), price, MARKET],
    );
  const namesOf = (rows: { key: string }[]) => rows.map((r) => r.key.split('\u0000')[0]).sort();
  /**
   * The rows read since the snapshots `since` are `names` exactly when no transaction was running as
   * each was taken (its xmin is its xmax: "xmin:xmax:xip"), else at least those: a transaction
   * running anywhere in the cluster then (the schema registry shares it) makes the bound older,
   * and a superset is what the read promises.
   */
  const expectNamed = (rows: { key: string }[], since: string[], names: number[]) => {
    const wanted = names.map(name).sort();
    if (since.every((snap) => snap.split(':')[0] === snap.split(':')[1])) expect(namesOf(rows)).toEqual(wanted);
    else expect(namesOf(rows)).toEqual(expect.arrayContaining(wanted));
  };
  const jsonOf = (rows: { key: string; json: string | null }[], i: number) =>
    rows.find((r) => r.key.startsWith(name(i)))?.json;
  /** The market's list as the API's route reads it (routes/listings.ts), without the fields read. */
  const source = (): ListSource => ({
    full: async () => {
      const r = await read.listingRows(MARKET);
      return { snapshot: r.snapshot, rows: r.rows.map((x) => ({ key: x.key, json: x.json as string })) };
    },
    since: async (s) => {
      const r = await read.listingRows(MARKET, s);
      return { snapshot: r.snapshot, changes: r.rows };
    },
  });
  /** The body `cache` serves of `from`, as a client inflates it, never an outdated one. */
  const servedBy = (cache: ListBodyCache, from: ListSource) => async () =>
    gunzipSync((await cache.get(`prices:${MARKET}`, from, true)).headGzip.subarray(0), { finishFlush: 2 }).toString();
  /** The list serialised whole from every row. */
  const whole = async () => `{"data":${JSON.stringify(await read.marketListings(MARKET))}`;

  it('names the rows committed since a snapshot, also those of a transaction that commits after it, and nothing older', async () => {
    const first = await read.listingRows(MARKET);
    expect(first.rows).toHaveLength(ROWS);
    expectNamed((await read.listingRows(MARKET, first.snapshot)).rows, [first.snapshot], []);

    // A transaction that has written before the next read's snapshot and commits after it.
    const slow = await pool.connect();
    try {
      await slow.query('BEGIN');
      await setPrice(5, '555.55', slow);
      await setPrice(7, '777.77');
      await setPrice(9, null);
      const second = await read.listingRows(MARKET, first.snapshot);
      expectNamed(second.rows, [first.snapshot], [7, 9]);
      expect(jsonOf(second.rows, 5) ?? '').not.toContain('555.55');
      expect(second.rows.find((r) => r.key.startsWith(name(9)))?.json).toBeNull();
      expect(second.rows.find((r) => r.key.startsWith(name(7)))?.json).toContain('"price":"777.77"');
      await slow.query('COMMIT');
      // Its xid is older than the second snapshot's newest, but the snapshot did not see it. Rows
      // of transactions not older than that snapshot's oldest running one come again (7 and 9: a
      // superset, which the patch's digests drop), nothing older does.
      const third = await read.listingRows(MARKET, second.snapshot);
      expectNamed(third.rows, [second.snapshot], [5, 7, 9]);
      expect(jsonOf(third.rows, 5)).toContain('"price":"555.55"');
      expectNamed((await read.listingRows(MARKET, third.snapshot)).rows, [third.snapshot], []);
    } finally {
      slow.release();
    }
    // A score written (the deriver's merge) is read on its own (api_liquidity_v1, migration 0018),
    // not as the listing row: the listing rows' read does not name it.
    const before = await read.listingRows(MARKET);
    const scoresBefore = await read.liquidityScores(before.snapshot);
    await pool.query(
      `INSERT INTO item_liquidity_score (market_hash_name, phase, score, as_of) VALUES ($1, '', 42.5, now())`,
      [name(11)],
    );
    expectNamed((await read.listingRows(MARKET, before.snapshot)).rows, [before.snapshot], []);
    const liquid = await read.liquidityScores(scoresBefore.snapshot);
    expectNamed(liquid.changes, [scoresBefore.snapshot], [11]);
    expect(liquid.changes.find((c) => c.key.startsWith(name(11)))?.fields).toEqual({ liquidity: '42.50' });
    // The same key as the list's rows: the field lands on the row a full read shows with it.
    const full = await read.listingRows(MARKET);
    expect(jsonOf(full.rows, 11)).toContain('"liquidity":"42.50"');
    expect(full.rows.some((r) => r.key === liquid.changes[0]?.key)).toBe(true);
    expectNamed((await read.liquidityScores(liquid.snapshot)).changes, [liquid.snapshot], []);
    // The score's inputs moving does not (migration 0013): only the score is shown.
    await pool.query(
      `INSERT INTO item_liquidity (market_hash_name, phase, listings, best_bid, score, as_of) VALUES ($1, '', 3, 12.5, 42.5, now())`,
      [name(11)],
    );
    await pool.query(`UPDATE item_liquidity SET listings = 4, best_bid = 13 WHERE market_hash_name = $1`, [name(11)]);
    expectNamed((await read.liquidityScores(liquid.snapshot)).changes, [liquid.snapshot], []);
    expectNamed((await read.listingRows(MARKET, liquid.snapshot)).rows, [liquid.snapshot], []);
    // Rows frozen by VACUUM keep their old transaction ids: still nothing new.
    const now = await read.listingRows(MARKET);
    await pool.query('VACUUM (FREEZE) listings_current');
    expectNamed((await read.listingRows(MARKET, now.snapshot)).rows, [now.snapshot], []);
  });

  it('names the rows of a subtransaction that was running at the snapshot, behind a later commit', async () => {
    // Root cause: the ingest path writes its rows under a savepoint (poison.ts). A subtransaction's
    // id is not among a snapshot's running ids, so once a transaction with a higher id had
    // committed before the snapshot, pg_visible_in_snapshot called the running batch's rows seen,
    // and the list never received those prices.
    const first = await read.listingRows(MARKET);
    const batch = await pool.connect();
    try {
      await batch.query('BEGIN');
      await batch.query('SELECT pg_current_xact_id()');
      await batch.query('SAVEPOINT poison_isolation');
      await setPrice(21, '21.21', batch);
      await batch.query('RELEASE SAVEPOINT poison_isolation');
      await setPrice(23, '23.23');
      const second = await read.listingRows(MARKET, first.snapshot);
      expectNamed(second.rows, [first.snapshot], [23]);
      await batch.query('COMMIT');
      const third = await read.listingRows(MARKET, second.snapshot);
      expect(namesOf(third.rows)).toContain(name(21));
      expect(jsonOf(third.rows, 21)).toContain('"price":"21.21"');
    } finally {
      batch.release();
    }
  });

  it('serves, through patches, the bytes a body rebuilt from every row serves', async () => {
    let version = 0;
    const cache = new ListBodyCache(
      () => version,
      () => 0,
      0,
    );
    const served = servedBy(cache, source());
    expect(await served()).toBe(await whole());
    for (let round = 0; round < 5; round++) {
      for (let j = 0; j < 20; j++)
        await setPrice((round * 97 + j * 31) % ROWS, j % 9 === 0 ? null : `${round + 1}${j}.0${j % 10}`);
      version++;
      expect(await served()).toBe(await whole());
    }
    expect(cache.stats.patches).toBe(5);
    expect(cache.stats.rebuilds).toBe(1);
    // Rows new to the list (priced again, or never seen) are placed after their predecessor as
    // the database orders them, read in the same snapshot: still a patch.
    await setPrice(0, '1.00');
    await setPrice(9, '9.00');
    await pool.query(
      `INSERT INTO listings_current (market, market_hash_name, phase, currency, price, count, observed_at, cycle_id)
       VALUES ($1, $2, '', 'EUR', 3.5, 2, now(), 'c2'), ($1, $2, 'Ruby', 'EUR', 4.5, 1, now(), 'c2'), ($1, 'AAA first', '', 'EUR', 1, 1, now(), 'c2')`,
      [MARKET, `${name(9)} extra`],
    );
    version++;
    expect(await served()).toBe(await whole());
    expect(cache.stats).toMatchObject({ patches: 6, rebuilds: 1 });
  });

  it('follows scores written on their own (the fields read), to the bytes of a body rebuilt from every row', async () => {
    let version = 0;
    let derived = 0;
    const cache = new ListBodyCache(
      () => version + derived,
      () => 0,
      0,
      undefined,
      { version: () => derived, lagMs: 0 },
    );
    const log: string[] = [];
    const served = servedBy(cache, {
      ...source(),
      fields: async (s) => {
        const r = await read.liquidityScores(s);
        log.push(`fields ${r.changes.length}`);
        return r;
      },
    });
    expect(await served()).toBe(await whole());
    // A recomputation writes the scores of most items (numeric(5,2): '7.10', '100.00', null).
    await pool.query(
      `INSERT INTO item_liquidity_score (market_hash_name, phase, score, as_of)
       SELECT market_hash_name, phase, CASE WHEN n % 11 = 0 THEN NULL ELSE (n % 1000) / 10.0 END, now()
       FROM (SELECT market_hash_name, phase, row_number() OVER (ORDER BY market_hash_name) AS n
             FROM listings_current WHERE market = $1) x
       ON CONFLICT (market_hash_name, phase) DO UPDATE SET score = EXCLUDED.score, as_of = EXCLUDED.as_of`,
      [MARKET],
    );
    derived++;
    // A price moves in the same moment: its row and the scores arrive in one patch.
    await setPrice(3, '3.33');
    version++;
    expect(await served()).toBe(await whole());
    expect(log.length).toBe(1);
    expect(Number(log[0]?.split(' ')[1])).toBeGreaterThanOrEqual(ROWS - 5);
    expect(cache.stats.rebuilds).toBe(1);
    cache.stop();
  });
});

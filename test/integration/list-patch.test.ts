/**
 * Patched list bodies against real PostgreSQL: the change journal (materializer migration 0019)
 * names exactly the rows whose served values changed since a position, in commit order whatever
 * the order in which transactions began or wrote, also rows written under a savepoint; a rewrite
 * with equal served values names nothing; and a body kept by patches serves the same bytes as one
 * rebuilt from every row.
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
      `INSERT INTO listings_current (market, market_hash_name, phase, currency, price, count, observed_at, changed_at, cycle_id)
       SELECT $1, $2::text || ' ' || i, '', 'EUR', 10 + i, 1 + i % 7, now(), now(), 'c1' FROM generate_series(0, $3 - 1) i`,
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
  /** The rows (or field changes) read are those of `names`, exactly. */
  const expectNamed = (rows: { key: string }[] | undefined, names: number[]) =>
    expect(namesOf(rows ?? [])).toEqual(names.map(name).sort());
  const jsonOf = (rows: { key: string; json: string | null }[], i: number) =>
    rows.find((r) => r.key.startsWith(name(i)))?.json;
  /** The changes since `position`, which the journal must still reach back to. */
  const changesSince = async (position: string) => {
    const r = await read.listingChanges(MARKET, position, () => true);
    if (!r) throw new Error(`the journal no longer reaches back to ${position}`);
    return r;
  };
  const scoresSince = (position: string) => read.liquidityScores(position);
  /** The market's list as the API's route reads it (routes/listings.ts), without the fields read. */
  const source = (): ListSource => ({
    full: async () => {
      const r = await read.listingRows(MARKET);
      return { position: r.position, rows: r.rows.map((x) => ({ key: x.key, json: x.json as string })) };
    },
    since: async (s, known) => {
      const r = await read.listingChanges(MARKET, s, known);
      return r && { position: r.position, changes: r.rows };
    },
  });
  /** The body `cache` serves of `from`, as a client inflates it, never an outdated one. */
  const servedBy = (cache: ListBodyCache, from: ListSource) => async () =>
    gunzipSync((await cache.get(`prices:${MARKET}`, from, true)).headGzip.subarray(0), { finishFlush: 2 }).toString();
  /** The list serialised whole from every row. */
  const whole = async () => `{"data":${JSON.stringify(await read.marketListings(MARKET))}`;

  it('names exactly the rows changed since a position, in commit order, not in the order writes began', async () => {
    const first = await read.listingRows(MARKET);
    expect(first.rows).toHaveLength(ROWS);
    expectNamed((await changesSince(first.position)).rows, []);

    // A transaction that writes before the next read and commits after it: its position is drawn
    // at COMMIT, so it comes after the changes committed meanwhile, and the next read names it.
    const slow = await pool.connect();
    try {
      await slow.query('BEGIN');
      await setPrice(5, '555.55', slow);
      await setPrice(7, '777.77');
      await setPrice(9, null);
      const second = await changesSince(first.position);
      expectNamed(second.rows, [7, 9]);
      expect(second.rows.find((r) => r.key.startsWith(name(9)))?.json).toBeNull();
      expect(jsonOf(second.rows, 7)).toContain('"price":"777.77"');
      await slow.query('COMMIT');
      const third = await changesSince(second.position);
      expectNamed(third.rows, [5]);
      expect(jsonOf(third.rows, 5)).toContain('"price":"555.55"');
      expectNamed((await changesSince(third.position)).rows, []);
    } finally {
      slow.release();
    }
    // A rewrite that changes no served value (a repeated observation: its time and cycle only)
    // names nothing, nor does VACUUM.
    const quiet = await read.listingRows(MARKET);
    await pool.query(`UPDATE listings_current SET observed_at = now(), cycle_id = 'again' WHERE market = $1`, [MARKET]);
    await pool.query('VACUUM (FREEZE) listings_current');
    expectNamed((await changesSince(quiet.position)).rows, []);

    // A score written (the deriver's merge) is read on its own (api_liquidity_v1), not as the
    // listing row: the listing rows' read does not name it.
    const before = await read.listingRows(MARKET);
    await pool.query(
      `INSERT INTO item_liquidity_score (market_hash_name, phase, score, as_of) VALUES ($1, '', 42.5, now())`,
      [name(11)],
    );
    expectNamed((await changesSince(before.position)).rows, []);
    const liquid = await scoresSince(before.position);
    expectNamed(liquid.changes, [11]);
    expect(liquid.changes[0]?.fields).toEqual({ liquidity: '42.50' });
    // The same key as the list's rows: the field lands on the row a full read shows with it.
    const full = await read.listingRows(MARKET);
    expect(jsonOf(full.rows, 11)).toContain('"liquidity":"42.50"');
    expect(full.rows.some((r) => r.key === liquid.changes[0]?.key)).toBe(true);
    expectNamed((await scoresSince(liquid.position)).changes, []);
    // The score's inputs moving does not (migration 0013): only the score is shown.
    await pool.query(
      `INSERT INTO item_liquidity (market_hash_name, phase, listings, best_bid, score, as_of) VALUES ($1, '', 3, 12.5, 42.5, now())`,
      [name(11)],
    );
    await pool.query(`UPDATE item_liquidity SET listings = 4, best_bid = 13 WHERE market_hash_name = $1`, [name(11)]);
    expectNamed((await scoresSince(liquid.position)).changes, []);
    // A score that goes (its item no longer listed anywhere) is named, as null.
    await pool.query(`DELETE FROM item_liquidity_score WHERE market_hash_name = $1`, [name(11)]);
    const gone = await scoresSince(liquid.position);
    expect(gone.changes).toEqual([{ key: liquid.changes[0]?.key, fields: { liquidity: null } }]);
  });

  it('names the rows a batch wrote under a savepoint it released, and none of one it rolled back', async () => {
    // The ingest path writes its rows under a savepoint (poison.ts) and rolls one back to isolate
    // a record PostgreSQL refuses: only what commits is named.
    const first = await read.listingRows(MARKET);
    const batch = await pool.connect();
    try {
      await batch.query('BEGIN');
      await batch.query('SAVEPOINT poison_isolation');
      await setPrice(21, '21.21', batch);
      await batch.query('RELEASE SAVEPOINT poison_isolation');
      await batch.query('SAVEPOINT poison_isolation');
      await setPrice(22, '22.22', batch);
      await batch.query('ROLLBACK TO SAVEPOINT poison_isolation');
      await setPrice(23, '23.23');
      const second = await changesSince(first.position);
      expectNamed(second.rows, [23]);
      await batch.query('COMMIT');
      const third = await changesSince(second.position);
      expectNamed(third.rows, [21]);
      expect(jsonOf(third.rows, 21)).toContain('"price":"21.21"');
    } finally {
      batch.release();
    }
  });

  it('tells the caches which tags moved, and a reader whose position the journal no longer holds to read whole', async () => {
    const start = await read.changedTags();
    expect(start.tags).toBeUndefined();
    await setPrice(31, '31.31');
    await pool.query(`SELECT note_read_changes(ARRAY['buyorder:${MARKET}'])`);
    const moved = await read.changedTags(start.position);
    expect(moved.tags?.sort()).toEqual([`buyorder:${MARKET}`, `listing:${MARKET}`]);
    expect((await read.changedTags(moved.position)).tags).toEqual([]);
    // Retention pruned past the position: whole reads, for the lists and for the caches.
    await pool.query(
      `WITH gone AS (DELETE FROM read_changes RETURNING pos)
       UPDATE read_change_state SET pruned_through = (SELECT max(pos) FROM gone)`,
    );
    await setPrice(32, '32.32');
    expect(await read.listingChanges(MARKET, start.position, () => true)).toBeUndefined();
    // Scores: every score instead, which the lists take as field changes (dropping the unchanged).
    const { rows: scored } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM item_liquidity_score');
    expect((await read.liquidityScores(start.position)).changes).toHaveLength(scored[0]?.n as number);
    expect((await read.changedTags(start.position)).tags).toBeUndefined();
    expectNamed((await changesSince(moved.position)).rows, [32]);
    // Another journal (a replay's new schema): the same.
    const other = moved.position.replace(/^[^:]*/, 'another');
    expect(await read.listingChanges(MARKET, other, () => true)).toBeUndefined();
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
    // the database orders them, read in the same transaction: still a patch.
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

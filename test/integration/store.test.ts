/**
 * The migration runner and COPY helper against the real PostgreSQL, each test in its own schema.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { copyRows, migrate, type CopyValue } from '@skinprices/store';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TestStack } from '../support/stack.js';

const MIGRATIONS: Record<string, string> = {
  '0001_items.sql': `CREATE TABLE items (
      market text NOT NULL,
      market_hash_name text NOT NULL,
      phase text NOT NULL DEFAULT '',
      price numeric(20, 2) CHECK (price > 0),
      count integer NOT NULL,
      observed_at timestamptz NOT NULL,
      note text,
      PRIMARY KEY (market, market_hash_name, phase)
    );`,
  '0002_items_index.sql': 'CREATE INDEX items_by_name ON items (market_hash_name);',
};

describe('migrations', () => {
  const stack = new TestStack();
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'migrations-'));
    for (const [file, sql] of Object.entries(MIGRATIONS)) await writeFile(join(dir, file), sql);
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));
  afterAll(() => stack.cleanup());

  it('applies each migration once; a second run is a no-op', async () => {
    const { pool } = await stack.schema();
    const first = await migrate(pool, dir);
    expect(first.applied.map((m) => m.version)).toEqual([1, 2]);
    const second = await migrate(pool, dir);
    expect(second).toEqual({ applied: [], alreadyApplied: 2 });
    const { rows } = await pool.query('SELECT version, name FROM schema_migrations ORDER BY version');
    expect(rows).toEqual([
      { version: 1, name: 'items' },
      { version: 2, name: 'items_index' },
    ]);
  });

  it('applies once when several services migrate at the same moment', async () => {
    const { pool } = await stack.schema();
    const results = await Promise.all([migrate(pool, dir), migrate(pool, dir), migrate(pool, dir)]);
    expect(results.map((r) => r.applied.length).sort()).toEqual([0, 0, 2]);
  });

  it('rolls back a failing migration whole and reports it', async () => {
    const { pool } = await stack.schema();
    await writeFile(join(dir, '0003_broken.sql'), 'CREATE TABLE half (id int); SELECT no_such_function();');
    await expect(migrate(pool, dir)).rejects.toMatchObject({ code: 'migration_failed' });
    const { rows } = await pool.query(
      "SELECT to_regclass('half') AS t, (SELECT max(version) FROM schema_migrations) AS v",
    );
    expect(rows[0]).toEqual({ t: null, v: 2 });
  });

  it('refuses a migration that was edited after it was applied', async () => {
    const { pool } = await stack.schema();
    await migrate(pool, dir);
    await writeFile(join(dir, '0002_items_index.sql'), 'CREATE INDEX items_by_count ON items (count);');
    await expect(migrate(pool, dir)).rejects.toMatchObject({ code: 'migration_checksum_mismatch', retryable: false });
  });
});

describe('COPY', () => {
  const stack = new TestStack();
  afterAll(() => stack.cleanup());

  async function itemsTable(): Promise<Awaited<ReturnType<TestStack['schema']>>['pool']> {
    const { pool } = await stack.schema();
    await pool.query(`CREATE TABLE items (
      market text NOT NULL, market_hash_name text NOT NULL, phase text NOT NULL DEFAULT '',
      price numeric(20, 2) CHECK (price > 0), count integer NOT NULL, observed_at timestamptz NOT NULL, note text,
      PRIMARY KEY (market, market_hash_name, phase))`);
    return pool;
  }
  const COLUMNS = ['market', 'market_hash_name', 'phase', 'price', 'count', 'observed_at', 'note'];

  it('writes rows that read back equal, including characters COPY must escape', async () => {
    const pool = await itemsTable();
    const at = new Date(Date.UTC(2026, 10, 22, 4, 5, 6, 7));
    const rows: CopyValue[][] = [
      ['cn-a', 'StatTrak™ ★ Karambit | Doppler (Factory New)', 'Black Pearl', '987654321012345678.99', 2, at, null],
      ['eu-a', 'tab\there', '', '0.01', 0, at, 'back\\slash \\N not null'],
      ['eu-b', 'line\nbreak\r\nand crlf', '', null, 1, at, '\\t literal'],
      ['usd-1', 'Sticker | 中文 | Ünïcödé', '', '12.50', 7, at, ''],
    ];
    const client = await pool.connect();
    try {
      expect(await copyRows(client, 'items', COLUMNS, rows)).toBe(rows.length);
    } finally {
      client.release();
    }
    const { rows: back } = await pool.query(`SELECT ${COLUMNS.join(', ')} FROM items ORDER BY market`);
    expect(back.map((r) => COLUMNS.map((c) => r[c]))).toEqual(rows);
  });

  it('streams a large batch from a generator', async () => {
    const pool = await itemsTable();
    const at = new Date();
    function* gen(): Generator<CopyValue[]> {
      for (let i = 0; i < 50_000; i++) yield ['cn-b', `item ${i}`, '', `${i}.25`, i % 50, at, null];
    }
    const client = await pool.connect();
    try {
      expect(await copyRows(client, 'items', COLUMNS, gen())).toBe(50_000);
    } finally {
      client.release();
    }
    const { rows } = await pool.query('SELECT count(*)::int AS n, sum(price)::text AS total FROM items');
    // sum of (i + 0.25) for i in 0..49999 = 49999 * 50000 / 2 + 0.25 * 50000, exactly
    expect(rows[0]).toEqual({ n: 50_000, total: '1249987500.00' });
  });

  it('loses nothing and writes nothing half when one row is refused inside a transaction', async () => {
    const pool = await itemsTable();
    const at = new Date();
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await copyRows(client, 'items', COLUMNS, [['cn-a', 'ok', '', '5.00', 1, at, null]]);
      await expect(
        copyRows(client, 'items', COLUMNS, [
          ['cn-a', 'fine', '', '5.00', 1, at, null],
          ['cn-a', 'zero price', '', '0', 1, at, null],
        ]),
      ).rejects.toMatchObject({ code: 'copy_failed', retryable: false });
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    const { rows } = await pool.query('SELECT count(*)::int AS n FROM items');
    expect(rows[0]).toEqual({ n: 0 });
  });
});

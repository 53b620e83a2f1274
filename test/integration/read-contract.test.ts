/**
 * The read contract (packages/store read-contract.ts) against the views a freshly migrated read
 * model really has: every view, column and type the API's typed queries rely on exists as
 * described, and nothing beyond it is published. A renamed column is caught (the check can fail).
 */
import { API_MIGRATIONS_DIR, KEYS_CONTRACT } from '@skinprices/api';
import { MIGRATIONS_DIR } from '@skinprices/materializer';
import { contractDrift, contractTypeName, migrate, type Pool, type ViewColumns } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from '../support/stack.js';

/** The api_* views (or tables) of `schema` with their columns, as PostgreSQL reports them. */
async function publishedViews(pool: Pool, schema: string, kind: 'v' | 'r' = 'v'): Promise<Record<string, ViewColumns>> {
  const { rows } = await pool.query<{ view: string; column: string; type: string }>(
    `SELECT c.relname AS view, a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type
     FROM pg_class c
     JOIN pg_namespace n ON n.oid = c.relnamespace
     JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
     WHERE n.nspname = $1 AND c.relkind = $2 AND c.relname LIKE 'api\\_%'
     ORDER BY c.relname, a.attnum`,
    [schema, kind],
  );
  const views: Record<string, ViewColumns> = {};
  for (const r of rows) (views[r.view] ??= {})[r.column] = contractTypeName(r.type);
  return views;
}

describe('the read contract', () => {
  const stack = new TestStack();
  let pool: Pool;
  let schema: string;

  beforeAll(async () => {
    ({ pool, name: schema } = await stack.schema());
    await migrate(pool, MIGRATIONS_DIR);
  });
  afterAll(() => stack.cleanup());

  it('describes exactly the views the materializer publishes, column by column and type by type', async () => {
    const views = await publishedViews(pool, schema);
    expect(Object.keys(views).length).toBeGreaterThanOrEqual(17);
    expect(contractDrift(views)).toEqual([]);
  });

  it("describes the API's own key table as its migrations create it", async () => {
    const keys = await stack.schema();
    await migrate(keys.pool, API_MIGRATIONS_DIR);
    expect(contractDrift(await publishedViews(keys.pool, keys.name, 'r'), KEYS_CONTRACT)).toEqual([]);
  });

  it('catches a renamed or retyped column and an unpublished view', async () => {
    await pool.query('ALTER VIEW api_listings_v1 RENAME COLUMN price TO price_cny');
    await pool.query('CREATE VIEW api_extra_v1 AS SELECT 1::integer AS one');
    await pool.query(
      'DROP VIEW api_clock_v1; CREATE VIEW api_clock_v1 AS SELECT now::text AS now FROM read_model_clock',
    );
    expect(contractDrift(await publishedViews(pool, schema))).toEqual([
      'view api_extra_v1 is not in the contract',
      'api_listings_v1.price is missing',
      'api_listings_v1.price_cny is not in the contract',
      'api_clock_v1.now is text, the contract says timestamptz',
    ]);
  });
});

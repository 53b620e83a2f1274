/**
 * The read contract (packages/store read-contract.ts) against the views a freshly migrated read
 * model really has: every view, column and type the API's typed queries rely on exists as
 * described, and nothing beyond it is published. A renamed column is caught (the check can fail).
 */
import { API_MIGRATIONS_DIR, KEYS_CONTRACT } from '@skinprices/api';
import { MIGRATIONS_DIR } from '@skinprices/materializer';
import {
  contractDrift,
  migrate,
  publishedRelations as publishedViews,
  READ_CONTRACT_V1,
  waitForContract,
  type Pool,
} from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from '../support/stack.js';

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

  // What the API waits for at start, as it does not migrate (it may run on a hot standby).
  it('is waited for: at once on a migrated schema, naming what is missing on one that is not', async () => {
    await waitForContract({ pool, schema, contract: READ_CONTRACT_V1, timeoutMs: 1_000 });
    const empty = await stack.schema();
    const told: string[][] = [];
    await expect(
      waitForContract({
        pool: empty.pool,
        schema: empty.name,
        contract: READ_CONTRACT_V1,
        timeoutMs: 600,
        pollMs: 100,
        onWait: (needs) => told.push(needs),
      }),
    ).rejects.toThrow(/api_listings_v1 is missing/);
    expect(told[0]).toContain('api_clock_v1 is missing');
    const keys = await stack.schema();
    const waiting = waitForContract({
      pool: keys.pool,
      schema: keys.name,
      contract: KEYS_CONTRACT,
      kind: 'r',
      pollMs: 50,
    });
    await migrate(keys.pool, API_MIGRATIONS_DIR);
    await waiting;
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

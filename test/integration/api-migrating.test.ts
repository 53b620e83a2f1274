/**
 * A read model being migrated answers 503, not 500 (found 2026-11-27: the platform benchmark's
 * cold start got `GET /v1/status: 500` while the materializer was migrating a fresh schema, and
 * crashed). A view replaced with other columns makes the API's query fail with an undefined
 * column: while the migrators' lock is held (a migration running) that is 503 with Retry-After,
 * asked with curl as a customer would; once no migration runs, the same failure is a defect and
 * stays a 500.
 */
import { API_MIGRATIONS_DIR, buildApp, KeyStore, MemoryRateLimiter, ReadModel } from '@skinprices/api';
import { MIGRATIONS_DIR } from '@skinprices/materializer';
import { createLogger } from '@skinprices/runtime';
import { migrate, type Pool, type PoolClient } from '@skinprices/store';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { curlGet } from '../support/clients.js';
import { TestStack } from '../support/stack.js';

/** packages/store/src/migrate.ts LOCK_ID: what a migration run holds. */
const MIGRATION_LOCK = 7_202_611;

describe('API while the read model is migrated', () => {
  const stack = new TestStack();
  let pool: Pool;
  let app: FastifyInstance;
  let base: string;
  let key: string;

  beforeAll(async () => {
    const read = await stack.schema();
    pool = read.pool;
    await migrate(pool, MIGRATIONS_DIR);
    const keysSchema = await stack.schema();
    await migrate(keysSchema.pool, API_MIGRATIONS_DIR);
    const keys = new KeyStore(keysSchema.pool);
    key = (await keys.create({ customer: 'ops@example.com', plan: 'enterprise' })).secret;
    app = buildApp({
      keys,
      limiter: new MemoryRateLimiter(),
      read: new ReadModel(pool),
      version: () => 0,
      logger: createLogger('api', 'silent'),
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await stack.cleanup();
  });

  it('a query that fails on a view being replaced is 503 during a migration and 500 after it', async () => {
    expect((await curlGet(`${base}/v1/status`, key)).status).toBe(200);
    // The view as a migration between two of its versions could leave it: a column gone.
    await pool.query('DROP VIEW api_clock_v1; CREATE VIEW api_clock_v1 AS SELECT now() AS then');
    const holder: PoolClient = await pool.connect();
    try {
      await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
      const during = await curlGet(`${base}/v1/status`, key);
      expect(during.exit).toBe(0);
      expect(during.status, during.body).toBe(503);
      expect(JSON.parse(during.body)).toEqual({
        error: { status: 503, code: 'not_available', message: 'the read model is being migrated; try again shortly' },
      });
    } finally {
      await holder.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
      holder.release();
    }
    // No migration runs: the same failure is a defect, not something to retry.
    const after = await curlGet(`${base}/v1/status`, key);
    expect(after.status, after.body).toBe(500);
    expect(JSON.parse(after.body).error.code).toBe('internal');
  });
});

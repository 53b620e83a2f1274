/**
 * Every read connection busy is an overload that passes: 503 with Retry-After, not a 500 (found
 * 2026-11-27: the platform benchmark's cold start got `GET /v1/status: 500`, and a list and the
 * store too, "timeout exceeded when trying to connect" in the API's log, while the first builds of
 * the lists held every read connection for 20-27 s each on a saturated machine). A pool of one
 * connection, that connection held elsewhere, asked with curl as a customer would; then released,
 * the same request is answered.
 */
import { MIGRATIONS_DIR } from '@skinprices/materializer';
import { createPool, migrate, type Pool } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi } from '../support/api.js';
import { curlGet } from '../support/clients.js';
import { stackEnv, TestStack } from '../support/stack.js';

describe('API with every read connection busy', () => {
  const stack = new TestStack();
  let pool: Pool;
  let base: string;
  let key: string;

  beforeAll(async () => {
    const read = await stack.schema();
    await migrate(read.pool, MIGRATIONS_DIR);
    // The API's own pool: one connection, a short wait for it (long enough to open it and run the
    // status's five queries one after another on a loaded machine).
    pool = createPool({ databaseUrl: stackEnv().databaseUrl, schema: read.name, max: 1, acquireTimeoutMs: 2_000 });
    stack.defer(() => pool.end());
    const api = await startApi(stack, pool, { plans: ['enterprise'], listen: true });
    base = api.origin as string;
    key = api.keys.enterprise;
  }, 60_000);
  afterAll(() => stack.cleanup());

  it('answers 503 with Retry-After while no connection frees up in time, and 200 once one does', async () => {
    expect((await curlGet(`${base}/v1/status`, key)).status).toBe(200);
    const held = await pool.connect();
    try {
      const busy = await curlGet(`${base}/v1/status`, key);
      expect(busy.exit).toBe(0);
      expect(busy.status, busy.body).toBe(503);
      expect(JSON.parse(busy.body)).toEqual({
        error: { status: 503, code: 'not_available', message: 'the service is busy; try again shortly' },
      });
      const res = await fetch(`${base}/v1/prices/cn-a`, { headers: { 'x-api-key': key } });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
      await res.arrayBuffer();
    } finally {
      held.release();
    }
    const after = await curlGet(`${base}/v1/status`, key);
    expect(after.status, after.body).toBe(200);
  });
});

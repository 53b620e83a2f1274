/** The materializer's configuration: the connection budget of its two lanes (materializer.ts). */
import { describe, expect, it } from 'vitest';
import { materializerConfigSchema } from './config.js';

describe('materializer config', () => {
  it('defaults fit the pool: three listings and two other batches beside six other connections', () => {
    const c = materializerConfigSchema.parse({});
    expect([c.CONSUME_LISTINGS_CONCURRENCY, c.CONSUME_CONCURRENCY, c.DB_POOL_SIZE]).toEqual([3, 2, 11]);
  });

  it.each([
    [{ DB_POOL_SIZE: '10' }, false],
    [{ DB_POOL_SIZE: '10', CONSUME_CONCURRENCY: '1' }, true],
    [{ DB_POOL_SIZE: '13', CONSUME_CONCURRENCY: '4' }, true],
    [{ DB_POOL_SIZE: '13', CONSUME_CONCURRENCY: '4', CONSUME_LISTINGS_CONCURRENCY: '4' }, false],
  ])('%j: accepted %s', (env, ok) => {
    const r = materializerConfigSchema.safeParse(env);
    expect(r.success).toBe(ok);
    if (!r.success) expect(r.error.issues[0]?.path).toEqual(['DB_POOL_SIZE']);
  });
});

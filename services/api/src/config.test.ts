import { describe, expect, it } from 'vitest';
import { apiConfigSchema } from './config.js';

describe('API config', () => {
  it('keeps a read connection free of whole reads: WHOLE_READS_AT_ONCE below DB_POOL_SIZE', () => {
    expect(apiConfigSchema.safeParse({}).success).toBe(true); // the defaults: 2 of 8
    expect(apiConfigSchema.safeParse({ DB_POOL_SIZE: '3', WHOLE_READS_AT_ONCE: '2' }).success).toBe(true);
    const refused = apiConfigSchema.safeParse({ DB_POOL_SIZE: '4', WHOLE_READS_AT_ONCE: '4' });
    expect(refused.success).toBe(false);
    expect(refused.error?.issues[0]?.message).toBe('WHOLE_READS_AT_ONCE must be below DB_POOL_SIZE');
  });
});

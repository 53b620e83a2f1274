import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { commonEnv, intFromEnv, parseConfig } from './config.js';

const schema = z.object({ ...commonEnv, PORT: intFromEnv(1, 65535).default(8080).describe('HTTP port') });

describe('parseConfig', () => {
  it('applies defaults', () => {
    const cfg = parseConfig(schema, {});
    expect(cfg).toMatchObject({ PORT: 8080, KAFKA_BROKERS: '127.0.0.1:9092', LOG_LEVEL: 'info' });
  });
  it('lists every problem at once, naming the variable', () => {
    expect(() => parseConfig(schema, { PORT: '70000', DATABASE_URL: 'mysql://x', LOG_LEVEL: 'loud' })).toThrow(
      /PORT[\s\S]*DATABASE_URL|DATABASE_URL[\s\S]*PORT/,
    );
    try {
      parseConfig(schema, { PORT: '70000', DATABASE_URL: 'mysql://x', LOG_LEVEL: 'loud' });
    } catch (err) {
      expect((err as { code: string }).code).toBe('config_invalid');
      expect((err as { details: { problems: string[] } }).details.problems).toHaveLength(3);
    }
  });
});

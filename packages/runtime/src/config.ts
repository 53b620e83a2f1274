/**
 * Config is parsed once, by a pure function called from main.ts, never at import time. Each
 * service declares a zod schema with a `.describe()` per variable; a bad value stops the
 * process at start with every problem listed, instead of failing later on first use.
 */
import { AppError } from '@skinprices/domain';
import { z } from 'zod';

export function parseConfig<S extends z.ZodType>(schema: S, env: Record<string, string | undefined>): z.infer<S> {
  const result = schema.safeParse(env);
  if (!result.success) {
    const problems = result.error.issues.map((i) => `${i.path.join('.') || '(env)'}: ${i.message}`);
    throw new AppError('config_invalid', `invalid configuration:\n  ${problems.join('\n  ')}`, {
      details: { problems },
    });
  }
  return result.data;
}

/** Variables every service shares. Spread into a service's own schema. */
export const commonEnv = {
  LOG_LEVEL: z
    .enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'])
    .default('info')
    .describe('pino log level'),
  KAFKA_BROKERS: z.string().min(1).default('127.0.0.1:9092').describe('comma-separated Kafka bootstrap servers'),
  SCHEMA_REGISTRY_URL: z
    .url()
    .default('http://127.0.0.1:8081/apis/ccompat/v7')
    .describe('Confluent-compatible schema registry API (Apicurio: …/apis/ccompat/v7)'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .default('postgres://postgres@127.0.0.1:5442/skinprices')
    .describe('PostgreSQL connection URL of the read model'),
};

/** Integer from an env string, with bounds. */
export const intFromEnv = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

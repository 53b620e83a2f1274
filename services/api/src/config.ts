import { commonEnv, intFromEnv } from '@skinprices/runtime';
import { z } from 'zod';

const schemaName = z.string().regex(/^[a-z_][a-z0-9_]{0,62}$/);

export const apiConfigSchema = z.object({
  ...commonEnv,
  API_HOST: z.string().default('127.0.0.1').describe('interface to listen on'),
  API_PORT: intFromEnv(0, 65_535).default(8080).describe('HTTP port'),
  DATABASE_SCHEMA: schemaName.default('readmodel').describe("the materializer's read-model schema"),
  KEYS_SCHEMA: schemaName.default('api').describe('schema of the API keys (never replayed or swapped)'),
  REDIS_URL: z
    .string()
    .url()
    .optional()
    .describe('shared rate limits across API processes (e.g. redis://127.0.0.1:6379); unset: in memory'),
  STALE_AFTER_S: intFromEnv(60, 86_400)
    .default(900)
    .describe('/v1/status flags a marketplace stale when its last complete cycle is older'),
  DB_POOL_SIZE: intFromEnv(1, 100).default(8).describe('PostgreSQL connections for reads'),
  AUTH_FAILURES_PER_MINUTE: intFromEnv(1, 1_000_000)
    .default(60)
    .describe('failed authentications a client address may have per minute before its requests get 429'),
  METRICS_HOST: z.string().default('127.0.0.1').describe('where /metrics listens (never the public port)'),
  METRICS_PORT: intFromEnv(0, 65_535).optional().describe('Prometheus /metrics port; unset: no endpoint'),
});
export type ApiConfig = z.infer<typeof apiConfigSchema>;

export const MIGRATIONS_DIR = new URL('../migrations/', import.meta.url).pathname;

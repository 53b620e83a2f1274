import { commonEnv, intFromEnv } from '@skinprices/runtime';
import { z } from 'zod';

const schemaName = z.string().regex(/^[a-z_][a-z0-9_]{0,62}$/, 'must be a plain lower-case SQL identifier');

export const notifierConfigSchema = z
  .object({
    ...commonEnv,
    WEBHOOKS_SCHEMA: schemaName
      .default('webhooks')
      .describe('schema of the webhook subscriptions and their deliveries (migrated by the notifier at start)'),
    KEYS_SCHEMA: schemaName
      .default('api')
      .describe("schema of the API keys (the API's): a subscription's key must be enabled, unexpired and pro+"),
    TOPIC_SUFFIX: z.string().default('').describe('appended to every topic name (tests use their own topics)'),
    GROUP_ID: z
      .string()
      .min(1)
      .default('notifier')
      .describe('Kafka consumer group on price-changes.v1 and key of the offsets stored in PostgreSQL'),
    WEBHOOK_SECRET_KEYS: z
      .string()
      .min(1)
      .describe(
        "key ring sealing the signing secrets at rest, 'k1:<base64 32 bytes>,k0:<…>' (the API's, the same value); required",
      ),
    WEBHOOK_ALLOW_PRIVATE_URLS: z
      .enum(['true', 'false'])
      .default('false')
      .transform((v) => v === 'true')
      .describe('deliver to loopback, private and link-local addresses too (local development and tests only)'),
    DELIVERY_TIMEOUT_MS: intFromEnv(100, 120_000)
      .default(10_000)
      .describe('the most one delivery may take, connection to the end of the response (read up to 4 KiB)'),
    MAX_IN_FLIGHT: intFromEnv(1, 10_000).default(64).describe('deliveries this process makes at once, in total'),
    PER_SUBSCRIPTION_IN_FLIGHT: intFromEnv(1, 100)
      .default(4)
      .describe(
        'deliveries to one subscription at once (over every notifier): a slow receiver holds at most this many',
      ),
    POLL_MS: intFromEnv(10, 60_000)
      .default(250)
      .describe(
        'how often due deliveries and batches are looked for without a wake-up (a commit or NOTIFY wakes at once)',
      ),
    SUBSCRIPTIONS_REFRESH_MS: intFromEnv(100, 600_000)
      .default(5_000)
      .describe('how often the subscriptions are reloaded without a NOTIFY (keys expire without one)'),
    CONSUMER_SESSION_TIMEOUT_MS: intFromEnv(6_000, 300_000)
      .default(30_000)
      .describe('how long Kafka waits for a silent (crashed) notifier before reassigning its partitions'),
    DELIVERY_LOG_RETENTION_DAYS: intFromEnv(1, 3_650)
      .default(30)
      .describe('finished deliveries (succeeded, failed) older than this leave the delivery log'),
    DB_POOL_SIZE: intFromEnv(4, 200)
      .default(12)
      .describe('PostgreSQL connections: consumer batches, the dispatcher (one per recorded outcome), sealer, LISTEN'),
    METRICS_HOST: z.string().default('127.0.0.1').describe('where /metrics listens'),
    METRICS_PORT: intFromEnv(0, 65_535).optional().describe('Prometheus /metrics port; unset: no endpoint'),
  })
  .refine((c) => c.PER_SUBSCRIPTION_IN_FLIGHT <= c.MAX_IN_FLIGHT, {
    message: 'PER_SUBSCRIPTION_IN_FLIGHT must not exceed MAX_IN_FLIGHT',
    path: ['PER_SUBSCRIPTION_IN_FLIGHT'],
  });
export type NotifierConfig = z.infer<typeof notifierConfigSchema>;

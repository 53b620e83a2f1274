import { commonEnv, intFromEnv } from '@skinprices/runtime';
import { z } from 'zod';

export const materializerConfigSchema = z
  .object({
    ...commonEnv,
    DATABASE_SCHEMA: z
      .string()
      .regex(/^[a-z_][a-z0-9_]{0,62}$/)
      .default('readmodel')
      .describe('schema holding the read model (tests use their own; `make replay` rebuilds it beside and swaps)'),
    GROUP_ID: z.string().min(1).default('materializer').describe('Kafka consumer group and key of stored offsets'),
    TOPIC_SUFFIX: z.string().default('').describe('appended to every topic name (tests use their own topics)'),
    PUBLISH_CHANGES: z
      .enum(['true', 'false'])
      .default('true')
      .transform((v) => v === 'true')
      .describe('publish committed changes to price-changes.v1 / prices.current.v1'),
    OUTBOX_INTERVAL_MS: intFromEnv(10, 60_000).default(200).describe('outbox polling interval'),
    OUTBOX_BATCH: intFromEnv(1, 100_000).default(5_000).describe('changes published per outbox transaction'),
    CHANGE_LOG_RETENTION_HOURS: intFromEnv(1, 24 * 365)
      .default(168)
      .describe('how far back the HTTP change feed reaches (price_change_log retention)'),
    CONSUMER_SESSION_TIMEOUT_MS: intFromEnv(6_000, 300_000)
      .default(30_000)
      .describe('how long Kafka waits for a silent (crashed) materializer before reassigning its partitions'),
    HOURLY_RETENTION_DAYS: intFromEnv(2, 3_650)
      .default(100)
      .describe('days of hourly history kept; older day partitions are dropped (daily closes are kept forever)'),
    REPLAY_SWAP: z
      .enum(['true', 'false'])
      .default('true')
      .transform((v) => v === 'true')
      .describe('replay only: swap the rebuilt schema in (false: leave it as <schema>_rebuild to compare)'),
    EXPORT_CHECK_INTERVAL_MS: intFromEnv(1_000, 3_600_000)
      .default(60_000)
      .describe(
        'how often to check whether the data covers a new day (daily sales export) or the rolling export aged past an hour',
      ),
    CONSUME_CONCURRENCY: intFromEnv(1, 32)
      .default(2)
      .describe(
        "the other kinds' partitions applied at once (buy orders, sales, history …), each in its own transaction (DB_POOL_SIZE must exceed it and CONSUME_LISTINGS_CONCURRENCY together by 6)",
      ),
    CONSUME_LISTINGS_CONCURRENCY: intFromEnv(1, 32)
      .default(3)
      .describe(
        'listings and poll-cycle partitions applied at once, on a consumer of their own (the listings lane: a price never waits for a fetch round of the other kinds)',
      ),
    // At most 16 MiB: kafkajs heartbeats between batches only, so one batch's transaction must end
    // well within CONSUMER_SESSION_TIMEOUT_MS (1 MiB, ~2,400 listings, took 0.2-0.6 s here).
    CONSUME_MAX_BATCH_BYTES: intFromEnv(65_536, 16 * 1024 * 1024)
      .default(1_048_576)
      .describe(
        'the most one fetch takes of a partition that is behind, so the largest batch applied in one transaction (kafkajs maxBytesPerPartition; every consumed topic); a partition that is not behind is applied as its records come; larger batches made a cold start slower',
      ),
    SERVED_MAX_ROWS: intFromEnv(0, 100_000_000)
      .default(2_000_000)
      .describe(
        'listings rows held in memory to drop repeated records before SQL (~164 bytes of heap a row; 0: none held, every record written); past it rows are read from PostgreSQL by key',
      ),
    LISTINGS_FIRST_ABOVE: intFromEnv(0, 10_000_000)
      .default(0)
      .describe(
        'listings first (priority.ts): records behind in a listings partition (or its records waiting > 1 s) that pause the other data topics until the listings catch up, at most 15 s at a time; e.g. 2000. 0: never paused (no benchmark has shown pausing to help)',
      ),
    DB_POOL_SIZE: intFromEnv(1, 100)
      .default(11)
      .describe('PostgreSQL connections: ingest batches, the derive path, the schema lock, heartbeat, outbox, export'),
    HEARTBEAT_INTERVAL_MS: intFromEnv(1_000, 60_000)
      .default(5_000)
      .describe('how often this process writes its materializer_heartbeat row (state, lag) for /v1/status'),
    METRICS_HOST: z.string().default('127.0.0.1').describe('where /metrics listens'),
    METRICS_PORT: intFromEnv(0, 65535).optional().describe('Prometheus /metrics port; unset: no endpoint'),
  })
  .refine((c) => c.CONSUME_CONCURRENCY + c.CONSUME_LISTINGS_CONCURRENCY + 6 <= c.DB_POOL_SIZE, {
    // Beside the batches: the schema lock, the derive path, the heartbeat, the outbox publisher and
    // the export scheduler each hold or take one, and one is spare; a batch waiting for a
    // connection holds up its partition, and the others would wait out DB_ACQUIRE_TIMEOUT_MS.
    message: 'DB_POOL_SIZE must be at least CONSUME_CONCURRENCY + CONSUME_LISTINGS_CONCURRENCY + 6',
    path: ['DB_POOL_SIZE'],
  });
export type MaterializerConfig = z.infer<typeof materializerConfigSchema>;

/** Where this service's SQL migrations live. */
export const MIGRATIONS_DIR = new URL('../migrations/', import.meta.url).pathname;

/** Wires the materializer: config → pool, Kafka, serde → Materializer + OutboxPublisher. */
import { AppError } from '@skinprices/domain';
import { DailyExportScheduler, SalesExportCache } from '@skinprices/exports';
import { createKafka, EventProducer, EventSerde, kafkajsPatches } from '@skinprices/events';
import { createLogger, parseConfig, ShutdownManager } from '@skinprices/runtime';
import { createPool, ensureDatabase, ensureSchema } from '@skinprices/store';
import { materializerConfigSchema, MIGRATIONS_DIR } from './config.js';
import { Materializer } from './materializer.js';
import { MaterializerMetrics } from './metrics.js';
import { OutboxPublisher } from './outbox.js';
import { DEFAULT_PRIORITY } from './priority.js';

const config = parseConfig(materializerConfigSchema, process.env);
const logger = createLogger('materializer', config.LOG_LEVEL);
const shutdown = new ShutdownManager(logger);

await ensureDatabase(config.DATABASE_URL);
const pool = createPool({
  databaseUrl: config.DATABASE_URL,
  schema: config.DATABASE_SCHEMA,
  max: config.DB_POOL_SIZE,
  applicationName: 'materializer',
});
shutdown.register('pg-pool', () => pool.end());
await ensureSchema(pool, config.DATABASE_SCHEMA);
// Nothing in the platform vacuums the read model: its tables are updated in place all day.
const { rows: vacuum } = await pool.query<{ autovacuum: string }>('SHOW autovacuum');
if (vacuum[0]?.autovacuum !== 'on')
  logger.warn('autovacuum is off on this server: dead rows will slow every batch; turn it on (docs/operations.md)');
const kafka = createKafka({ brokers: config.KAFKA_BROKERS, clientId: 'materializer' });
const serde = new EventSerde({ registryUrl: config.SCHEMA_REGISTRY_URL });
const metrics = new MaterializerMetrics();
if (config.METRICS_PORT !== undefined) {
  const server = await metrics.serve(config.METRICS_HOST, config.METRICS_PORT);
  shutdown.register('metrics', () => server.close());
  logger.info({ url: server.url }, 'metrics served');
}

const materializer = new Materializer(
  {
    groupId: config.GROUP_ID,
    topicSuffix: config.TOPIC_SUFFIX,
    migrationsDir: MIGRATIONS_DIR,
    sessionTimeoutMs: config.CONSUMER_SESSION_TIMEOUT_MS,
    hourlyRetentionDays: config.HOURLY_RETENTION_DAYS,
    concurrency: config.CONSUME_CONCURRENCY,
    listingsConcurrency: config.CONSUME_LISTINGS_CONCURRENCY,
    maxBatchBytes: config.CONSUME_MAX_BATCH_BYTES,
    heartbeatIntervalMs: config.HEARTBEAT_INTERVAL_MS,
    servedMaxRows: config.SERVED_MAX_ROWS,
    ...(config.LISTINGS_FIRST_ABOVE > 0
      ? {
          listingsFirst: {
            ...DEFAULT_PRIORITY,
            pauseAbove: config.LISTINGS_FIRST_ABOVE,
            resumeBelow: Math.min(DEFAULT_PRIORITY.resumeBelow, config.LISTINGS_FIRST_ABOVE),
          },
        }
      : {}),
  },
  { kafka, serde, pool, logger, metrics },
);
// Stored offsets that do not count this cluster's records stop the process (offsets.ts): exit 78
// (EX_CONFIG) says an operator must act (`make replay` or `make reset-offsets`), not a restart.
const EXIT_OFFSETS_MISMATCH = 78;
materializer.onFatal((err) => {
  logger.fatal({ err, details: err.details }, 'materializer stopped');
  void shutdown.shutdown().finally(() => process.exit(EXIT_OFFSETS_MISMATCH));
});
try {
  await materializer.start();
} catch (err) {
  logger.fatal({ err }, 'materializer did not start');
  await shutdown.shutdown().catch(() => undefined);
  process.exit(err instanceof AppError && err.code === 'offsets_mismatch' ? EXIT_OFFSETS_MISMATCH : 1);
}
shutdown.register('materializer', () => materializer.stop());

if (config.PUBLISH_CHANGES) {
  const producer = new EventProducer(kafka);
  await producer.connect();
  shutdown.register('kafka-producer', () => producer.disconnect());
  const outbox = new OutboxPublisher(
    {
      topicSuffix: config.TOPIC_SUFFIX,
      intervalMs: config.OUTBOX_INTERVAL_MS,
      batchSize: config.OUTBOX_BATCH,
      logRetentionMs: config.CHANGE_LOG_RETENTION_HOURS * 3_600_000,
    },
    { pool, producer, serde, logger, metrics },
  );
  outbox.start();
  shutdown.register('outbox', () => outbox.stop());
}
// The sales exports: the daily one, and the rolling last 24 hours the API serves (at most an hour
// old, checked every EXPORT_CHECK_INTERVAL_MS). The API only reads what this stores.
const exports = new DailyExportScheduler(new SalesExportCache(pool), {
  intervalMs: config.EXPORT_CHECK_INTERVAL_MS,
  onError: (err) => logger.warn({ err }, 'sales export failed; retrying on the next check'),
});
exports.start();
shutdown.register('daily-export', () => exports.stop());
shutdown.listen();
// kafkajs: whether its produce path is ours (packages/events/src/kafkajs.ts); 'patched' expected.
logger.info(
  { group: config.GROUP_ID, schema: config.DATABASE_SCHEMA, kafkajs: kafkajsPatches },
  'materializer started',
);

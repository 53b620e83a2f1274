/** Wires the notifier: config → pool (webhooks schema migrated), Kafka, serde → Notifier. */
import { createKafka, EventSerde, kafkajsPatches } from '@skinprices/events';
import { createLogger, parseConfig, ShutdownManager } from '@skinprices/runtime';
import { createPool, ensureDatabase, ensureSchema, migrate } from '@skinprices/store';
import { WEBHOOKS_MIGRATIONS_DIR } from '@skinprices/webhooks';
import { notifierConfigSchema } from './config.js';
import { NotifierMetrics } from './metrics.js';
import { Notifier } from './notifier.js';

const config = parseConfig(notifierConfigSchema, process.env);
const logger = createLogger('notifier', config.LOG_LEVEL);
// Beyond the deliveries' own timeout: the consumer's batch and the leases given back.
const shutdown = new ShutdownManager(logger, config.DELIVERY_TIMEOUT_MS + 20_000);

await ensureDatabase(config.DATABASE_URL);
const pool = createPool({
  databaseUrl: config.DATABASE_URL,
  schema: config.WEBHOOKS_SCHEMA,
  max: config.DB_POOL_SIZE,
  applicationName: 'notifier',
});
shutdown.register('pg-pool', () => pool.end());
await ensureSchema(pool, config.WEBHOOKS_SCHEMA);
const migrated = await migrate(pool, WEBHOOKS_MIGRATIONS_DIR);
if (migrated.applied.length > 0)
  logger.info({ applied: migrated.applied.map((m) => m.version) }, 'webhooks migrations applied');

const kafka = createKafka({ brokers: config.KAFKA_BROKERS, clientId: 'notifier' });
const serde = new EventSerde({ registryUrl: config.SCHEMA_REGISTRY_URL });
const metrics = new NotifierMetrics();
if (config.METRICS_PORT !== undefined) {
  const server = await metrics.serve(config.METRICS_HOST, config.METRICS_PORT);
  shutdown.register('metrics', () => server.close());
  logger.info({ url: server.url }, 'metrics served');
}

const notifier = new Notifier(
  {
    groupId: config.GROUP_ID,
    topicSuffix: config.TOPIC_SUFFIX,
    webhooksSchema: config.WEBHOOKS_SCHEMA,
    keysSchema: config.KEYS_SCHEMA,
    secretKeys: config.WEBHOOK_SECRET_KEYS,
    allowPrivateUrls: config.WEBHOOK_ALLOW_PRIVATE_URLS,
    deliveryTimeoutMs: config.DELIVERY_TIMEOUT_MS,
    maxInFlight: config.MAX_IN_FLIGHT,
    perSubscriptionInFlight: config.PER_SUBSCRIPTION_IN_FLIGHT,
    pollMs: config.POLL_MS,
    subscriptionsRefreshMs: config.SUBSCRIPTIONS_REFRESH_MS,
    sessionTimeoutMs: config.CONSUMER_SESSION_TIMEOUT_MS,
    logRetentionMs: config.DELIVERY_LOG_RETENTION_DAYS * 86_400_000,
  },
  { pool, kafka, serde, logger, metrics },
);
try {
  await notifier.start();
} catch (err) {
  logger.fatal({ err }, 'notifier did not start');
  await shutdown.shutdown().catch(() => undefined);
  process.exit(1);
}
shutdown.register('notifier', () => notifier.stop());
shutdown.listen();
logger.info(
  {
    group: config.GROUP_ID,
    schema: config.WEBHOOKS_SCHEMA,
    allowPrivateUrls: config.WEBHOOK_ALLOW_PRIVATE_URLS,
    kafkajs: kafkajsPatches,
  },
  'notifier started',
);

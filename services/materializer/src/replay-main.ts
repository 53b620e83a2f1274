/** `make replay`: wires config → Kafka, serde → replay(); prints the table checksums. */
import { createKafka, EventSerde } from '@skinprices/events';
import { createLogger, parseConfig } from '@skinprices/runtime';
import { ensureDatabase } from '@skinprices/store';
import { materializerConfigSchema, MIGRATIONS_DIR } from './config.js';
import { replay } from './replay.js';

const config = parseConfig(materializerConfigSchema, process.env);
const logger = createLogger('replay', config.LOG_LEVEL);
await ensureDatabase(config.DATABASE_URL);
const result = await replay(
  {
    databaseUrl: config.DATABASE_URL,
    schema: config.DATABASE_SCHEMA,
    groupId: config.GROUP_ID,
    topicSuffix: config.TOPIC_SUFFIX,
    migrationsDir: MIGRATIONS_DIR,
    hourlyRetentionDays: config.HOURLY_RETENTION_DAYS,
    swap: config.REPLAY_SWAP,
  },
  {
    kafka: createKafka({ brokers: config.KAFKA_BROKERS, clientId: 'replay' }),
    serde: new EventSerde({ registryUrl: config.SCHEMA_REGISTRY_URL }),
    logger,
  },
  (state) => logger.info({ state }, 'replay'),
);
logger.info({ schema: result.schema, events: result.events, seconds: result.ms / 1000 }, 'replay done');
for (const [table, c] of Object.entries(result.checksums))
  process.stdout.write(`${table.padEnd(26)} ${String(c.rows).padStart(10)}  ${c.md5}\n`);

/**
 * `make reset-offsets`: forgets where the materializer's consumer group was (offsets.ts,
 * resetStoredOffsets), for when its stored offsets count records of another Kafka cluster or of
 * a topic that was recreated and the materializer refuses to start (`offsets_mismatch`).
 *
 *   make reset-offsets               shows each stored offset and what is wrong with it; changes nothing
 *   make reset-offsets ARGS=--yes    deletes them (materializer stopped), and the group in Kafka
 *
 * The read model's rows stay and every partition is read again from the start of its log. After
 * `make clean` (a new, empty cluster) `make replay` is the better reset: it rebuilds the read
 * model from what the new cluster holds, where this keeps rows the new cluster never saw.
 */
import { createKafka } from '@skinprices/events';
import { createLogger, parseConfig } from '@skinprices/runtime';
import { createPool, ensureDatabase } from '@skinprices/store';
import { materializerConfigSchema } from './config.js';
import { schemaLockSql } from './lock.js';
import { planOffsetReset, resetStoredOffsets } from './offsets.js';

const config = parseConfig(materializerConfigSchema, process.env);
const logger = createLogger('reset-offsets', config.LOG_LEVEL);
const confirmed = process.argv.slice(2).includes('--yes');

await ensureDatabase(config.DATABASE_URL);
const pool = createPool({
  databaseUrl: config.DATABASE_URL,
  schema: config.DATABASE_SCHEMA,
  max: 2,
  applicationName: 'reset-offsets',
});
const kafka = createKafka({ brokers: config.KAFKA_BROKERS, clientId: 'reset-offsets' });
try {
  const exists = await pool.query(`SELECT to_regclass('consumer_offsets') IS NOT NULL AS ok`);
  if (!(exists.rows[0] as { ok: boolean }).ok) {
    process.stdout.write(`schema '${config.DATABASE_SCHEMA}' has no consumer_offsets: nothing to reset\n`);
  } else {
    const plan = await planOffsetReset(pool, kafka, config.GROUP_ID);
    process.stdout.write(
      `group '${config.GROUP_ID}' in schema '${config.DATABASE_SCHEMA}', connected to Kafka cluster ${plan.clusterId}\n`,
    );
    for (const r of plan.rows)
      process.stdout.write(
        `  ${`${r.topic}[${r.partition}]`.padEnd(40)} next ${String(r.nextOffset).padStart(10)}  ` +
          `cluster ${r.clusterId ?? '(unbound)'}  ${r.mismatch ?? 'ok'}\n`,
      );
    process.stdout.write(
      `${plan.rows.length} stored offsets, ${plan.rows.filter((r) => r.mismatch).length} not matching; ` +
        `${plan.pendingMarkers} markers waiting on them\n`,
    );
    if (!confirmed) {
      process.stdout.write('nothing changed: run again with --yes (make reset-offsets ARGS=--yes) to delete them\n');
      process.exitCode = plan.rows.length > 0 ? 2 : 0;
    } else {
      const done = await resetStoredOffsets(pool, kafka, {
        groupId: config.GROUP_ID,
        // The lock every materializer of this schema holds shared (and a replay exclusively).
        lockSql: schemaLockSql('current_schema()'),
      });
      logger.info(done, 'stored offsets deleted: the next materializer reads every partition from its start');
    }
  }
} finally {
  await pool.end();
}

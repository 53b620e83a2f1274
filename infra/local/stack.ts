/**
 * The parts of `make up` that speak the services' protocols rather than shell:
 *   prepare-db      create the app database and the registry's database if missing;
 *                   prints the registry's JDBC settings as shell assignments
 *   wait-kafka      wait until the cluster answers describeCluster with a controller and as many
 *                   brokers as KAFKA_BROKERS lists
 *   wait-registry   wait until the registry serves its Confluent-compatible API
 *   topics          create the topics of infra/kafka/topics.json that do not exist yet, and wait
 *                   until every partition of every topic has a leader
 */
import { createKafka, ensureTopics, topicDefinitions, waitForKafka } from '@skinprices/events';
import { ensureDatabase } from '@skinprices/store';
import type { logCreator } from 'kafkajs';

const env = process.env;
const databaseUrl = env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5442/skinprices';
const brokers = env.KAFKA_BROKERS ?? '127.0.0.1:9092';
const registryUrl = env.SCHEMA_REGISTRY_URL ?? 'http://127.0.0.1:8081/apis/ccompat/v7';

const say = (msg: string): void => void process.stderr.write(`[stack] ${msg}\n`);

/**
 * kafkajs's log (JSON lines, as its own), less the answers ensureTopics waits out: while a new
 * topic reaches every node of a cluster, metadata answers UNKNOWN_TOPIC_OR_PARTITION or
 * LEADER_NOT_AVAILABLE, which kafkajs logs as errors although a later look succeeds.
 */
const WAITED_OUT = /does not host this topic-partition|no leader for this topic-partition/;
const kafkaLog: logCreator =
  () =>
  ({ label, log }) => {
    if (WAITED_OUT.test(String(log.error ?? ''))) return;
    process.stderr.write(`${JSON.stringify({ level: label, ...log })}\n`);
  };
const shellQuote = (s: string): string => `'${s.replaceAll("'", "'\\''")}'`;

async function prepareDb(): Promise<void> {
  const app = await ensureDatabase(databaseUrl);
  say(`database ${app.database}: ${app.created ? 'created' : 'present'}`);
  const registryDb = env.REGISTRY_DATABASE ?? 'skinprices_registry';
  const url = new URL(databaseUrl);
  url.pathname = `/${registryDb}`;
  const reg = await ensureDatabase(url.toString());
  say(`database ${reg.database}: ${reg.created ? 'created' : 'present'}`);
  const jdbc = `jdbc:postgresql://${url.hostname}:${url.port || '5432'}/${registryDb}`;
  process.stdout.write(
    [
      `REGISTRY_JDBC_URL=${shellQuote(jdbc)}`,
      `REGISTRY_DB_USER=${shellQuote(decodeURIComponent(url.username || 'postgres'))}`,
      `REGISTRY_DB_PASSWORD=${shellQuote(decodeURIComponent(url.password))}`,
    ].join('\n') + '\n',
  );
}

async function waitRegistry(timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${registryUrl}/subjects`, { signal: AbortSignal.timeout(2_000) });
      if (res.ok) {
        say(`registry ready at ${registryUrl}`);
        return;
      }
      last = `HTTP ${res.status}`;
    } catch (err) {
      last = String(err);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`schema registry not ready after ${timeoutMs} ms (${last})`);
}

async function main(cmd: string | undefined): Promise<void> {
  const kafka = createKafka({ brokers, clientId: 'skinprices-stack', logCreator: kafkaLog });
  switch (cmd) {
    case 'prepare-db':
      return prepareDb();
    case 'wait-kafka': {
      // A cluster answers once a quorum is up; topics created before its last node registered
      // would wait for it anyway (ensureTopics), so wait here, where the message says why.
      const listed = brokers.split(',').filter((b) => b.trim() !== '').length;
      const { brokers: n } = await waitForKafka(kafka, 90_000, { brokers: listed });
      say(`kafka ready at ${brokers} (${n} broker${n === 1 ? '' : 's'})`);
      return;
    }
    case 'wait-registry':
      return waitRegistry();
    case 'topics': {
      const created = await ensureTopics(kafka, topicDefinitions(), { timeoutMs: 90_000 });
      say(created.length ? `created topics: ${created.join(', ')}` : 'topics present');
      return;
    }
    default:
      throw new Error('usage: stack.ts prepare-db|wait-kafka|wait-registry|topics');
  }
}

main(process.argv[2]).catch((err: unknown) => {
  say(`ERROR: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});

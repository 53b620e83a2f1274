/** Topic administration: create the project's topics (or a test's own copies) and wait for Kafka. */
import { AppError } from '@skinprices/domain';
import type { Admin, Kafka } from 'kafkajs';
// The whole module: Node's CommonJS export detection misses kafkajs' ConfigResourceTypes.
import kafkajs from './kafkajs.js';
import type { TopicDefinition } from './schemas.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Waits until the cluster answers describeCluster with a controller and at least `brokers`
 * brokers registered: the port opens before the broker can serve metadata, so "port open" is not
 * "ready", and a cluster answers once a quorum is up, before its last nodes have registered.
 */
export async function waitForKafka(
  kafka: Kafka,
  timeoutMs = 60_000,
  { brokers: minBrokers = 1 }: { /** Brokers to wait for. @default 1 */ brokers?: number } = {},
): Promise<{ brokers: number }> {
  const admin = kafka.admin();
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  try {
    while (Date.now() < deadline) {
      try {
        await admin.connect();
        const cluster = await admin.describeCluster();
        if (cluster.brokers.length >= minBrokers && cluster.controller !== null)
          return { brokers: cluster.brokers.length };
        last = `${cluster.brokers.length} of ${minBrokers} brokers registered`;
      } catch (err) {
        last = err;
      }
      await sleep(500);
    }
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
  throw new AppError('kafka_unavailable', `Kafka not ready after ${timeoutMs} ms: ${String(last)}`, {
    cause: last,
  });
}

/**
 * Whether asking Kafka again may succeed: kafkajs marks its errors `retriable` (a topic or leader
 * not known yet, a request timed out, not the controller), also the one its own retries gave up
 * on (the `cause` of KafkaJSNumberOfRetriesExceeded). A createTopics answers one error per topic:
 * retriable when each is, or says the topic exists (created by the attempt that failed after).
 */
function isRetriable(err: unknown): boolean {
  const e = err as { retriable?: unknown; cause?: unknown; errors?: unknown; type?: unknown } | undefined;
  if (!e || typeof e !== 'object') return false;
  if (Array.isArray(e.errors))
    return (
      e.errors.length > 0 &&
      e.errors.every((x) => (x as { type?: unknown }).type === 'TOPIC_ALREADY_EXISTS' || isRetriable(x))
    );
  return e.retriable === true || (e.cause !== undefined && e.cause !== err && isRetriable(e.cause));
}

/**
 * The replication factor new topics get: the broker's own `default.replication.factor` (what the
 * operator configured for this cluster), not the number of brokers the answering node knows of.
 * Counting brokers was wrong on a three-node cluster just started: a node that had not yet heard
 * of the third broker answered two, and topics were created with two replicas for good.
 */
async function configuredReplicationFactor(admin: Admin, nodeId: number): Promise<number> {
  const { resources } = await admin.describeConfigs({
    includeSynonyms: false,
    resources: [
      { type: kafkajs.ConfigResourceTypes.BROKER, name: String(nodeId), configNames: ['default.replication.factor'] },
    ],
  });
  const value = resources[0]?.configEntries.find((e) => e.configName === 'default.replication.factor')?.configValue;
  const rf = Number(value);
  if (!Number.isInteger(rf) || rf < 1)
    throw new AppError('kafka_unavailable', `broker ${nodeId} reports default.replication.factor=${String(value)}`);
  return rf;
}

/**
 * Sets each existing topic's configs to its definition where they differ (a retention changed in
 * topics.json reaches topics created before). Kafka's AlterConfigs (the request kafkajs sends)
 * replaces a topic's whole set of overrides, so the overrides the definition does not name are
 * sent along unchanged.
 */
async function alignConfigs(admin: Admin, topics: readonly TopicDefinition[]): Promise<void> {
  const withConfig = topics.filter((t) => Object.keys(t.config).length > 0);
  if (withConfig.length === 0) return;
  const { resources } = await admin.describeConfigs({
    includeSynonyms: false,
    resources: withConfig.map((t) => ({ type: kafkajs.ConfigResourceTypes.TOPIC, name: t.name })),
  });
  const altered: { type: number; name: string; configEntries: { name: string; value: string }[] }[] = [];
  for (const r of resources) {
    const def = withConfig.find((t) => t.name === r.resourceName);
    if (!def) continue;
    const current = new Map(r.configEntries.map((e) => [e.configName, e]));
    const differs = Object.entries(def.config).some(([k, v]) => current.get(k)?.configValue !== v);
    if (!differs) continue;
    const overrides = new Map(
      r.configEntries
        // DYNAMIC_TOPIC_CONFIG: an override set on this topic (not a broker or default value).
        .filter((e) => !e.isDefault && e.configSource === kafkajs.ConfigSource.TOPIC_CONFIG)
        .map((e) => [e.configName, e.configValue]),
    );
    for (const [k, v] of Object.entries(def.config)) overrides.set(k, v);
    altered.push({
      type: kafkajs.ConfigResourceTypes.TOPIC,
      name: def.name,
      configEntries: [...overrides].map(([name, value]) => ({ name, value })),
    });
  }
  if (altered.length > 0) await admin.alterConfigs({ validateOnly: false, resources: altered });
}

/** The partitions of `topics` the cluster's metadata shows without a leader (or not at all). */
async function leaderless(
  admin: Admin,
  topics: readonly TopicDefinition[],
  created: ReadonlySet<string>,
): Promise<string[]> {
  const { topics: metadata } = await admin.fetchTopicMetadata({ topics: topics.map((t) => t.name) });
  const partitionsOf = new Map(metadata.map((m) => [m.name, m.partitions]));
  const lacking: string[] = [];
  for (const t of topics) {
    const partitions = partitionsOf.get(t.name) ?? [];
    // A topic just created shows all its partitions at once; an older one may have been grown.
    if (partitions.length === 0 || (created.has(t.name) && partitions.length < t.partitions))
      lacking.push(`${t.name} (${partitions.length} of ${t.partitions} partitions known)`);
    for (const p of partitions) if (p.leader < 0) lacking.push(`${t.name}/${p.partitionId}`);
  }
  return lacking;
}

/**
 * Waits until every partition of `topics` has a leader. A node of a cluster learns of a topic a
 * moment after the controller created it, so right after creation metadata may answer
 * UNKNOWN_TOPIC_OR_PARTITION or LEADER_NOT_AVAILABLE: those are asked again until `deadline`.
 */
async function waitForLeaders(
  admin: Admin,
  topics: readonly TopicDefinition[],
  created: ReadonlySet<string>,
  deadline: number,
  timeoutMs: number,
): Promise<void> {
  if (topics.length === 0) return;
  for (;;) {
    let why: string;
    try {
      const lacking = await leaderless(admin, topics, created);
      if (lacking.length === 0) return;
      why = `without a leader: ${lacking.slice(0, 8).join(', ')}${lacking.length > 8 ? ` and ${lacking.length - 8} more` : ''}`;
    } catch (err) {
      if (!isRetriable(err)) throw err;
      why = String(err);
    }
    if (Date.now() >= deadline)
      throw new AppError(
        'kafka_unavailable',
        `topics' partitions not all led after ${timeoutMs} ms (${why}); is every broker of the cluster up?`,
      );
    await sleep(250);
  }
}

/**
 * Creates `missing` (those still missing on each attempt), trying again on a retriable error
 * (a controller moving, a request timed out on a cluster just started) until `deadline`.
 */
async function createTopics(
  admin: Admin,
  missing: readonly TopicDefinition[],
  replicationFactor: number,
  deadline: number,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      const existing = new Set(await admin.listTopics());
      const still = missing.filter((t) => !existing.has(t.name));
      if (still.length === 0) return;
      // Leaders are awaited by waitForLeaders: kafkajs's own wait gives up on the first
      // UNKNOWN_TOPIC_OR_PARTITION, which a node that has not yet heard of the topic answers.
      await admin.createTopics({
        waitForLeaders: false,
        topics: still.map((t) => ({
          topic: t.name,
          numPartitions: t.partitions,
          replicationFactor,
          configEntries: Object.entries(t.config).map(([name, value]) => ({ name, value })),
        })),
      });
      return;
    } catch (err) {
      if (!isRetriable(err) || Date.now() >= deadline) throw err;
      await sleep(Math.min(250 * attempt, 2_000));
    }
  }
}

/** Waits up to `deadline` until the cluster has registered `replicationFactor` brokers. */
async function waitForBrokers(
  admin: Admin,
  replicationFactor: number,
  deadline: number,
  timeoutMs: number,
): Promise<void> {
  let { brokers } = await admin.describeCluster();
  while (brokers.length < replicationFactor) {
    if (Date.now() > deadline)
      throw new AppError(
        'kafka_unavailable',
        `${brokers.length} broker(s) registered, default.replication.factor is ${replicationFactor}: ` +
          `topics not created after ${timeoutMs} ms`,
      );
    await sleep(500);
    ({ brokers } = await admin.describeCluster());
  }
}

/**
 * Creates missing topics with their partition counts and configs, and brings existing topics'
 * configs to their definitions (alignConfigs); idempotent. Replicated as the cluster's
 * `default.replication.factor` says; while fewer brokers than that have registered (a cluster
 * still starting), waits for them instead of creating under-replicated topics. Returns once every
 * partition of every topic named has a leader (so producers and consumers find them at once);
 * retriable errors on the way are tried again, and each wait ends with an error naming what is
 * missing after `timeoutMs` (60 s). Returns the topics created.
 */
export async function ensureTopics(
  kafka: Kafka,
  topics: readonly TopicDefinition[],
  { timeoutMs = 60_000 }: { /** @default 60000 */ timeoutMs?: number } = {},
): Promise<string[]> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const deadline = Date.now() + timeoutMs;
    const existing = new Set(await admin.listTopics());
    await alignConfigs(
      admin,
      topics.filter((t) => existing.has(t.name)),
    );
    const missing = topics.filter((t) => !existing.has(t.name));
    if (missing.length > 0) {
      const { brokers } = await admin.describeCluster();
      const asked = brokers[0];
      if (!asked) throw new AppError('kafka_unavailable', 'the cluster names no broker');
      const replicationFactor = await configuredReplicationFactor(admin, asked.nodeId);
      await waitForBrokers(admin, replicationFactor, deadline, timeoutMs);
      await createTopics(admin, missing, replicationFactor, deadline);
    }
    await waitForLeaders(admin, topics, new Set(missing.map((t) => t.name)), deadline, timeoutMs);
    return missing.map((t) => t.name);
  } finally {
    await admin.disconnect();
  }
}

export async function deleteTopics(kafka: Kafka, names: readonly string[]): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.deleteTopics({ topics: [...names], timeout: 30_000 });
  } finally {
    await admin.disconnect();
  }
}

/** Topic administration: create the project's topics (or a test's own copies) and wait for Kafka. */
import { AppError } from '@skinprices/domain';
import type { Admin, Kafka } from 'kafkajs';
// The whole module: Node's CommonJS export detection misses kafkajs' ConfigResourceTypes.
import kafkajs from './kafkajs.js';
import type { TopicDefinition } from './schemas.js';

/**
 * Waits until the cluster answers describeCluster with a controller: the port opens before the
 * broker can serve metadata, so "port open" is not "ready".
 */
export async function waitForKafka(kafka: Kafka, timeoutMs = 60_000): Promise<{ brokers: number }> {
  const admin = kafka.admin();
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  try {
    while (Date.now() < deadline) {
      try {
        await admin.connect();
        const cluster = await admin.describeCluster();
        if (cluster.brokers.length > 0 && cluster.controller !== null) return { brokers: cluster.brokers.length };
      } catch (err) {
        lastError = err;
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
  throw new AppError('kafka_unavailable', `Kafka not ready after ${timeoutMs} ms: ${String(lastError)}`, {
    cause: lastError,
  });
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

/**
 * Creates missing topics with their partition counts and configs, and brings existing topics'
 * configs to their definitions (alignConfigs); idempotent. Replicated as the cluster's
 * `default.replication.factor` says; while fewer brokers than that have registered (a cluster
 * still starting), waits up to `waitForBrokersMs` for them, then fails instead of creating
 * under-replicated topics. Returns the topics created.
 */
export async function ensureTopics(
  kafka: Kafka,
  topics: readonly TopicDefinition[],
  { waitForBrokersMs = 60_000 }: { waitForBrokersMs?: number } = {},
): Promise<string[]> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    await alignConfigs(
      admin,
      topics.filter((t) => existing.has(t.name)),
    );
    const missing = topics.filter((t) => !existing.has(t.name));
    if (missing.length === 0) return [];
    const deadline = Date.now() + waitForBrokersMs;
    let { brokers } = await admin.describeCluster();
    const asked = brokers[0];
    if (!asked) throw new AppError('kafka_unavailable', 'the cluster names no broker');
    const replicationFactor = await configuredReplicationFactor(admin, asked.nodeId);
    while (brokers.length < replicationFactor) {
      if (Date.now() > deadline)
        throw new AppError(
          'kafka_unavailable',
          `${brokers.length} broker(s) registered, default.replication.factor is ${replicationFactor}: ` +
            `topics not created after ${waitForBrokersMs} ms`,
        );
      await new Promise((r) => setTimeout(r, 500));
      ({ brokers } = await admin.describeCluster());
    }
    await admin.createTopics({
      waitForLeaders: true,
      topics: missing.map((t) => ({
        topic: t.name,
        numPartitions: t.partitions,
        replicationFactor,
        configEntries: Object.entries(t.config).map(([name, value]) => ({ name, value })),
      })),
    });
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

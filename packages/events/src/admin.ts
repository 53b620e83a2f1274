/** Topic administration: create the project's topics (or a test's own copies) and wait for Kafka. */
import { AppError } from '@skinprices/domain';
import type { Kafka } from 'kafkajs';
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
 * Creates missing topics with their partition counts and configs; existing topics are left as
 * they are (idempotent). The replication factor follows the cluster size (1 or 3).
 */
export async function ensureTopics(kafka: Kafka, topics: readonly TopicDefinition[]): Promise<string[]> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const { brokers } = await admin.describeCluster();
    const replicationFactor = Math.min(3, brokers.length);
    const missing = topics.filter((t) => !existing.has(t.name));
    if (missing.length > 0) {
      await admin.createTopics({
        waitForLeaders: true,
        topics: missing.map((t) => ({
          topic: t.name,
          numPartitions: t.partitions,
          replicationFactor,
          configEntries: Object.entries(t.config).map(([name, value]) => ({ name, value })),
        })),
      });
    }
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

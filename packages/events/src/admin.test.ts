import type { Admin, Kafka } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { ensureTopics, waitForKafka } from './admin.js';
import kafkajs from './kafkajs.js';
import type { TopicDefinition } from './schemas.js';

/** A Kafka protocol error as kafkajs's parsers throw it (its `retriable` flag from the error table). */
const protocolError = (type: string, retriable: boolean) =>
  new kafkajs.KafkaJSProtocolError({ message: type, type, code: 0, retriable } as never);

const TOPICS: TopicDefinition[] = [
  { name: 'listings.v1', event: 'listing', partitions: 3, config: {} },
  { name: 'sales.v1', event: 'sale', partitions: 2, config: {} },
];

type Answer<T> = T | Error;

/**
 * A three-node cluster's admin as ensureTopics sees it: topics that exist, and scripted answers of
 * createTopics and fetchTopicMetadata (one per call, the last repeated).
 */
function fakeCluster(o: {
  existing?: string[];
  creates?: Answer<void>[];
  metadata?: Answer<Record<string, number[]>>[];
  brokers?: number;
  /** A failed createTopics created its topics nonetheless (as a request timing out may). @default true */
  createsStick?: boolean;
}) {
  const existing = new Set(o.existing ?? []);
  const calls = { create: [] as string[][], metadata: 0, waitForLeaders: [] as unknown[] };
  const next = <T>(answers: Answer<T>[], i: number): T => {
    const a = answers[Math.min(i, answers.length - 1)] as Answer<T>;
    if (a instanceof Error) throw a;
    return a;
  };
  const admin = {
    connect: async () => undefined,
    disconnect: async () => undefined,
    listTopics: async () => [...existing],
    describeCluster: async () => ({
      brokers: Array.from({ length: o.brokers ?? 3 }, (_, i) => ({ nodeId: i + 1, host: '127.0.0.1', port: 9092 })),
      controller: 1,
      clusterId: 'c',
    }),
    describeConfigs: async () => ({
      resources: [{ configEntries: [{ configName: 'default.replication.factor', configValue: '3' }] }],
    }),
    createTopics: async (req: { topics: { topic: string }[]; waitForLeaders?: boolean }) => {
      const i = calls.create.length;
      calls.create.push(req.topics.map((t) => t.topic));
      calls.waitForLeaders.push(req.waitForLeaders);
      if (o.createsStick ?? true) for (const t of req.topics) existing.add(t.topic);
      next(o.creates ?? [undefined], i);
      return true;
    },
    fetchTopicMetadata: async ({ topics }: { topics: string[] }) => {
      const leaders = next(o.metadata ?? [{}], calls.metadata++);
      return {
        topics: topics.map((name) => ({
          name,
          partitions: (leaders[name] ?? [1, 2, 3]).map((leader, partitionId) => ({ partitionId, leader })),
        })),
      };
    },
  };
  const kafka = { admin: () => admin as unknown as Admin } as unknown as Kafka;
  return { kafka, calls };
}

describe('ensureTopics on a three-node cluster', () => {
  it('waits for leaders: UNKNOWN_TOPIC_OR_PARTITION right after creation is asked again, not a failure', async () => {
    // Root cause: createTopics with kafkajs's own wait for leaders asked one node for the new
    // topics' metadata; a node that had not yet heard of them answered UNKNOWN_TOPIC_OR_PARTITION,
    // which that wait does not retry, so `make up-cluster` failed about every second time.
    const c = fakeCluster({
      metadata: [
        protocolError('UNKNOWN_TOPIC_OR_PARTITION', true),
        protocolError('LEADER_NOT_AVAILABLE', true),
        { 'listings.v1': [1, -1, 3] },
        {},
      ],
    });
    await expect(ensureTopics(c.kafka, TOPICS)).resolves.toEqual(['listings.v1', 'sales.v1']);
    expect(c.calls.create).toEqual([['listings.v1', 'sales.v1']]);
    expect(c.calls.waitForLeaders).toEqual([false]);
    expect(c.calls.metadata).toBe(4);
  });

  it('tries the creation again on a retriable error, creating only what is still missing', async () => {
    const timedOut = new kafkajs.KafkaJSNumberOfRetriesExceeded(protocolError('REQUEST_TIMED_OUT', true), {
      retryCount: 5,
      retryTime: 1000,
    } as never);
    const c = fakeCluster({ existing: ['sales.v1'], creates: [timedOut, undefined] });
    await expect(ensureTopics(c.kafka, TOPICS)).resolves.toEqual(['listings.v1']);
    // The failed attempt had created it: the second finds nothing left to create.
    expect(c.calls.create).toEqual([['listings.v1']]);
    const c2 = fakeCluster({
      createsStick: false,
      creates: [
        new kafkajs.KafkaJSAggregateError('Topic creation errors', [
          protocolError('TOPIC_ALREADY_EXISTS', false),
          protocolError('NOT_CONTROLLER', true),
        ]),
      ],
    });
    await expect(ensureTopics(c2.kafka, TOPICS, { timeoutMs: 600 })).rejects.toThrow('Topic creation errors');
    expect(c2.calls.create.length).toBeGreaterThan(1);
  });

  it('fails at once on an error asking again cannot fix', async () => {
    const c = fakeCluster({ creates: [protocolError('INVALID_REPLICATION_FACTOR', false)] });
    await expect(ensureTopics(c.kafka, TOPICS)).rejects.toThrow('INVALID_REPLICATION_FACTOR');
    expect(c.calls.create).toHaveLength(1);
  });

  it('gives up after its timeout, naming the partitions without a leader', async () => {
    const c = fakeCluster({ existing: ['listings.v1', 'sales.v1'], metadata: [{ 'sales.v1': [-1, 2] }] });
    await expect(ensureTopics(c.kafka, TOPICS, { timeoutMs: 300 })).rejects.toThrow(
      /partitions not all led after 300 ms \(without a leader: sales\.v1\/0\)/,
    );
    expect(c.calls.create).toEqual([]);
  });

  it('counts a new topic whose partitions are not all known yet as not ready', async () => {
    const c = fakeCluster({ existing: ['sales.v1'], metadata: [{ 'listings.v1': [1] }, {}] });
    await expect(ensureTopics(c.kafka, TOPICS)).resolves.toEqual(['listings.v1']);
    expect(c.calls.metadata).toBe(2);
  });
});

describe('waitForKafka', () => {
  it('waits for the brokers asked for, and says how many registered when they do not', async () => {
    const c = fakeCluster({ brokers: 2 });
    await expect(waitForKafka(c.kafka, 1_000, { brokers: 2 })).resolves.toEqual({ brokers: 2 });
    await expect(waitForKafka(c.kafka, 600, { brokers: 3 })).rejects.toThrow(/2 of 3 brokers registered/);
  });
});

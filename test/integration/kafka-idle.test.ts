/**
 * kafkajs 2.2.4's idle connections spin (packages/events/src/idle-loop.ts): every broker
 * connection re-checked its empty request queue every millisecond, ~840 wake-ups a second per
 * connection in every process of the platform. createKafka patches that; this proves it against
 * the real broker, with clients of every kind the platform runs (producer, admin, consumer),
 * connected, used, then left idle — and that they still work after the quiet.
 */
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import { createKafka, KAFKAJS_REQUEST_QUEUE } from '@skinprices/events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stackEnv, uniqueName } from '../support/stack.js';

const require = createRequire(import.meta.url);

describe('kafkajs connections when idle', () => {
  const kafka = createKafka({ brokers: stackEnv().brokers, clientId: uniqueName('idle') });
  const topic = uniqueName('idle-topic');
  const admin = kafka.admin();
  const producer = kafka.producer();
  const consumer = kafka.consumer({ groupId: uniqueName('idle-group'), maxWaitTimeInMs: 500 });
  const received: string[] = [];

  beforeAll(async () => {
    await Promise.all([admin.connect(), producer.connect()]);
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({ eachMessage: async ({ message }) => void received.push(String(message.value)) });
    await producer.send({ topic, messages: [{ value: 'before' }] });
    await waitFor(() => received.length === 1);
  });

  afterAll(async () => {
    await consumer.disconnect();
    await producer.disconnect();
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  });

  it('checks their request queues only when there is something to send', async () => {
    // Count every check of every connection's queue (the file kafkajs's connections use).
    const queue = (require(KAFKAJS_REQUEST_QUEUE) as { prototype: { checkPendingRequests(): void } }).prototype;
    const original = queue.checkPendingRequests;
    let checks = 0;
    queue.checkPendingRequests = function (this: unknown) {
      checks++;
      original.call(this);
    };
    const cpuBefore = process.cpuUsage();
    try {
      await sleep(2_000);
    } finally {
      queue.checkPendingRequests = original;
    }
    const cpu = process.cpuUsage(cpuBefore);
    // Idle, the consumer still fetches (a long poll of ≤ 500 ms) and heartbeats: each answer is
    // one check. Unpatched the same two seconds gave thousands (one per ms per connection).
    expect(checks).toBeLessThan(100);
    // …and some: the consumer's answers were counted, so the count is of the queues in use.
    expect(checks).toBeGreaterThan(0);
    // Informational: the process's CPU over the quiet two seconds.
    console.info(`idle 2 s: ${checks} queue checks, ${((cpu.user + cpu.system) / 1000).toFixed(0)} ms CPU`);

    await producer.send({ topic, messages: [{ value: 'after' }] });
    await waitFor(() => received.length === 2);
    expect(received).toEqual(['before', 'after']);
    expect(await admin.fetchTopicOffsets(topic)).toEqual([expect.objectContaining({ partition: 0, high: '2' })]);
  });
});

async function waitFor(done: () => boolean, ms = 20_000): Promise<void> {
  const until = Date.now() + ms;
  while (!done()) {
    if (Date.now() > until) throw new Error('timed out');
    await sleep(20);
  }
}

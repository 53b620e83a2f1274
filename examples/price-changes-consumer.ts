/**
 * An example for downstream teams: subscribe to `price-changes.v1` and decode it through the
 * schema registry, with nothing but kafkajs and @kafkajs/confluent-schema-registry (no code of
 * this repository). Every record is Confluent wire format (magic byte, schema id, Avro); the key
 * is the JSON array `["<market>","<market_hash_name>","<phase>"]`, so one item's changes arrive in order.
 *
 *   npx tsx examples/price-changes-consumer.ts [--from-beginning] [--group my-team]
 *   KAFKA_BROKERS=127.0.0.1:9092 SCHEMA_REGISTRY_URL=http://127.0.0.1:8081/apis/ccompat/v7
 *
 * Delivery is at least once: de-duplicate by (key, observed_at) if it matters to you. To rebuild
 * the full current state instead, read the compacted `prices.current.v1` from the beginning.
 */
import { parseArgs } from 'node:util';
import { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import { Kafka, logLevel } from 'kafkajs';

/** The fields of price-changes.v1 (see packages/events/schemas/price-change.avsc). */
export interface PriceChange {
  market: string;
  market_hash_name: string;
  phase: string;
  currency: string;
  /** Decimal strings; null = no listing. */
  old_price: string | null;
  new_price: string | null;
  old_count: number | null;
  new_count: number | null;
  /** Epoch milliseconds. */
  observed_at: number;
  changed_at: number;
}

export interface SubscribeOptions {
  brokers: string[];
  registryUrl: string;
  topic?: string;
  groupId: string;
  fromBeginning?: boolean;
}

/** Subscribes and calls `onChange` per decoded change; returns a function that stops. */
export async function subscribePriceChanges(
  options: SubscribeOptions,
  onChange: (change: PriceChange, key: string | null) => void | Promise<void>,
): Promise<() => Promise<void>> {
  const kafka = new Kafka({ brokers: options.brokers, clientId: options.groupId, logLevel: logLevel.WARN });
  const registry = new SchemaRegistry({ host: options.registryUrl });
  const consumer = kafka.consumer({ groupId: options.groupId });
  await consumer.connect();
  await consumer.subscribe({
    topic: options.topic ?? 'price-changes.v1',
    fromBeginning: options.fromBeginning ?? false,
  });
  await consumer.run({
    eachMessage: async ({ message }) => {
      if (!message.value) return;
      const change = (await registry.decode(message.value)) as PriceChange;
      await onChange(change, message.key?.toString() ?? null);
    },
  });
  return () => consumer.disconnect();
}

// Run as a program: print each change as one JSON line.
if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: { 'from-beginning': { type: 'boolean' }, group: { type: 'string' }, topic: { type: 'string' } },
  });
  const stop = await subscribePriceChanges(
    {
      brokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
      registryUrl: process.env.SCHEMA_REGISTRY_URL ?? 'http://127.0.0.1:8081/apis/ccompat/v7',
      ...(values.topic ? { topic: values.topic } : {}),
      groupId: values.group ?? `example-${process.pid}`,
      fromBeginning: values['from-beginning'] ?? false,
    },
    (c) => {
      process.stdout.write(`${JSON.stringify(c)}\n`);
    },
  );
  for (const s of ['SIGINT', 'SIGTERM'] as const) process.on(s, () => void stop().then(() => process.exit(0)));
}

/**
 * Poisoned records: records that decode (valid Avro, valid money) but that PostgreSQL refuses when
 * the materializer applies them — a market_hash_name or phase holding U+0000 (text cannot hold
 * NUL), a price beyond numeric(20, 2). Each sits on its own partition of listings.v1 between good
 * records. Isolated means: the poisoned record is in dead_letters with its error, the good records
 * after it on the same partition are applied (the partition moved on), and the other partitions
 * never waited for it.
 *
 *   node --import tsx reliability/poison.ts [--smoke] [--seed n] [--out file]
 */
import { eventKey, topicFor, type EventMap } from '@skinprices/events';
import { Partitioners } from 'kafkajs';
import { SAMPLES } from '../test/support/samples.js';
import { TestStack } from '../test/support/stack.js';
import {
  chaosArgs,
  message,
  runTopics,
  Rng,
  startService,
  stopProcess,
  within,
  writeScenario,
} from './support/harness.js';

const args = chaosArgs('poison');
const rng = new Rng(args.seed);
const WAIT_MS = args.smoke ? 45_000 : 90_000;

type Listing = EventMap['listing'];
const POISONS: { kind: string; bend: (e: Listing) => Listing }[] = [
  { kind: 'NUL in market_hash_name', bend: (e) => ({ ...e, market_hash_name: `${e.market_hash_name}\u0000poison` }) },
  { kind: 'NUL in phase', bend: (e) => ({ ...e, phase: 'Ruby\u0000' }) },
  { kind: 'price beyond numeric(20, 2)', bend: (e) => ({ ...e, price: `${'9'.repeat(24)}.99` }) },
];

interface Placed {
  kind: string;
  partition: number;
  poisonOffset: string;
  goodAfter: { name: string; offset: string }[];
}

const result: Record<string, unknown> = { errors: [] as string[] };
const errors = result.errors as string[];
const stack = new TestStack();
const began = Date.now();
try {
  const suffix = await runTopics(stack);
  const topic = `${topicFor('listing').name}${suffix}`;
  const codec = await stack.serde.codec(topic, 'listing');
  // A plain producer: the records go to the partitions chosen here, not to their keys' partitions.
  const producer = stack.kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  stack.defer(() => producer.disconnect());
  const now = Date.now();
  let n = 0;
  const listing = (name: string): Listing => ({
    ...SAMPLES.listing,
    market: 'cn-a',
    market_hash_name: name,
    phase: '',
    price: `${rng.int(1, 99_999)}.${String(rng.int(0, 99)).padStart(2, '0')}`,
    observed_at: now,
    cycle_id: `chaos:poison:${now}`,
  });
  const send = async (partition: number, e: Listing): Promise<string> => {
    const [meta] = await producer.send({
      topic,
      acks: -1,
      messages: [{ key: eventKey('listing', e), value: codec.encode(e), partition }],
    });
    return meta?.baseOffset ?? '-1';
  };

  // listings.v1 has six partitions: poisons on 0..2 (order from the seed), clean traffic on 3..5.
  const order = [0, 1, 2].sort(() => rng.next() - 0.5);
  const placed: Placed[] = [];
  for (const [i, poison] of POISONS.entries()) {
    const partition = order[i] as number;
    for (let k = rng.int(0, 3); k > 0; k--) await send(partition, listing(`Chaos Before ${n++}`));
    const poisonOffset = await send(partition, poison.bend(listing(`Chaos Poison ${n++}`)));
    const goodAfter: Placed['goodAfter'] = [];
    for (let k = rng.int(1, 4); k > 0; k--) {
      const name = `Chaos After ${n++}`;
      goodAfter.push({ name, offset: await send(partition, listing(name)) });
    }
    placed.push({ kind: poison.kind, partition, poisonOffset, goodAfter });
  }
  const clean: string[] = [];
  for (let p = 3; p < 6; p++) {
    const name = `Chaos Clean ${n++}`;
    await send(p, listing(name));
    clean.push(name);
  }

  const { name: schema, pool } = await stack.schema();
  const t0 = Date.now();
  const child = startService(
    'services/materializer/src/main.ts',
    {
      DATABASE_URL: stack.env.databaseUrl,
      DATABASE_SCHEMA: schema,
      KAFKA_BROKERS: stack.env.brokers,
      SCHEMA_REGISTRY_URL: stack.env.registryUrl,
      GROUP_ID: stack.groupId(),
      TOPIC_SUFFIX: suffix,
      PUBLISH_CHANGES: 'false',
      LOG_LEVEL: 'error',
    },
    undefined,
  );
  stack.defer(() => stopProcess(child, 10_000));

  const names = async (): Promise<Set<string>> =>
    new Set(
      (
        await pool
          .query<{ market_hash_name: string }>('SELECT market_hash_name FROM listings_current')
          .catch(() => ({ rows: [] }))
      ).rows.map((r) => r.market_hash_name),
    );
  const judge = async () => {
    const have = await names();
    const { rows: dead } = await pool
      .query<{ partition: number; offset: string; error: string }>(
        `SELECT partition, "offset"::text AS offset, error FROM dead_letters WHERE topic = $1`,
        [topic],
      )
      .catch(() => ({ rows: [] as { partition: number; offset: string; error: string }[] }));
    return {
      clean_partitions_applied: clean.every((c) => have.has(c)),
      poisons: placed.map((p) => {
        const letter = dead.find((d) => d.partition === p.partition && d.offset === p.poisonOffset);
        return {
          kind: p.kind,
          partition: p.partition,
          offset: p.poisonOffset,
          dead_lettered: letter !== undefined,
          error: letter?.error.slice(0, 200) ?? null,
          good_after: p.goodAfter.length,
          good_after_applied: p.goodAfter.filter((g) => have.has(g.name)).length,
        };
      }),
    };
  };
  const isolated = (j: Awaited<ReturnType<typeof judge>>) =>
    j.clean_partitions_applied && j.poisons.every((p) => p.dead_lettered && p.good_after_applied === p.good_after);
  const done = await within(WAIT_MS, async () => (isolated(await judge()) ? true : undefined), 250);
  const final = await judge();
  result.seconds_to_isolation = done ? Number(((Date.now() - t0) / 1000).toFixed(1)) : null;
  result.waited_s = WAIT_MS / 1000;
  result.materializer_alive = child.exitCode === null && child.signalCode === null;
  result.clean_partitions_applied = final.clean_partitions_applied;
  result.poisons = final.poisons;
  result.poison_isolated = isolated(final);
} catch (err) {
  errors.push(message(err));
  console.error(err);
} finally {
  await stack.cleanup().catch((err: unknown) => errors.push(`clean-up: ${message(err)}`));
  result.seconds = Number(((Date.now() - began) / 1000).toFixed(1));
  await writeScenario(args, result);
}
process.exit(0);

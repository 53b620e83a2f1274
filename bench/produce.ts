/**
 * The poller's produce path against Kafka's own ProducerPerformance (kafka-tools, from Maven
 * Central with the broker's jars), in one run on the same broker, the same topic layout, the same
 * record size and the same producer settings.
 *
 *   node --import tsx bench/produce.ts [--size 35000] [--runs 3] [--out bench/results/produce.json]
 *
 * Ours: one full listings snapshot of every listing marketplace (the simulator's model, evaluated
 * in process), sent as a poller sends it: one `EventProducer.send` per upstream page of 500,
 * awaited before the next (a poller produces a page before it fetches the next), Avro-encoded
 * through the registry codec, keyed, idempotent, acks=all, one request in flight.
 * Theirs: the same number of records of the same mean size (key + value), one producer with
 * acks=all, idempotence, one request in flight, and batch.size = what one of our pages puts into
 * each partition, so both send the same batches; throughput unthrottled.
 * Needs `make up`.
 */
import { spawn } from 'node:child_process';
import { MARKETS } from '@skinprices/domain';
import {
  createKafka,
  deleteTopics,
  ensureTopics,
  EventProducer,
  EventSerde,
  eventKey,
  topicFor,
  type ListingEvent,
} from '@skinprices/events';
import { generateCatalogue, MarketModel } from '@skinprices/simulator';
import { benchArgs, median, round, writeResult } from './support/harness.js';
import { snapshotListings } from './support/listings.js';

const args = benchArgs('produce');
const brokers = process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';
const registryUrl = process.env.SCHEMA_REGISTRY_URL ?? 'http://127.0.0.1:8081/apis/ccompat/v7';
const kafkaLibs = process.env.KAFKA_LIBS ?? '.local/kafka/libs';
const PAGE = 500;
const AT = Date.UTC(2026, 10, 20, 12);

const model = new MarketModel(generateCatalogue({ seed: 7, size: args.size }), 7);
const events: ListingEvent[] = MARKETS.filter((m) => m.capabilities.includes('listings')).flatMap((m) =>
  snapshotListings(model, m, AT, `${m.slug}:LISTINGS:bench`),
);

const kafka = createKafka({ brokers, clientId: 'bench-produce' });
const serde = new EventSerde({ registryUrl });
const partitions = topicFor('listing').partitions;

interface Run {
  ours_records_per_s: number;
  theirs_records_per_s: number;
  ours_mb_per_s: number;
  theirs_mb_per_s: number;
}
const runs: Run[] = [];
let recordBytes = 0;
let batchBytes = 0;
for (let run = 0; run < args.runs; run++) {
  const suffix = `.bench_produce_${Date.now().toString(36)}`;
  const ours = `listings.v1${suffix}`;
  const theirs = `perf${suffix}`;
  await ensureTopics(kafka, [
    { name: ours, event: 'listing', partitions, config: {} },
    { name: theirs, event: 'listing', partitions, config: {} },
  ]);
  const codec = await serde.codec(ours, 'listing');
  if (run === 0) {
    // The mean record as it goes on the wire: key + Avro value (with the registry's 5-byte header).
    let total = 0;
    for (const e of events) total += Buffer.byteLength(eventKey('listing', e)) + codec.encode(e).length;
    recordBytes = Math.round(total / events.length);
    // One page spread over the partitions, plus the record batch header (61 bytes) and record overhead.
    batchBytes = Math.ceil((PAGE / partitions) * (recordBytes + 10)) + 61;
    console.log(`${events.length} records, mean ${recordBytes} bytes, batch.size ${batchBytes}`);
  }

  // Kafka's own producer first, then ours, each on a fresh topic. A producer per run: kafkajs keeps
  // a deleted topic in its metadata and every later refresh fails on it, so a second run's sends hang.
  const perf = await producerPerformance(theirs, events.length, recordBytes, batchBytes);
  const producer = new EventProducer(kafka);
  await producer.connect();
  const t0 = performance.now();
  for (let i = 0; i < events.length; i += PAGE) {
    const res = await producer.send(codec, events.slice(i, i + PAGE));
    if (res.rejected.length > 0) throw new Error(`${res.rejected.length} events rejected`);
  }
  const seconds = (performance.now() - t0) / 1000;
  const r: Run = {
    ours_records_per_s: Math.round(events.length / seconds),
    theirs_records_per_s: Math.round(perf.recordsPerSecond),
    ours_mb_per_s: round((events.length * recordBytes) / seconds / 1e6, 2),
    theirs_mb_per_s: perf.mbPerSecond,
  };
  runs.push(r);
  console.log(`run ${run + 1}:`, r);
  await producer.disconnect();
  await deleteTopics(kafka, [ours, theirs]);
  await serde.deleteSubject(`${ours}-value`);
}

/** Runs org.apache.kafka.tools.ProducerPerformance and parses its summary line. */
async function producerPerformance(topic: string, records: number, size: number, batch: number) {
  const argv = [
    '-Xmx512m',
    '-cp',
    `${kafkaLibs}/*`,
    'org.apache.kafka.tools.ProducerPerformance',
    '--topic',
    topic,
    '--num-records',
    String(records),
    '--record-size',
    String(size),
    '--throughput',
    '-1',
    '--producer-props',
    `bootstrap.servers=${brokers.split(',')[0]}`,
    'acks=all',
    'enable.idempotence=true',
    'max.in.flight.requests.per.connection=1',
    `batch.size=${batch}`,
    'linger.ms=0',
    'compression.type=none',
  ];
  const out = await new Promise<string>((resolve, reject) => {
    const child = spawn('java', argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (c: Buffer) => (text += c.toString()));
    child.stderr.on('data', (c: Buffer) => (text += c.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`ProducerPerformance: ${text}`))));
  });
  // "322379 records sent, 151123.4 records/sec (14.41 MB/sec), 95.3 ms avg latency, ..."
  const m = /(\d+) records sent, ([\d.]+) records\/sec \(([\d.]+) MB\/sec\)/.exec(out.split('\n').reverse().join('\n'));
  if (!m || Number(m[1]) !== records) throw new Error(`ProducerPerformance printed no summary for ${records}:\n${out}`);
  return { recordsPerSecond: Number(m[2]), mbPerSecond: Number(m[3]) };
}

const ours = median(runs.map((r) => r.ours_records_per_s));
const theirs = median(runs.map((r) => r.theirs_records_per_s));
await writeResult(args.out, {
  what: "the poller's produce path (Avro encode, keyed, idempotent, acks=all, one send per 500-event page)",
  limit: 'Kafka ProducerPerformance, same broker, partitions, record size, acks, idempotence, in-flight, batch size',
  catalogue_names: args.size,
  records: events.length,
  record_bytes: recordBytes,
  batch_size: batchBytes,
  runs,
  ours_records_per_s: ours,
  theirs_records_per_s: theirs,
  produce_ratio: round(median(runs.map((r) => r.ours_records_per_s / r.theirs_records_per_s))),
});
console.log(`produce ratio ${round(ours / theirs)} (${ours} vs ${theirs} records/s)`);
process.exit(0);

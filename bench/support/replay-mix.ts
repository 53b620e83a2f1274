/**
 * `make replay` over topics the pollers wrote (bench/topics.ts: every marketplace's FULL and DELTA
 * cycles, removals, markers, sales, history) against a raw COPY of the same listing events: the
 * rate a data engineer rebuilding a read model from the pollers' own mix gets, beside the
 * physical limit on the same run.
 *
 * The limit is a COPY of every listings.v1 record of the window, as the rows the ingest path
 * stages, into a table shaped like listings_current without its key or indexes (a FULL cycle
 * repeats every key, which a keyed table refuses): rows/s. Listings are most of the records, and
 * their rows are the widest the replay writes.
 */
import { EventConsumer, type EventSerde, type ListingEvent } from '@skinprices/events';
import { LISTING_COLUMNS, listingRow, MIGRATIONS_DIR, replay } from '@skinprices/materializer';
import type { Logger } from '@skinprices/runtime';
import { copyRows, type CopyValue } from '@skinprices/store';
import type { Kafka } from 'kafkajs';
import { dropSchema, freshSchema, round } from './harness.js';

export interface ReplayMix {
  /** Records the replay applied (every materialized topic, markers included). */
  replay_events: number;
  replay_seconds: number;
  replay_events_per_s: number;
  /** listings.v1 records COPYed raw, and how long it took. */
  copy_rows: number;
  copy_seconds: number;
  /** Replay events/s against the raw COPY's rows/s (target ≥ 1). */
  replay_vs_copy: number;
}

/** Every record of `topic` from its start to its end now, decoded. */
async function readAll(kafka: Kafka, serde: EventSerde, topic: string): Promise<ListingEvent[]> {
  const admin = kafka.admin();
  await admin.connect();
  const ends = await admin.fetchTopicOffsets(topic);
  await admin.disconnect();
  let left = ends.reduce((n, p) => n + Number(p.high) - Number(p.low), 0);
  const out: ListingEvent[] = [];
  if (left === 0) return out;
  const codec = await serde.codec(topic, 'listing');
  const consumer = new EventConsumer(kafka, [codec], { groupId: `bench-topics-read-${Date.now().toString(36)}` });
  let done!: () => void;
  const finished = new Promise<void>((r) => (done = r));
  await consumer.start(async (batch) => {
    for (const m of batch.messages) if (m.value) out.push(m.value as ListingEvent);
    left -= batch.messages.length;
    if (left <= 0) done();
  });
  await finished;
  await consumer.stop();
  return out;
}

export async function replayMix(o: {
  kafka: Kafka;
  serde: EventSerde;
  logger: Logger;
  databaseUrl: string;
  topicSuffix: string;
}): Promise<ReplayMix> {
  const live = `bench_topics_${Date.now().toString(36)}`;
  let rebuilding = 0;
  let rebuilt = 0;
  const result = await replay(
    {
      databaseUrl: o.databaseUrl,
      schema: live,
      groupId: `${live}-replay`,
      topicSuffix: o.topicSuffix,
      migrationsDir: MIGRATIONS_DIR,
      hourlyRetentionDays: 100,
      swap: false,
    },
    { kafka: o.kafka, serde: o.serde, logger: o.logger },
    (state) => {
      if (state === 'rebuilding') rebuilding = performance.now();
      if (state === 'checksums') rebuilt = performance.now();
    },
  );
  const replaySeconds = (rebuilt - rebuilding) / 1000;
  await dropSchema(o.databaseUrl, result.schema);

  const rows: CopyValue[][] = (await readAll(o.kafka, o.serde, `listings.v1${o.topicSuffix}`)).map(listingRow);
  const pool = await freshSchema(o.databaseUrl, `${live}_copy`, 1, 'bench');
  const client = await pool.connect();
  let copySeconds: number;
  try {
    await client.query('CREATE TABLE raw_listings (LIKE listings_current INCLUDING DEFAULTS)');
    const c0 = performance.now();
    await client.query('BEGIN');
    await copyRows(client, 'raw_listings', LISTING_COLUMNS, rows);
    await client.query('COMMIT');
    copySeconds = (performance.now() - c0) / 1000;
  } finally {
    client.release();
    await pool.end();
    await dropSchema(o.databaseUrl, `${live}_copy`);
  }
  return {
    replay_events: result.events,
    replay_seconds: round(replaySeconds, 2),
    replay_events_per_s: Math.round(result.events / replaySeconds),
    copy_rows: rows.length,
    copy_seconds: round(copySeconds, 3),
    replay_vs_copy: round(result.events / replaySeconds / (rows.length / copySeconds)),
  };
}

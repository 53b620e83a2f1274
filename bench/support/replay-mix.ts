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
import { LISTING_COLUMNS, listingRow, MaterializerMetrics, MIGRATIONS_DIR, replay } from '@skinprices/materializer';
import type { Logger } from '@skinprices/runtime';
import { copyRows, type CopyValue } from '@skinprices/store';
import type { Kafka } from 'kafkajs';
import { cpuDelta, cpuSeconds, dropSchema, freshSchema, round } from './harness.js';

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
  /** listings.v1 fetched and decoded alone (one consumer, nothing applied): records/s. */
  decode_events_per_s: number;
  /**
   * The design's floor: one process fetches and decodes every record before anything is applied,
   * so a replay cannot pass the decode rate; against the raw COPY's rows/s.
   */
  decode_vs_copy: number;
  /** Where the replay's time went (see breakdown()). */
  breakdown: ReplayBreakdown;
}

/**
 * Where a replay's time goes: CPU seconds per process (this one decodes and runs the
 * materializer; PostgreSQL applies), and the materializer's own figures: records, repeats skipped
 * before SQL, batch time per topic (summed over batches that run at once, so above the wall time)
 * and the derive path's time per step.
 */
interface ReplayBreakdown {
  cpu_s: Record<string, number>;
  records: Record<string, number>;
  repeats: Record<string, number>;
  batches: Record<string, { count: number; seconds: number }>;
  derive: Record<string, { count: number; seconds: number }>;
}

async function breakdown(metrics: MaterializerMetrics, cpu: Record<string, number>): Promise<ReplayBreakdown> {
  const out: ReplayBreakdown = { cpu_s: cpu, records: {}, repeats: {}, batches: {}, derive: {} };
  const short = (topic: unknown) => String(topic).replace(/\.v\d+.*$/, '');
  for (const m of await metrics.registry.getMetricsAsJSON()) {
    for (const v of m.values as { labels: Record<string, unknown>; value: number; metricName?: string }[]) {
      if (m.name === 'materializer_records_applied_total') out.records[short(v.labels.topic)] = v.value;
      if (m.name === 'materializer_listing_repeats_total') out.repeats[String(v.labels.path)] = v.value;
      const into =
        m.name === 'materializer_batch_apply_duration_seconds'
          ? [out.batches, short(v.labels.topic)]
          : m.name === 'materializer_derive_duration_seconds'
            ? [out.derive, String(v.labels.step)]
            : undefined;
      if (!into) continue;
      const [table, key] = into as [Record<string, { count: number; seconds: number }>, string];
      const t = (table[key] ??= { count: 0, seconds: 0 });
      if (v.metricName?.endsWith('_count')) t.count = v.value;
      if (v.metricName?.endsWith('_sum')) t.seconds = round(v.value, 1);
    }
  }
  return out;
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
  let cpuAtStart = new Map<string, number>();
  let cpu: Record<string, number> = {};
  const metrics = new MaterializerMetrics();
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
    { kafka: o.kafka, serde: o.serde, logger: o.logger, metrics },
    (state) => {
      if (state === 'rebuilding') {
        rebuilding = performance.now();
        cpuAtStart = cpuSeconds(process.pid);
      }
      if (state === 'checksums') {
        rebuilt = performance.now();
        cpu = cpuDelta(cpuAtStart, cpuSeconds(process.pid));
      }
    },
  );
  const replaySeconds = (rebuilt - rebuilding) / 1000;
  await dropSchema(o.databaseUrl, result.schema);

  const d0 = performance.now();
  const decoded = await readAll(o.kafka, o.serde, `listings.v1${o.topicSuffix}`);
  const decodeSeconds = (performance.now() - d0) / 1000;
  const rows: CopyValue[][] = decoded.map(listingRow);
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
    decode_events_per_s: Math.round(decoded.length / decodeSeconds),
    decode_vs_copy: round(decoded.length / decodeSeconds / (rows.length / copySeconds)),
    breakdown: await breakdown(metrics, cpu),
  };
}

/**
 * Poison records neither block their partition nor lose the records after them. Root cause
 * guarded: a record that decoded but failed in SQL (a U+0000 in market_hash_name: Avro carries
 * it, PostgreSQL text refuses it) made applyBatch throw; kafkajs redelivered the same batch
 * forever, the partition's stored offset never moved and every later record waited behind it.
 * Also checked here, on the same run: the heartbeat row and lag /v1/status reads, the wall-clock
 * freshness columns, the Prometheus /metrics series, and that `make replay` dead-letters the same
 * records and builds the same tables.
 */
import { topicFor, EventProducer, type EventMap } from '@skinprices/events';
import { Materializer, MaterializerMetrics, MIGRATIONS_DIR, replay, tableChecksums } from '@skinprices/materializer';
import { createLogger } from '@skinprices/runtime';
import { createPool, type Pool } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectTopics } from '../support/pipeline.js';
import { SAMPLES } from '../support/samples.js';
import { TestStack } from '../support/stack.js';

type Listing = EventMap['listing'];

interface Placed {
  event: Listing;
  partition: number;
  offset: number;
}

describe('materializer: poison records', () => {
  const stack = new TestStack();
  const groupId = stack.groupId();
  const metrics = new MaterializerMetrics();
  let suffix: string;
  let topic: string;
  let schema: string;
  let pool: Pool;
  let materializer: Materializer;
  let metricsUrl: string;
  const startedAt = Date.now();
  const placed: Placed[] = [];
  let nul: Placed;
  let overflow: Placed;

  const listing = (i: number, over: Partial<Listing> = {}): Listing => ({
    ...SAMPLES.listing,
    market: 'cn-a',
    market_hash_name: `Poison Test Item ${String(i).padStart(3, '0')} (Field-Tested)`,
    phase: '',
    price: `${100 + i}.50`,
    cycle_id: 'cn-a:LISTINGS:poison',
    ...over,
  });

  async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const got = await probe();
      if (got !== undefined) return got;
      if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  beforeAll(async () => {
    suffix = await projectTopics(stack);
    topic = `${topicFor('listing').name}${suffix}`;
    ({ name: schema, pool } = await stack.schema());
    stack.defer(async () => {
      const admin = createPool({ databaseUrl: stack.env.databaseUrl, max: 1 });
      await admin.query(`DROP SCHEMA IF EXISTS ${schema}_rb CASCADE`);
      await admin.end();
    });

    // Everything is on the topic before the materializer starts, so the poisoned records arrive
    // in the middle of their partitions' first batches. One record per send: its metadata says
    // where it landed.
    const producer = new EventProducer(stack.kafka);
    await producer.connect();
    stack.defer(() => producer.disconnect());
    const codec = await stack.serde.codec(topic, 'listing');
    const send = async (event: Listing): Promise<Placed> => {
      const { metadata, rejected } = await producer.send(codec, [event]);
      expect(rejected).toEqual([]);
      const p = { event, partition: metadata[0]!.partition, offset: Number(metadata[0]!.baseOffset) };
      placed.push(p);
      return p;
    };
    for (let i = 0; i < 10; i++) await send(listing(i));
    nul = await send(listing(900, { market_hash_name: 'AK-47 | Redline\u0000 (Field-Tested)' }));
    // numeric(20, 2) holds 18 integer digits: a valid positive decimal string, refused by SQL (22003).
    overflow = await send(listing(901, { price: '1000000000000000000.00' }));
    // Enough records after the poisoned ones that some land behind each on its partition.
    const behind = (poison: Placed) =>
      placed.filter((p) => p.partition === poison.partition && p.offset > poison.offset);
    for (let i = 10; i < 300 && (behind(nul).length < 5 || behind(overflow).length < 5); i++) await send(listing(i));

    materializer = new Materializer(
      { groupId, topicSuffix: suffix, migrationsDir: MIGRATIONS_DIR, heartbeatIntervalMs: 250 },
      { kafka: stack.kafka, serde: stack.serde, pool, logger: createLogger('materializer', 'silent'), metrics },
    );
    await materializer.start();
    stack.defer(() => materializer.stop());
    const server = await metrics.serve('127.0.0.1', 0);
    stack.defer(server.close);
    metricsUrl = server.url;
  }, 120_000);
  afterAll(() => stack.cleanup());

  const good = () => placed.filter((p) => p !== nul && p !== overflow);

  it('applies every record around the poisoned ones and moves each partition past them', async () => {
    const ends = new Map<number, number>();
    for (const p of placed) ends.set(p.partition, Math.max(ends.get(p.partition) ?? 0, p.offset + 1));
    await until('stored offsets at the partition ends', async () => {
      const { rows } = await pool.query<{ partition: number; next_offset: string }>(
        'SELECT partition, next_offset FROM consumer_offsets WHERE group_id = $1 AND topic = $2',
        [groupId, topic],
      );
      const at = new Map(rows.map((r) => [r.partition, Number(r.next_offset)]));
      return [...ends].every(([partition, end]) => at.get(partition) === end) ? true : undefined;
    });

    const { rows } = await pool.query<{ market_hash_name: string; price: string }>(
      `SELECT market_hash_name, price::text FROM listings_current WHERE cycle_id = 'cn-a:LISTINGS:poison'`,
    );
    const got = new Map(rows.map((r) => [r.market_hash_name, r.price]));
    expect(got.size).toBe(good().length);
    for (const p of good()) expect(got.get(p.event.market_hash_name), p.event.market_hash_name).toBe(p.event.price);
    // Not vacuous: records behind each poisoned one on its own partition were applied.
    for (const poison of [nul, overflow]) {
      const behind = good().filter((p) => p.partition === poison.partition && p.offset > poison.offset);
      expect(behind.length).toBeGreaterThan(0);
      for (const p of behind) expect(got.has(p.event.market_hash_name)).toBe(true);
    }
  });

  it('keeps each poisoned record in dead_letters with its position, SQLSTATE and error', async () => {
    const { rows } = await pool.query(
      `SELECT topic, partition, "offset"::int AS offset, key, reason, sqlstate, error
       FROM dead_letters ORDER BY partition, "offset"`,
    );
    const want = [nul, overflow]
      .sort((a, b) => a.partition - b.partition || a.offset - b.offset)
      .map((p) => expect.objectContaining({ topic, partition: p.partition, offset: p.offset, reason: 'sql' }));
    expect(rows).toEqual(want);
    const byOffset = (p: Placed) => rows.find((r) => r.partition === p.partition && r.offset === p.offset);
    expect(byOffset(nul)).toMatchObject({ sqlstate: '22021', error: expect.stringContaining('0x00') });
    expect(byOffset(nul)?.key).toContain('Redline\\u0000');
    expect(byOffset(overflow)).toMatchObject({ sqlstate: '22003', error: expect.stringContaining('numeric') });
  });

  it('isolates within the first delivery: no batch fails, nothing is retried, no record is dead-lettered twice', async () => {
    // Give a redelivery loop (the old behaviour) time to show.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(materializer.state).toBe('consuming');
    const text = await (await fetch(metricsUrl)).text();
    expect(text).not.toMatch(new RegExp(`materializer_batches_failed_total\\{topic="${topic}"\\} [1-9]`));
    expect(text).toMatch(new RegExp(`materializer_batches_isolated_total\\{topic="${topic}"\\} [12]\\n`));
    const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM dead_letters');
    expect(rows[0]?.n).toBe(2);
  });

  it('a poll-cycle marker stamps wall-clock freshness', async () => {
    const last = new Map<number, number>();
    for (const p of placed) last.set(p.partition, Math.max(last.get(p.partition) ?? 0, p.offset));
    const marker: EventMap['pollCycle'] = {
      ...SAMPLES.pollCycle,
      market: 'cn-a',
      cycle_id: 'cn-a:LISTINGS:poison',
      mode: 'DELTA',
      outcome: 'COMPLETE',
      error: null,
      data_topic: topic,
      end_offsets: [...last].map(([partition, offset]) => ({ partition, offset })),
    };
    const producer = new EventProducer(stack.kafka);
    await producer.connect();
    await producer.send(await stack.serde.codec(`${topicFor('pollCycle').name}${suffix}`, 'pollCycle'), [marker]);
    await producer.disconnect();
    const row = await until('freshness row', async () => {
      const { rows } = await pool.query<{
        last_applied_at: Date;
        last_complete_applied_at: Date;
        last_outcome: string;
      }>(`SELECT last_applied_at, last_complete_applied_at, last_outcome FROM market_freshness WHERE market = 'cn-a'`);
      return rows[0];
    });
    expect(row.last_outcome).toBe('COMPLETE');
    for (const t of [row.last_applied_at, row.last_complete_applied_at]) {
      expect(t.getTime()).toBeGreaterThanOrEqual(startedAt - 1_000);
      expect(t.getTime()).toBeLessThanOrEqual(Date.now() + 1_000);
    }
  });

  it('writes a heartbeat row with lag 0 per assigned partition once caught up', async () => {
    const row = await until('caught-up heartbeat', async () => {
      const { rows } = await pool.query(
        `SELECT member_id, group_id, state, pid, lag::int AS lag, lag_by_partition, last_batch_at, heartbeat_at,
                now() - heartbeat_at < interval '5 seconds' AS recent
         FROM materializer_heartbeat`,
      );
      const r = rows[0];
      return r && r.lag === 0 && r.recent && (r.lag_by_partition as unknown[]).length > 0 ? r : undefined;
    });
    expect(row).toMatchObject({
      member_id: materializer.memberId,
      group_id: groupId,
      state: 'consuming',
      pid: process.pid,
    });
    expect(row.last_batch_at).toBeInstanceOf(Date);
    const parts = row.lag_by_partition as {
      topic: string;
      partition: number;
      end: number;
      next: number;
      lag: number;
    }[];
    for (const partition of new Set(placed.map((p) => p.partition))) {
      const end = Math.max(...placed.filter((p) => p.partition === partition).map((p) => p.offset)) + 1;
      expect(parts).toContainEqual({ topic, partition, end, next: end, lag: 0 });
    }
  });

  it('serves /metrics with the lag per partition, dead letters per topic and the derive path', async () => {
    // The marker's transaction has committed (the freshness row above); the second look and the
    // recomputation follow it in transactions of their own, so wait for the last of them.
    const text = await until('the derive path in /metrics', async () => {
      const t = await (await fetch(metricsUrl)).text();
      return /materializer_derive_duration_seconds_count\{step="recompute"\} [1-9]/.test(t) ? t : undefined;
    });
    expect(text).toContain(`materializer_dead_letters_total{topic="${topic}",reason="sql"} 2`);
    expect(text).toContain(`materializer_dead_letters_total{topic="${topic}",reason="decode"} 0`);
    for (const partition of new Set(placed.map((p) => p.partition)))
      expect(text).toContain(`materializer_consumer_lag{topic="${topic}",partition="${partition}"} 0`);
    expect(text).toContain(`materializer_records_applied_total{topic="${topic}"} ${good().length}`);
    expect(text).toMatch(new RegExp(`materializer_batch_apply_duration_seconds_count\\{topic="${topic}"\\} [1-9]`));
    expect(text).toMatch(/materializer_derive_duration_seconds_count\{step="markers"\} [1-9]/);
    expect(text).toMatch(/materializer_derive_duration_seconds_count\{step="recompute"\} [1-9]/);
    expect(text).toContain('materializer_markers_applied_total 1');
    expect(text).toMatch(/materializer_heartbeat_timestamp_seconds \d/);
  });

  it('a replay dead-letters the same records and builds the same tables', async () => {
    await materializer.stop();
    const live = await tableChecksums(pool);
    expect(live.dead_letters?.rows).toBe(2);
    const result = await replay(
      {
        databaseUrl: stack.env.databaseUrl,
        schema,
        groupId,
        topicSuffix: suffix,
        migrationsDir: MIGRATIONS_DIR,
        hourlyRetentionDays: 100,
        swap: false,
        target: `${schema}_rb`,
      },
      { kafka: stack.kafka, serde: stack.serde, logger: createLogger('replay', 'silent') },
    );
    expect(result.checksums).toEqual(live);
  });
});

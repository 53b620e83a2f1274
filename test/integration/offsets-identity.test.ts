/**
 * Stored offsets that cannot lie, against the real Kafka and PostgreSQL. Root cause (issue 12):
 * consumer_offsets did not know which Kafka cluster it counted records of. A read-model schema
 * whose offsets came from another cluster (after `make clean`, or a changed KAFKA_BROKERS)
 * silently skipped every record below them — 8,091 listing records read, lag 0, nothing applied,
 * nothing logged. Now such offsets stop the materializer with `offsets_mismatch` before anything
 * is consumed, on a partition assignment, or inside a batch; rows from before the cluster id
 * existed are adopted; `make reset-offsets` gets an operator out.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { AppError } from '@skinprices/domain';
import { EventConsumer, EventProducer, topicFor, type EventMap } from '@skinprices/events';
import {
  MATERIALIZED_KINDS,
  Materializer,
  MIGRATIONS_DIR,
  planOffsetReset,
  resetStoredOffsets,
  schemaLockSql,
} from '@skinprices/materializer';
import { createLogger } from '@skinprices/runtime';
import { migrate, type Pool } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectTopics, startMaterializer } from '../support/pipeline.js';
import { SAMPLES } from '../support/samples.js';
import { TestStack } from '../support/stack.js';

const run = promisify(execFile);

describe('stored offsets carry their Kafka cluster', () => {
  const stack = new TestStack();
  let suffix: string;
  let listings: string;
  let clusterId: string;
  /** Records per partition of the (fresh) listings topic: its end offsets. */
  const ends = new Map<number, number>();
  const names: string[] = [];

  beforeAll(async () => {
    suffix = await projectTopics(stack);
    listings = `${topicFor('listing').name}${suffix}`;
    const admin = stack.kafka.admin();
    await admin.connect();
    clusterId = (await admin.describeCluster()).clusterId;
    await admin.disconnect();
    const producer = new EventProducer(stack.kafka);
    await producer.connect();
    const codec = await stack.serde.codec(listings, 'listing');
    const events: EventMap['listing'][] = [];
    for (let i = 0; i < 12; i++) {
      const name = `AK-47 | Redline (Field-Tested) #${i}`;
      names.push(name);
      events.push({ ...SAMPLES.listing, market_hash_name: name, phase: '', price: `${10 + i}.00` });
    }
    await producer.send(codec, events);
    await producer.disconnect();
    await readEnds();
  }, 60_000);
  afterAll(() => stack.cleanup());

  async function readEnds(): Promise<void> {
    const admin = stack.kafka.admin();
    await admin.connect();
    for (const o of await admin.fetchTopicOffsets(listings)) ends.set(o.partition, Number(o.high));
    await admin.disconnect();
  }

  /** Every listings partition of `groupId` stored with `next` and `cluster` (rows made where missing). */
  async function storeAll(pool: Pool, groupId: string, next: (end: number) => number, cluster: string): Promise<void> {
    for (const [partition, end] of ends)
      await pool.query(
        `INSERT INTO consumer_offsets (group_id, topic, partition, next_offset, cluster_id) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (group_id, topic, partition) DO UPDATE SET next_offset = excluded.next_offset, cluster_id = excluded.cluster_id`,
        [groupId, listings, partition, next(end), cluster],
      );
  }

  /** A migrated schema whose consumer_offsets hold `rows` for a fresh group. */
  async function schemaWith(
    rows: { partition: number; next: number; cluster: string | null; topic?: string }[],
  ): Promise<{ pool: Pool; groupId: string }> {
    const { pool } = await stack.schema();
    await migrate(pool, MIGRATIONS_DIR);
    const groupId = stack.groupId();
    for (const r of rows)
      await pool.query(
        'INSERT INTO consumer_offsets (group_id, topic, partition, next_offset, cluster_id) VALUES ($1, $2, $3, $4, $5)',
        [groupId, r.topic ?? listings, r.partition, r.next, r.cluster],
      );
    return { pool, groupId };
  }

  function materializer(pool: Pool, groupId: string): Materializer {
    return new Materializer(
      { groupId, topicSuffix: suffix, migrationsDir: MIGRATIONS_DIR },
      { kafka: stack.kafka, serde: stack.serde, pool, logger: createLogger('materializer', 'silent') },
    );
  }

  const listed = async (pool: Pool): Promise<number> =>
    (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM listings_current')).rows[0]!.n;

  async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = await probe();
      if (v !== undefined) return v;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** The partition holding the most of the test's records (at least two of twelve). */
  const busiest = (): number => [...ends].sort((a, b) => b[1] - a[1])[0]![0];

  it('offsets from another cluster: start() rejects with offsets_mismatch naming the row, nothing is applied', async () => {
    const p = busiest();
    const { pool, groupId } = await schemaWith([{ partition: p, next: 0, cluster: 'a-cluster-that-was-cleaned' }]);
    const m = materializer(pool, groupId);
    const err = await m.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    await m.stop();
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: 'offsets_mismatch', retryable: false });
    const message = (err as AppError).message;
    expect(message).toContain(
      `${listings}[${p}] stored next_offset 0 counts records of Kafka cluster a-cluster-that-was-cleaned`,
    );
    expect(message).toContain(`connected to cluster ${clusterId}`);
    expect(message).toContain('make reset-offsets');
    expect(m.state).toBe('failed');
    expect(await listed(pool)).toBe(0);
    const { rows } = await pool.query('SELECT partition, next_offset::int AS next, cluster_id FROM consumer_offsets');
    expect(rows).toEqual([{ partition: p, next: 0, cluster_id: 'a-cluster-that-was-cleaned' }]);
  });

  it('a stored next_offset beyond the partition end (the make-clean probe: 8,091): start() rejects, nothing applied', async () => {
    const p = busiest();
    const end = ends.get(p)!;
    const { pool, groupId } = await schemaWith([
      { partition: p, next: 8_091, cluster: null },
      { partition: (p + 1) % ends.size, next: 0, cluster: clusterId },
    ]);
    const m = materializer(pool, groupId);
    await expect(m.start()).rejects.toMatchObject({
      code: 'offsets_mismatch',
      message: expect.stringContaining(
        `${listings}[${p}] stored next_offset 8091 is past the partition's end offset ${end}`,
      ),
    });
    await m.stop();
    expect(await listed(pool)).toBe(0);
    // Refused rows are not adopted either.
    const { rows } = await pool.query('SELECT cluster_id FROM consumer_offsets WHERE partition = $1', [p]);
    expect(rows).toEqual([{ cluster_id: null }]);
  });

  it('a Kafka group that committed nothing starts at the stored offsets, not at the start of the log', async () => {
    // A read model that has applied every listing record, and a Kafka group new to it (the other
    // kinds' lane's group on the first start after the lanes came, or a group Kafka expired).
    const { pool, groupId } = await schemaWith(
      [...ends].map(([partition, end]) => ({ partition, next: end, cluster: clusterId })),
    );
    const m = materializer(pool, groupId);
    let reread = 0;
    m.onBatch((r) => {
      if (r.topic === listings) reread += r.skipped + r.applied;
    });
    await m.start();
    try {
      const admin = stack.kafka.admin();
      await admin.connect();
      const committed = await admin.fetchOffsets({ groupId, topics: [listings] });
      await admin.disconnect();
      const kafkaOffsets = new Map(committed[0]!.partitions.map((p) => [p.partition, Number(p.offset)]));
      for (const [partition, end] of ends) if (end > 0) expect(kafkaOffsets.get(partition)).toBe(end);
      // Long enough for a fetch from the log's start to have come back with every record.
      await new Promise((r) => setTimeout(r, 3_000));
      expect(reread).toBe(0);
      expect(await listed(pool)).toBe(0);
    } finally {
      await m.stop();
    }
  });

  it('rows from before migration 0004 (no cluster id) that fit are adopted on start, and consumption continues after them', async () => {
    const p = busiest();
    const { pool, groupId } = await schemaWith([{ partition: p, next: 1, cluster: null }]);
    const m = await startMaterializer(stack, suffix, pool, { groupId });
    const { rows } = await pool.query<{ cluster_id: string; bound_at: Date | null }>(
      'SELECT cluster_id, bound_at FROM consumer_offsets WHERE partition = $1',
      [p],
    );
    expect(rows[0]?.cluster_id).toBe(clusterId);
    expect(rows[0]?.bound_at).toBeInstanceOf(Date);
    // Offset 0 of that partition counted as applied (the legacy row said so); everything else is.
    await until('all but one record applied', async () =>
      (await listed(pool)) === names.length - 1 ? true : undefined,
    );
    const bound = await pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM consumer_offsets WHERE group_id = $1 AND cluster_id IS DISTINCT FROM $2',
      [groupId, clusterId],
    );
    expect(bound.rows[0]?.n).toBe(0);
    expect(m.state).toBe('consuming');
  });

  it('a row rebound to another cluster while running stops the materializer at its next batch, which is not applied', async () => {
    const { pool } = await stack.schema();
    const groupId = stack.groupId();
    const m = await startMaterializer(stack, suffix, pool, { groupId });
    await until('caught up', async () => ((await listed(pool)) === names.length ? true : undefined));
    const fatal = new Promise<AppError>((resolve) => m.onFatal(resolve));
    // Another process pointed at another cluster took the rows over (or someone edited them);
    // every partition has a row, so the next record meets one wherever it lands.
    await storeAll(pool, groupId, (end) => end, 'elsewhere');
    const producer = new EventProducer(stack.kafka);
    await producer.connect();
    const late = { ...SAMPLES.listing, market_hash_name: 'AWP | Asiimov (Field-Tested)', phase: '', price: '99.00' };
    await producer.send(await stack.serde.codec(listings, 'listing'), [late]);
    await producer.disconnect();
    const err = await fatal;
    await readEnds();
    expect(err).toMatchObject({
      code: 'offsets_mismatch',
      message: expect.stringContaining('Kafka cluster elsewhere'),
    });
    expect(m.state).toBe('failed');
    const { rows } = await pool.query('SELECT 1 FROM listings_current WHERE market_hash_name = $1', [
      late.market_hash_name,
    ]);
    expect(rows).toEqual([]);
    names.push(late.market_hash_name);
  });

  it('a partition assignment re-checks: an offset moved past the end stops the materializer on the rebalance', async () => {
    const { pool } = await stack.schema();
    const groupId = stack.groupId();
    const m = await startMaterializer(stack, suffix, pool, { groupId, sessionTimeoutMs: 6_000 });
    await until('caught up', async () => ((await listed(pool)) === names.length ? true : undefined));
    const fatal = new Promise<AppError>((resolve) => m.onFatal(resolve));
    // Every listings partition past its end, so whichever the materializer keeps has one.
    await storeAll(pool, groupId, () => 1_000_000, clusterId);
    // A second member on the same topics joins the group: Kafka rebalances, and the
    // materializer's new assignment is checked at once (no batch needed: none will come).
    const codecs = await Promise.all(
      MATERIALIZED_KINDS.map((k) => stack.serde.codec(`${topicFor(k).name}${suffix}`, k)),
    );
    const other = new EventConsumer(stack.kafka, codecs, { groupId, autoCommit: false, sessionTimeoutMs: 6_000 });
    await other.start(async () => undefined);
    const err = await fatal.finally(() => other.stop());
    expect(err).toMatchObject({
      code: 'offsets_mismatch',
      message: expect.stringMatching(
        new RegExp(
          `${listings.replaceAll('.', '\\.')}\\[\\d\\] stored next_offset 1000000 is past the partition's end offset`,
        ),
      ),
    });
    expect(m.state).toBe('failed');
  }, 90_000);

  it('make reset-offsets shows the rows and changes nothing without --yes; with --yes the next start applies everything', async () => {
    const p = busiest();
    const { pool, groupId } = await schemaWith([{ partition: p, next: 3, cluster: 'old-cluster' }]);
    const schema = (await pool.query<{ s: string }>('SELECT current_schema() AS s')).rows[0]!.s;
    const plan = await planOffsetReset(pool, stack.kafka, groupId);
    expect(plan.clusterId).toBe(clusterId);
    expect(plan.rows).toEqual([
      expect.objectContaining({ topic: listings, partition: p, mismatch: expect.stringContaining('old-cluster') }),
    ]);
    const env = {
      ...process.env,
      KAFKA_BROKERS: stack.env.brokers,
      DATABASE_URL: stack.env.databaseUrl,
      DATABASE_SCHEMA: schema,
      GROUP_ID: groupId,
      LOG_LEVEL: 'warn',
    };
    const cli = ['--import', 'tsx', 'services/materializer/src/reset-offsets-main.ts'];
    const dry = await run('node', cli, { env }).then(
      () => ({ code: 0, stdout: '' }),
      (e: { code: number; stdout: string }) => e,
    );
    expect(dry.code).toBe(2);
    expect(dry.stdout).toContain('counts records of Kafka cluster old-cluster');
    expect(dry.stdout).toContain('--yes');
    expect((await pool.query('SELECT 1 FROM consumer_offsets')).rowCount).toBe(1);

    const yes = await run('node', [...cli, '--yes'], { env });
    expect(yes.stdout).toContain('1 stored offsets, 1 not matching');
    expect((await pool.query('SELECT 1 FROM consumer_offsets')).rowCount).toBe(0);

    await startMaterializer(stack, suffix, pool, { groupId });
    await until('every record applied', async () => ((await listed(pool)) === names.length ? true : undefined));
  }, 90_000);

  it('reset is refused while a materializer runs on the schema', async () => {
    const { pool } = await stack.schema();
    const groupId = stack.groupId();
    await startMaterializer(stack, suffix, pool, { groupId });
    await expect(
      resetStoredOffsets(pool, stack.kafka, { groupId, lockSql: schemaLockSql('current_schema()') }),
    ).rejects.toMatchObject({ code: 'busy' });
  });
});

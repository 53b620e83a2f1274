/**
 * Listings first (services/materializer/src/priority.ts) against the real broker and PostgreSQL:
 * with a backlog of late listings, the materializer pauses the other data topics; sales sent
 * meanwhile wait until the listings have caught up, then flow; every record of both topics is
 * applied once.
 */
import { EventProducer, topicFor, type EventKind, type EventMap } from '@skinprices/events';
import { DEFAULT_PRIORITY, Materializer, MIGRATIONS_DIR, type BatchReport } from '@skinprices/materializer';
import { createLogger } from '@skinprices/runtime';
import type { Pool } from '@skinprices/store';
import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectTopics } from '../support/pipeline.js';
import { SAMPLES } from '../support/samples.js';
import { TestStack } from '../support/stack.js';

/** Several batches per listings partition (kafkajs fetches at most 1 MiB of each). */
const LISTINGS = 150_000;
const SALES = 24_000;

describe('materializer: listings first', () => {
  const stack = new TestStack();
  let suffix: string;
  let pool: Pool;
  let producer: EventProducer;
  let admin: Admin;
  const topic = (k: EventKind) => `${topicFor(k).name}${suffix}`;

  async function send<K extends EventKind>(kind: K, events: EventMap[K][]): Promise<void> {
    const codec = await stack.serde.codec(topic(kind), kind);
    for (let i = 0; i < events.length; i += 4_000) {
      const { rejected } = await producer.send(codec, events.slice(i, i + 4_000));
      expect(rejected).toEqual([]);
    }
  }

  beforeAll(async () => {
    suffix = await projectTopics(stack);
    ({ pool } = await stack.schema());
    producer = new EventProducer(stack.kafka);
    await producer.connect();
    admin = stack.kafka.admin();
    await admin.connect();
    stack.defer(async () => {
      await producer.disconnect();
      await admin.disconnect();
    });
  }, 60_000);
  afterAll(() => stack.cleanup());

  it('sales sent while the listings are behind wait for them, then flow; nothing lost or doubled', async () => {
    const at = Date.UTC(2026, 10, 27, 1, 0, 0);
    await send(
      'listing',
      Array.from({ length: LISTINGS }, (_, i) => ({
        ...SAMPLES.listing,
        market_hash_name: `Item ${i}`,
        phase: '',
        stattrak: false,
        exterior: null,
        price: `${1 + (i % 900)}.${String(i % 100).padStart(2, '0')}`,
        observed_at: at,
        cycle_id: 'cn-a:LISTINGS:1',
      })),
    );

    // Records produced 2 s before the materializer starts are late by then: the listings are behind.
    await new Promise((r) => setTimeout(r, 2_000));
    const groupId = stack.groupId();
    const materializer = new Materializer(
      {
        groupId,
        topicSuffix: suffix,
        migrationsDir: MIGRATIONS_DIR,
        listingsFirst: {
          ...DEFAULT_PRIORITY,
          pauseAfterMs: 1_000,
          idleMs: 1_500,
          maxPauseMs: 120_000,
          minFlowMs: 0,
        },
      },
      { kafka: stack.kafka, serde: stack.serde, pool, logger: createLogger('materializer', 'silent') },
    );
    const reports: BatchReport[] = [];
    materializer.onBatch((r) => reports.push(r));
    await materializer.start();
    stack.defer(() => materializer.stop());
    // Once the listings are known to be behind, sales arrive: they wait.
    const paused = Date.now() + 60_000;
    while (materializer.listingsFirst?.phase !== 'listings-first' && Date.now() < paused)
      await new Promise((r) => setTimeout(r, 5));
    expect(materializer.listingsFirst?.phase).toBe('listings-first');
    const salesFrom = reports.length;
    await send(
      'sale',
      Array.from({ length: SALES }, (_, i) => ({
        ...SAMPLES.sale,
        sale_id: `s-${i}`,
        market_hash_name: `Item ${i % 5_000}`,
        sold_at: at - i * 1_000,
        observed_at: at,
      })),
    );

    // Until both topics are in (the stored offsets reach their ends).
    const ends = new Map<string, number>();
    for (const t of [topic('listing'), topic('sale')])
      for (const o of await admin.fetchTopicOffsets(t)) ends.set(`${t}:${o.partition}`, Number(o.high));
    const deadline = Date.now() + 120_000;
    for (;;) {
      const { rows } = await pool.query<{ at: string; next: string }>(
        `SELECT topic || ':' || partition AS at, next_offset AS next FROM consumer_offsets WHERE group_id = $1`,
        [groupId],
      );
      const next = new Map(rows.map((r) => [r.at, Number(r.next)]));
      if ([...ends].every(([k, end]) => end === 0 || (next.get(k) ?? 0) >= end)) break;
      if (Date.now() > deadline) throw new Error('the backlog was not applied within 120 s');
      await new Promise((r) => setTimeout(r, 200));
    }

    const listingsAfterSales = reports.slice(salesFrom).filter((r) => r.topic === topic('listing')).length;
    // Every record once.
    const counted = await pool.query<{ listings: number; sales: number }>(
      `SELECT (SELECT count(*)::int FROM listings_current WHERE market = 'cn-a') AS listings,
              (SELECT count(*)::int FROM sales) AS sales`,
    );
    expect(counted.rows[0]).toEqual({ listings: LISTINGS, sales: SALES });
    const applied = (t: string) => reports.filter((r) => r.topic === t).reduce((n, r) => n + r.applied, 0);
    expect(applied(topic('listing'))).toBe(LISTINGS);
    expect(applied(topic('sale'))).toBe(SALES);

    // The sales waited: none applied before the last listings batch, though the listings were
    // still coming in when they were sent (else this test proves nothing).
    expect(listingsAfterSales).toBeGreaterThan(0);
    const lastListing = reports.map((r) => r.topic).lastIndexOf(topic('listing'));
    expect(reports.slice(0, lastListing).filter((r) => r.topic === topic('sale'))).toEqual([]);
    expect(materializer.listingsFirst?.pauses).toBeGreaterThan(0);
    expect(materializer.listingsFirst?.phase).toBe('flowing');
  }, 180_000);
});

/**
 * Markers that cannot lie, against the real Kafka, registry and PostgreSQL. Root cause (issue
 * 12): during a broker outage pollers sent poll-cycle markers with empty end_offsets (the fetch
 * failed, the marker went anyway, COMPLETE), and the materializer reads an empty list as "already
 * consumed": for a FULL cycle it would null every row whose record is still in flight and publish
 * phantom removals on price-changes.v1.
 *
 * The broker is not stopped here: the stack's single broker is shared with every other test
 * running. The poller's outage is injected where it bites, at the admin client's offset fetch
 * after the cycle's records were sent (a broker lost mid-cycle, between the last send and the
 * marker); the materializer half produces the lying marker itself.
 */
import { getMarket } from '@skinprices/domain';
import { EventProducer, topicFor, type EventMap, type PollCycleEvent } from '@skinprices/events';
import { UpstreamClient, type Kind } from '@skinprices/marketplaces';
import { Poller, PollerMetrics } from '@skinprices/poller';
import { createLogger } from '@skinprices/runtime';
import type { Pool } from '@skinprices/store';
import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAST, projectTopics, startMaterializer, startSimulator, untilApplied, type Sim } from '../support/pipeline.js';
import { SAMPLES } from '../support/samples.js';
import { TestStack } from '../support/stack.js';

type Listing = EventMap['listing'];

describe('a COMPLETE marker without end offsets removes nothing', () => {
  const stack = new TestStack();
  let suffix: string;
  let pool: Pool;
  let producer: EventProducer;
  let admin: Admin;
  const t0 = Date.UTC(2026, 10, 20, 12);
  const items = ['AK-47 | Redline (Field-Tested)', 'AWP | Asiimov (Field-Tested)', 'M4A4 | Howl (Minimal Wear)'];

  beforeAll(async () => {
    suffix = await projectTopics(stack);
    ({ pool } = await stack.schema());
    await startMaterializer(stack, suffix, pool);
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

  const topic = (k: 'listing' | 'pollCycle'): string => `${topicFor(k).name}${suffix}`;

  /** Sends a cycle's listings, then its marker; `offsets: 'real'` attaches the topic's ends. */
  async function cycle(
    n: number,
    names: readonly string[],
    marker: Partial<PollCycleEvent> & { offsets: 'real' | 'none' },
  ): Promise<PollCycleEvent> {
    const cycleId = `cn-a:LISTINGS:${n}`;
    const at = t0 + n * 60_000;
    const events: Listing[] = names.map((name, i) => ({
      ...SAMPLES.listing,
      market_hash_name: name,
      phase: '',
      price: `${100 + n}.${String(i).padStart(2, '0')}`,
      observed_at: at,
      cycle_id: cycleId,
    }));
    if (events.length > 0) await producer.send(await stack.serde.codec(topic('listing'), 'listing'), events);
    const ends = (await admin.fetchTopicOffsets(topic('listing')))
      .filter((o) => Number(o.high) > 0)
      .map((o) => ({ partition: o.partition, offset: Number(o.high) - 1 }));
    const { offsets, ...rest } = marker;
    const m: PollCycleEvent = {
      ...SAMPLES.pollCycle,
      market: 'cn-a',
      kind: 'LISTINGS',
      cycle_id: cycleId,
      mode: 'FULL',
      outcome: 'COMPLETE',
      error: null,
      started_at: at - 1_000,
      finished_at: at + 1_000,
      items_seen: names.length,
      events_emitted: names.length,
      data_topic: topic('listing'),
      end_offsets: offsets === 'real' ? ends : [],
      ...rest,
    };
    await producer.send(await stack.serde.codec(topic('pollCycle'), 'pollCycle'), [m]);
    await untilApplied(pool, cycleId);
    return m;
  }

  async function priced(): Promise<string[]> {
    // The records of a cycle whose marker went first may still be arriving: wait for the rows.
    await new Promise((r) => setTimeout(r, 300));
    const { rows } = await pool.query<{ name: string }>(
      `SELECT market_hash_name AS name FROM listings_current WHERE market = 'cn-a' AND price IS NOT NULL ORDER BY 1`,
    );
    return rows.map((r) => r.name);
  }

  async function freshness(): Promise<string> {
    const { rows } = await pool.query<{ o: string }>(
      `SELECT last_outcome AS o FROM market_freshness WHERE market = 'cn-a' AND kind = 'LISTINGS'`,
    );
    return rows[0]!.o;
  }

  async function removals(): Promise<number> {
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM price_change_outbox WHERE new_price IS NULL`,
    );
    return rows[0]!.n;
  }

  it('a complete FULL cycle with its offsets lists every item', async () => {
    await cycle(1, items, { offsets: 'real' });
    expect(await priced()).toEqual([...items].sort());
    expect(await freshness()).toBe('COMPLETE');
  });

  it('a COMPLETE FULL marker with empty end_offsets after its data nulls nothing and publishes no removal', async () => {
    await cycle(2, items.slice(0, 1), { offsets: 'none' });
    expect(await priced()).toEqual([...items].sort());
    expect(await removals()).toBe(0);
    expect(await freshness()).toBe('PARTIAL');
  });

  it('a COMPLETE FULL marker that saw no items (an empty answer) nulls nothing either', async () => {
    await cycle(3, [], { offsets: 'real' });
    expect(await priced()).toEqual([...items].sort());
    expect(await removals()).toBe(0);
    expect(await freshness()).toBe('PARTIAL');
  });

  it('control: the same cycle with its end offsets does null what it did not see', async () => {
    await cycle(4, items.slice(0, 1), { offsets: 'real' });
    expect(await priced()).toEqual([items[0]]);
    expect(await removals()).toBe(2);
    expect(await freshness()).toBe('COMPLETE');
  });
});

describe('a poller that cannot fetch end offsets does not say COMPLETE', () => {
  const stack = new TestStack();
  let sim: Sim;
  let suffix: string;

  beforeAll(async () => {
    sim = await startSimulator(stack, 200);
    suffix = await projectTopics(stack);
  }, 60_000);
  afterAll(() => stack.cleanup());

  /** A poller for cn-a whose admin client's offset fetch is `fetchTopicOffsets`. */
  async function poller(
    fetchTopicOffsets: (real: Admin['fetchTopicOffsets'], topic: string) => ReturnType<Admin['fetchTopicOffsets']>,
  ) {
    const client = new UpstreamClient({
      baseUrl: sim.running.marketUrls['cn-a'],
      market: 'cn-a',
      deadlineMs: 10_000,
      headersTimeoutMs: 5_000,
    });
    const producer = new EventProducer(stack.kafka);
    await producer.connect();
    const real = stack.kafka.admin();
    await real.connect();
    const admin: Admin = {
      ...real,
      fetchTopicOffsets: ((topic: string) =>
        fetchTopicOffsets(real.fetchTopicOffsets, topic)) as Admin['fetchTopicOffsets'],
    };
    const intervals: Partial<Record<Kind, number>> = { LISTINGS: 3_600_000 };
    const p = new Poller(
      { ...FAST, market: getMarket('cn-a'), intervals, topicSuffix: suffix },
      {
        client,
        producer,
        serde: stack.serde,
        admin,
        logger: createLogger('poller', 'silent'),
        metrics: new PollerMetrics(),
      },
    );
    stack.defer(async () => {
      await p.stop();
      await producer.disconnect();
      await real.disconnect();
      await client.close();
    });
    return p;
  }

  it('the offset fetch fails after the cycle sent its records (broker lost mid-cycle): the marker is PARTIAL, not COMPLETE', async () => {
    let calls = 0;
    const p = await poller(() => {
      calls++;
      return Promise.reject(new Error('Connection error: connect ECONNREFUSED 127.0.0.1:9092'));
    });
    const { marker } = await p.runOnce('LISTINGS');
    expect(marker.events_emitted).toBeGreaterThan(0);
    expect(marker).toMatchObject({
      mode: 'FULL',
      outcome: 'PARTIAL',
      end_offsets: [],
      error: expect.stringContaining('end offsets of the data topic unknown (fetching them failed: Connection error'),
    });
    expect(calls).toBe(3);
  });

  it('an answer that names no partition is no answer either', async () => {
    const p = await poller(() => Promise.resolve([]));
    const { marker } = await p.runOnce('LISTINGS');
    expect(marker).toMatchObject({
      outcome: 'PARTIAL',
      error: expect.stringContaining('Kafka reported no partitions'),
    });
  });

  it('a fetch that fails once is retried: COMPLETE with the real end offsets', async () => {
    let calls = 0;
    const p = await poller((real, topic) => {
      calls++;
      return calls === 1 ? Promise.reject(new Error('broker away')) : real(topic);
    });
    const { marker } = await p.runOnce('LISTINGS');
    expect(marker.outcome).toBe('COMPLETE');
    expect(marker.end_offsets.length).toBeGreaterThan(0);
    expect(calls).toBe(2);
  });
});

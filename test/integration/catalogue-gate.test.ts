/**
 * The catalogue gate (services/poller/src/catalogue-gate.ts) against the real broker and registry:
 * a marketplace without listings starts its backfill, and a listing marketplace the kinds other
 * than its listings, only once every listing marketplace has ended a LISTINGS cycle on
 * poll-cycles.v1 — markers sent before the gate started count (it reads the
 * topic from its beginning), other kinds do not — and the materializer's consumer group has
 * committed offsets past those cycles' records; or once its timeout has passed.
 */
import { EventProducer, topicFor, type PollCycleEvent } from '@skinprices/events';
import { CatalogueGate, type CycleResult, type GateReason } from '@skinprices/poller';
import { createLogger } from '@skinprices/runtime';
import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectTopics, startPoller, startSimulator } from '../support/pipeline.js';
import { TestStack } from '../support/stack.js';

const logger = createLogger('gate', 'silent');

describe('catalogue gate', () => {
  const stack = new TestStack();
  let suffix: string;
  let producer: EventProducer;
  let admin: Admin;
  /** Stands in for the materializer's group: the test commits its offsets as a consumer would. */
  const group = stack.groupId();
  const dataTopic = () => `listings.v1${suffix}`;
  const commit = (partition: number, offset: number, groupId = group) =>
    admin.setOffsets({ groupId, topic: dataTopic(), partitions: [{ partition, offset: String(offset) }] });

  /** Sends a marker of `market`'s `kind` cycle to the run's poll-cycles topic. */
  async function marker(
    market: string,
    kind: PollCycleEvent['kind'],
    ends: { partition: number; offset: number }[] = [],
  ): Promise<void> {
    const topic = `${topicFor('pollCycle').name}${suffix}`;
    const at = Date.now();
    const event: PollCycleEvent = {
      market,
      kind,
      cycle_id: `${market}:${kind}:${at}`,
      mode: 'FULL',
      started_at: at - 1_000,
      finished_at: at,
      items_seen: 1,
      events_emitted: 0,
      outcome: 'COMPLETE',
      error: null,
      data_topic: `listings.v1${suffix}`,
      end_offsets: ends,
    };
    const { rejected } = await producer.send(await stack.serde.codec(topic, 'pollCycle'), [event]);
    expect(rejected).toEqual([]);
  }

  function gate(markets: string[], timeoutMs: number, materializerGroup = group): CatalogueGate {
    const g = new CatalogueGate(
      { markets, timeoutMs, topicSuffix: suffix, owner: 'it', materializerGroup, offsetsEveryMs: 100 },
      { kafka: stack.kafka, admin, serde: stack.serde, logger },
    );
    stack.defer(() => g.stop());
    return g;
  }

  /** What the promise settled with within `ms`, or 'pending'. */
  const within = (p: Promise<GateReason>, ms: number) =>
    Promise.race([p, new Promise<'pending'>((r) => setTimeout(() => r('pending'), ms))]);

  beforeAll(async () => {
    suffix = await projectTopics(stack);
    producer = new EventProducer(stack.kafka);
    await producer.connect();
    stack.defer(() => producer.disconnect());
    admin = stack.kafka.admin();
    await admin.connect();
    stack.defer(() => admin.disconnect());
  });
  afterAll(() => stack.cleanup());

  it("opens once the last listing marketplace's LISTINGS cycle is ingested; earlier markers count, other kinds do not", async () => {
    await marker('cn-a', 'LISTINGS', [{ partition: 0, offset: 41 }]); // before the gate exists
    const g = gate(['cn-a', 'cn-b'], 120_000);
    const opened = g.wait();
    await marker('cn-b', 'SALES', [{ partition: 3, offset: 500 }]);
    await marker('hist-a', 'HISTORY');
    // The consumer has joined and read all three once cn-a is off the list.
    const deadline = Date.now() + 30_000;
    while (g.pending.includes('cn-a') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(g.pending).toEqual(['cn-b']);
    await marker('cn-b', 'LISTINGS', [{ partition: 1, offset: 7 }]);
    while (g.phase === 'waiting' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(g.phase).toBe('ingesting');
    // The materializer's group commits: partition 0 up to the end offset (not past it), then past.
    await commit(0, 41);
    await commit(1, 8);
    expect(await within(opened, 1_500)).toBe('pending');
    await commit(0, 42);
    expect(await within(opened, 30_000)).toBe('listed');
  });

  it('opens after its timeout when a marketplace never ends a cycle', async () => {
    const g = gate(['usd-6'], 1_500);
    const t0 = Date.now();
    expect(await within(g.wait(), 30_000)).toBe('timeout');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1_400);
    expect(g.phase).toBe('open');
    // Opened while its consumer was still joining the group: stop() waits for it to leave.
    await g.stop();
  });

  it("holds the history-only marketplace's backfill until the catalogue is in", async () => {
    const sim = await startSimulator(stack, 60);
    const g = gate(['eu-b'], 120_000);
    const { poller } = await startPoller(stack, sim, 'hist-a', suffix, { catalogue: g });
    const cycles: CycleResult[] = [];
    poller.onCycle((r) => cycles.push(r));
    poller.start();
    await new Promise((r) => setTimeout(r, 4_000));
    expect(cycles).toEqual([]);
    expect(poller.states()).toEqual({ HISTORY: 'idle' });
    await marker('eu-b', 'LISTINGS', [{ partition: 2, offset: 0 }]);
    const read = Date.now() + 30_000;
    while (g.phase === 'waiting' && Date.now() < read) await new Promise((r) => setTimeout(r, 100));
    // The marker is read, its record not yet ingested: still no history.
    expect(g.phase).toBe('ingesting');
    await new Promise((r) => setTimeout(r, 1_000));
    expect(cycles).toEqual([]);
    expect(poller.states()).toEqual({ HISTORY: 'idle' });
    await commit(2, 1);
    const deadline = Date.now() + 30_000;
    while (cycles.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(cycles[0]?.kind).toBe('HISTORY');
    expect(cycles[0]?.marker.outcome).toBe('COMPLETE');
  });

  it("holds a listing marketplace's other kinds after its own first listings until every marketplace's are in", async () => {
    const sim = await startSimulator(stack, 60);
    // A materializer group of its own: the earlier tests' commits do not count here.
    const mine = stack.groupId();
    const g = gate(['cn-c', 'usd-5'], 120_000, mine);
    const { poller } = await startPoller(stack, sim, 'cn-c', suffix, { catalogue: g });
    expect(poller.kinds.length).toBeGreaterThan(1);
    const cycles: CycleResult[] = [];
    poller.onCycle((r) => cycles.push(r));
    poller.start();
    const first = Date.now() + 30_000;
    while (cycles.length === 0 && Date.now() < first) await new Promise((r) => setTimeout(r, 100));
    expect(cycles.map((c) => [c.kind, c.marker.outcome])).toEqual([['LISTINGS', 'COMPLETE']]);
    const own = cycles[0]?.marker.end_offsets ?? [];
    expect(own.length).toBeGreaterThan(0);
    // Its own marker is read; usd-5's is missing: the other kinds wait.
    const seen = Date.now() + 30_000;
    while (g.pending.includes('cn-c') && Date.now() < seen) await new Promise((r) => setTimeout(r, 100));
    expect(g.pending).toEqual(['usd-5']);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(cycles.map((c) => c.kind)).toEqual(['LISTINGS']);
    for (const [kind, state] of Object.entries(poller.states()))
      expect([kind, state]).toEqual([kind, kind === 'LISTINGS' ? 'waiting' : 'idle']);
    await marker('usd-5', 'LISTINGS', [{ partition: 0, offset: 0 }]);
    // Every marker in, cn-c's own records not yet ingested by the group: still waiting.
    const read = Date.now() + 30_000;
    while (g.phase === 'waiting' && Date.now() < read) await new Promise((r) => setTimeout(r, 100));
    expect(g.phase).toBe('ingesting');
    await new Promise((r) => setTimeout(r, 1_000));
    expect(cycles.map((c) => c.kind)).toEqual(['LISTINGS']);
    // The group commits past usd-5's and cn-c's own end offsets: the other kinds start.
    await commit(0, Math.max(1, ...own.filter((e) => e.partition === 0).map((e) => Number(e.offset) + 1)), mine);
    for (const e of own.filter((x) => x.partition !== 0)) await commit(e.partition, Number(e.offset) + 1, mine);
    const deadline = Date.now() + 30_000;
    while (cycles.length < poller.kinds.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(new Set(cycles.map((c) => c.kind))).toEqual(new Set(poller.kinds));
  });
});

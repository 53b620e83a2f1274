/**
 * Pollers under every injected upstream fault, against the real Kafka and registry: no event
 * ever carries a zero, negative or invented price; the cycle marker says FAILED or PARTIAL; and
 * once the fault stops, the next cycle brings the topic's state back to the simulator's truth.
 */
import { topicFor, type EventMap, type PollCycleEvent } from '@skinprices/events';
import type { MarketSlug } from '@skinprices/domain';
import type { FaultSpec } from '@skinprices/simulator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventConsumer } from '@skinprices/events';
import { projectTopics, startPoller, startSimulator, type Sim } from '../support/pipeline.js';
import { TestStack } from '../support/stack.js';

type Listing = EventMap['listing'];

describe('pollers under upstream faults', () => {
  const stack = new TestStack();
  let sim: Sim;
  let suffix: string;
  /** Latest listing per market + item, as a consumer of the topic would hold it. */
  const latest = new Map<string, Listing>();
  const all: Listing[] = [];
  let emitted = 0;
  const pollers = new Map<MarketSlug, Awaited<ReturnType<typeof startPoller>>['poller']>();

  beforeAll(async () => {
    // Big enough that CN-B answers in several pages (500 rows each).
    sim = await startSimulator(stack, 1300);
    suffix = await projectTopics(stack);
    for (const m of ['cn-b', 'cn-d', 'eu-a'] as const) {
      const { poller } = await startPoller(stack, sim, m, suffix, { retries: 2, deadlineMs: 1_500, timeoutMs: 800 });
      pollers.set(m, poller);
    }
    const codec = await stack.serde.codec(`${topicFor('listing').name}${suffix}`, 'listing');
    const consumer = new EventConsumer(stack.kafka, [codec], { groupId: stack.groupId() });
    stack.defer(() => consumer.stop());
    await consumer.start(async (batch) => {
      for (const m of batch.messages) {
        const e = JSON.parse(JSON.stringify(m.value)) as Listing;
        all.push(e);
        latest.set(`${e.market}|${e.market_hash_name}|${e.phase}`, e);
      }
    });
  }, 60_000);
  afterAll(() => stack.cleanup());

  async function cycle(market: MarketSlug): Promise<PollCycleEvent> {
    const { marker } = await pollers.get(market)!.runOnce('LISTINGS');
    emitted += marker.events_emitted;
    return marker;
  }

  async function consumed(): Promise<void> {
    const deadline = Date.now() + 20_000;
    while (all.length < emitted && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(all.length).toBe(emitted);
  }

  /** The topic's latest state for a market equals the simulator's truth now. */
  async function matchesTruth(market: MarketSlug): Promise<void> {
    await consumed();
    const { records } = (await sim.control('GET', `/_sim/truth?market=${market}&kind=listings`)) as {
      records: { market_hash_name: string; phase: string; price: string | null; count: number }[];
    };
    const want = new Map(
      records
        .filter((r) => r.price !== null)
        .map((r) => [`${r.market_hash_name}|${r.phase}`, `${r.price} x${r.count}`]),
    );
    const got = new Map(
      [...latest.values()]
        .filter((e) => e.market === market && e.price !== null)
        .map((e) => [`${e.market_hash_name}|${e.phase}`, `${e.price} x${e.count}`]),
    );
    expect(got.size).toBeGreaterThan(0);
    expect(got).toEqual(want);
  }

  async function inject(market: MarketSlug, spec: FaultSpec): Promise<void> {
    await sim.control('POST', '/_sim/faults', { market, ...spec });
  }

  async function recover(market: MarketSlug): Promise<void> {
    await sim.control('DELETE', `/_sim/faults?market=${market}`);
    // Let prices move, so recovery has real changes to carry.
    await sim.control('POST', '/_sim/clock', { advanceMs: 3 * 3_600_000 });
    expect((await cycle(market)).outcome).toBe('COMPLETE');
    await matchesTruth(market);
  }

  it('starts from a clean, complete cycle that matches the truth', async () => {
    for (const m of pollers.keys()) expect((await cycle(m)).outcome).toBe('COMPLETE');
    for (const m of pollers.keys()) await matchesTruth(m);
  });

  const FAULTS: [string, MarketSlug, FaultSpec, PollCycleEvent['outcome'][]][] = [
    ['5xx from the second page on', 'cn-b', { kind: 'error5xx', after: 1 }, ['PARTIAL']],
    ['5xx on every request', 'cn-b', { kind: 'error5xx' }, ['FAILED']],
    ['429 with Retry-After on every request', 'cn-b', { kind: 'rateLimit', retryAfterS: 1 }, ['FAILED']],
    ['malformed JSON from the second page on', 'cn-b', { kind: 'malformed', after: 1 }, ['PARTIAL']],
    ['truncated bodies', 'cn-b', { kind: 'truncated' }, ['FAILED']],
    ['empty pages before the end', 'cn-b', { kind: 'emptyPage', after: 1 }, ['PARTIAL']],
    ['a slow-drip body past the deadline', 'cn-b', { kind: 'slowDrip', dripMs: 100 }, ['FAILED']],
    ['latency past the timeout', 'cn-b', { kind: 'latency', latencyMs: 2_500 }, ['FAILED']],
    ['zero prices in every row', 'cn-b', { kind: 'zeroPrices' }, ['PARTIAL', 'FAILED']],
    ['raw listings: a failed page', 'cn-d', { kind: 'error5xx', after: 1 }, ['FAILED']],
    ['one big document, truncated', 'eu-a', { kind: 'truncated' }, ['FAILED']],
    ['one big document with zero prices', 'eu-a', { kind: 'zeroPrices' }, ['PARTIAL', 'FAILED']],
  ];

  it.each(FAULTS)(
    '%s: marker says so, nothing invented, recovery matches truth',
    async (_name, market, spec, outcomes) => {
      const before = all.length;
      await inject(market, spec);
      const marker = await cycle(market);
      expect(outcomes).toContain(marker.outcome);
      expect(marker.error).not.toBeNull();
      await consumed();
      // Whatever the faulty cycle emitted is real upstream data: positive prices only, and
      // never a removal (an item missing from a broken answer may still be listed).
      for (const e of all.slice(before)) {
        expect(e.price === null ? e.count : Number(e.price.replace('.', ''))).toBeGreaterThan(0);
      }
      await recover(market);
    },
  );

  it('drops exact duplicates and stays COMPLETE (a paging overlap is not an error)', async () => {
    await inject('cn-b', { kind: 'duplicates' });
    const marker = await cycle('cn-b');
    expect(marker.outcome).toBe('COMPLETE');
    await matchesTruth('cn-b');
    await recover('cn-b');
  });

  it('never put a zero or negative price on the topic', async () => {
    await consumed();
    expect(all.length).toBeGreaterThan(1000);
    const bad = all.filter((e) => e.price !== null && !/^[1-9]\d*\.\d{2}$|^0\.(0[1-9]|[1-9]\d)$/.test(e.price));
    expect(bad).toEqual([]);
  });
});

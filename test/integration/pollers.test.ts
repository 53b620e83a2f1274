/**
 * The upstream simulator and a poller for every marketplace, against the real Kafka and schema
 * registry: the decoded events must equal the simulator's truth.
 */
import { getMarket, MARKETS, type MarketSlug } from '@skinprices/domain';
import { topicFor, type EventMap, type PollCycleEvent } from '@skinprices/events';
import type { Adapter, Kind } from '@skinprices/marketplaces';
import { eventOf } from '@skinprices/poller';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectTopics, readTopic, startPoller, startSimulator, type Sim } from '../support/pipeline.js';
import { TestStack } from '../support/stack.js';

type Truth = Record<string, unknown> & { market_hash_name: string; phase: string; currency: string };

const KIND_TRUTH: Partial<Record<Kind, string>> = {
  LISTINGS: 'listings',
  BUYORDERS: 'buyorders',
  FLOAT_RANGED: 'float-ranged',
  FLOAT_BUYORDERS: 'float-buyorders',
  SALES: 'sales',
  ORDER_BOOK: 'order-book',
  HISTORY: 'history',
};

/** What of an event the truth speaks about, per kind (identity plus values). */
function project(kind: Kind, r: Record<string, unknown>): string {
  const pick = (...keys: string[]) => JSON.stringify(keys.map((k) => r[k] ?? null));
  switch (kind) {
    case 'LISTINGS':
      return pick('market_hash_name', 'phase', 'currency', 'price', 'count');
    case 'BUYORDERS':
      return pick('market_hash_name', 'phase', 'tier', 'currency', 'price', 'blue_price', 'count');
    case 'FLOAT_RANGED':
      return pick('market_hash_name', 'phase', 'float_min', 'float_max', 'first_price', 'fifth_price', 'count');
    case 'FLOAT_BUYORDERS':
      return pick('market_hash_name', 'phase', 'order_id', 'price', 'quantity', 'float_min', 'float_max', 'condition');
    case 'SALES':
      return pick(
        'sale_id',
        'market_hash_name',
        'phase',
        'price',
        'sold_at',
        'float_value',
        'paint_index',
        'paint_seed',
        'stickers',
        'charms',
      );
    case 'ORDER_BOOK':
      return pick('market_hash_name', 'phase', 'asks', 'bids');
    case 'HISTORY':
      return pick('market_hash_name', 'phase', 'day', 'price', 'count');
  }
}

/** Float bounds are compared as numbers: "0.10" and "0.1" are the same bound. */
const canon = (s: string) =>
  s
    .replace(/"(0\.\d*?)0+"/g, '"$1"')
    .replace(/"0\."/g, '"0"')
    .replace(/"1\.0*"/g, '"1"');

describe('pollers against the simulator, through Kafka', () => {
  const stack = new TestStack();
  let sim: Sim;
  let suffix: string;
  const markers: PollCycleEvent[] = [];

  beforeAll(async () => {
    sim = await startSimulator(stack, 150);
    suffix = await projectTopics(stack);
    // Every marketplace, every kind it has: one cycle each (history: two backfill days).
    await Promise.all(
      MARKETS.map(async (m) => {
        const { poller } = await startPoller(stack, sim, m.slug, suffix);
        for (const kind of poller.kinds) {
          const runs = kind === 'HISTORY' ? 2 : 1;
          for (let i = 0; i < runs; i++) markers.push((await poller.runOnce(kind)).marker);
        }
      }),
    );
  }, 120_000);
  afterAll(() => stack.cleanup());

  it('ends every cycle with a COMPLETE marker that names its data topic', () => {
    expect(markers.length).toBeGreaterThanOrEqual(14);
    for (const m of markers) {
      expect(m, `${m.market} ${m.kind}`).toMatchObject({ outcome: 'COMPLETE', error: null });
      expect(m.data_topic.endsWith(suffix)).toBe(true);
    }
    const cnA = markers
      .filter((m) => m.market === 'cn-a')
      .map((m) => m.kind)
      .sort();
    expect(cnA).toEqual(['BUYORDERS', 'FLOAT_BUYORDERS', 'FLOAT_RANGED', 'LISTINGS', 'SALES']);
  });

  it('publishes the markers on poll-cycles.v1 too', async () => {
    const topic = `${topicFor('pollCycle').name}${suffix}`;
    const read = await readTopic(stack, topic, 'pollCycle', (e) => e.length >= markers.length);
    expect(read.map((m) => m.cycle_id).sort()).toEqual(markers.map((m) => m.cycle_id).sort());
  });

  const cases: [MarketSlug, Kind][] = MARKETS.flatMap((m) =>
    (['LISTINGS', 'BUYORDERS', 'FLOAT_RANGED', 'FLOAT_BUYORDERS', 'SALES', 'ORDER_BOOK', 'HISTORY'] as Kind[])
      .filter((k) => {
        const caps: Record<Kind, string> = {
          LISTINGS: 'listings',
          BUYORDERS: 'buyorders',
          FLOAT_RANGED: 'floatRanged',
          FLOAT_BUYORDERS: 'floatBuyorders',
          SALES: 'sales',
          ORDER_BOOK: 'orderBook',
          HISTORY: 'history',
        };
        return m.capabilities.includes(caps[k] as never);
      })
      .map((k): [MarketSlug, Kind] => [m.slug, k]),
  );

  it.each(cases)('%s %s: decoded events equal the simulator truth', async (market, kind) => {
    const eventKind = eventOf(kind);
    const topic = `${topicFor(eventKind).name}${suffix}`;
    const marker = markers.find((m) => m.market === market && m.kind === kind);
    expect(marker).toBeDefined();
    const at = sim.clock.now();
    // The poller's sales window starts at its cycle start minus the look-back.
    const from = marker!.started_at - 3 * 3_600_000;
    const params = new URLSearchParams({
      market,
      kind: KIND_TRUTH[kind] as string,
      at: String(at),
      from: String(from),
    });
    let truthRecords = ((await sim.control('GET', `/_sim/truth?${params}`)) as { records: Truth[] }).records;
    if (kind === 'HISTORY') {
      // Two backfilled days: the truth endpoint gives one day per call.
      const before = new URLSearchParams({ market, kind: 'history', at: String(at - 86_400_000) });
      truthRecords = [
        ...truthRecords,
        ...((await sim.control('GET', `/_sim/truth?${before}`)) as { records: Truth[] }).records,
      ];
    }
    const expected = markers
      .filter((m) => m.market === market && m.kind === kind)
      .reduce((n, m) => n + m.events_emitted, 0);
    const all = await readTopic(
      stack,
      topic,
      eventKind,
      (e) => expected > 0 && e.filter((x) => x.market === market).length >= expected,
      8_000,
    );
    const events = all.filter((e) => e.market === market) as unknown as Record<string, unknown>[];

    // Currencies are native, never converted.
    for (const e of events) expect(e.currency).toBe(getMarket(market).currency);
    // A listing-like row without a price is "none", and only where the truth says so.
    const priced = (r: Record<string, unknown>) => !(kind === 'LISTINGS' || kind === 'BUYORDERS') || r.price !== null;
    const got = events
      .filter(priced)
      .map((e) => canon(project(kind, e)))
      .sort();
    const want = truthRecords
      .filter(priced)
      .map((t) => canon(project(kind, t)))
      .sort();
    expect(got.length).toBeGreaterThan(0);
    expect(got).toEqual(want);
    if (kind === 'LISTINGS') {
      const noneInTruth = new Set(
        truthRecords.filter((t) => t.price === null).map((t) => `${t.market_hash_name}|${t.phase}`),
      );
      for (const e of events.filter((x) => x.price === null))
        expect(noneInTruth.has(`${e.market_hash_name}|${e.phase}`)).toBe(true);
    }
  });

  it('keeps phase rows separate: one Doppler knife, several rows', async () => {
    const topic = `${topicFor('listing').name}${suffix}`;
    const events = (await readTopic(stack, topic, 'listing', () => false, 4_000)) as EventMap['listing'][];
    const byName = new Map<string, Set<string>>();
    for (const e of events.filter((x) => x.market === 'cn-a' && x.phase !== '')) {
      byName.set(e.market_hash_name, (byName.get(e.market_hash_name) ?? new Set()).add(e.phase));
    }
    expect([...byName.values()].some((phases) => phases.size >= 2)).toBe(true);
    for (const e of events) expect(e.market_hash_name).not.toMatch(/\((Phase \d|Ruby|Sapphire|Black Pearl|Emerald)\)$/);
  });

  it('a started poller runs its first LISTINGS cycle before any other kind, then the others one after another', async () => {
    const log: string[] = [];
    const { poller } = await startPoller(stack, sim, 'cn-b', suffix, {
      wrapAdapter: (a): Adapter => ({
        ...a,
        async *pages(kind, ctx, input) {
          log.push(`${kind} start`);
          yield* a.pages(kind, ctx, input);
          log.push(`${kind} end`);
        },
      }),
    });
    const seen = new Set<string>();
    const all = new Promise<void>((resolve) =>
      poller.onCycle((r) => {
        seen.add(r.kind);
        if (seen.size === poller.kinds.length) resolve();
      }),
    );
    poller.start();
    await all;
    await poller.stop();
    expect(poller.kinds.length).toBeGreaterThan(1);
    expect(log[0]).toBe('LISTINGS start');
    expect(log[1]).toBe('LISTINGS end');
    expect(new Set(log.map((l) => l.split(' ')[0]))).toEqual(new Set(poller.kinds));
    // Each kind's first cycle starts once the one before it (in the poller's order) has ended.
    const kinds = poller.kinds;
    for (let i = 1; i < kinds.length; i++)
      expect(log.indexOf(`${kinds[i]} start`)).toBeGreaterThan(log.indexOf(`${kinds[i - 1]} end`));
  }, 60_000);

  it('a FULL cycle sends the rows whose data changed before the rows it only observed again', async () => {
    // One partition per topic, so the topic's order is the order the poller sent in.
    const one = `${suffix}.one`;
    for (const kind of ['listing', 'pollCycle'] as const)
      await stack.topicNamed(`${topicFor(kind).name}${one}`, kind, 1, topicFor(kind).config);
    const { poller } = await startPoller(stack, sim, 'cn-b', one, { fullEvery: 1 });
    const first = await poller.runOnce('LISTINGS');
    const topic = `${topicFor('listing').name}${one}`;
    const said = await readTopic(stack, topic, 'listing', (e) => e.length >= first.marker.events_emitted);
    // The last row of the upstream's answer: sent last of all by a cycle that did not reorder.
    const moved = said.filter((e) => e.price !== null).at(-1)!;
    await sim.control('POST', '/_sim/override', {
      market: 'cn-b',
      market_hash_name: moved.market_hash_name,
      phase: moved.phase,
      price: '23456.78',
    });
    const second = await poller.runOnce('LISTINGS');
    expect(second.marker).toMatchObject({ mode: 'FULL', outcome: 'COMPLETE' });
    const total = first.marker.events_emitted + second.marker.events_emitted;
    const all = await readTopic(stack, topic, 'listing', (e) => e.length >= total);
    const again = all.filter((e) => e.cycle_id === second.marker.cycle_id);
    expect(again.length).toBe(said.length);
    const before = new Map(said.map((e) => [`${e.market_hash_name}|${e.phase}`, project('LISTINGS', e as never)]));
    const changed = again.map(
      (e) => before.get(`${e.market_hash_name}|${e.phase}`) !== project('LISTINGS', e as never),
    );
    const firstRepeat = changed.indexOf(false);
    expect(firstRepeat).toBeGreaterThan(0);
    // Every changed row ahead of every repeat, the moved price among them.
    expect(changed.lastIndexOf(true)).toBeLessThan(firstRepeat);
    const movedAt = again.findIndex((e) => e.market_hash_name === moved.market_hash_name && e.phase === moved.phase);
    expect(again[movedAt]!.price).toBe('23456.78');
    expect(movedAt).toBeLessThan(firstRepeat);
    await sim.control('DELETE', '/_sim/override');
  }, 60_000);
});

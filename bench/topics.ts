/**
 * What the topics keep per day: every marketplace's pollers, as `make run` configures them, run
 * against the simulator through a simulated window on their own copy of the project topics; the
 * bytes each cycle appends to the broker's log segments are measured on disk, and a day is
 * extrapolated per marketplace and kind from its cycles per day (FULL and DELTA apart: a delta
 * kind's FULL cycle comes every `fullEvery`-th). A steady day of the history-only marketplace's
 * import (one closed day, its close and hours) is measured after the window.
 *
 *   node --import tsx bench/topics.ts [--size 35000] [--seconds 60] [--out bench/results/topics.json]
 *
 * `--seconds` is the simulated window in minutes (one FULL period of the 5-minute kinds: 60).
 * Then `make replay` rebuilds a read model from those topics, against a raw COPY of their listing
 * events (`replay_vs_copy`, support/replay-mix.ts).
 * The topics the materializer derives (price changes, current prices) are bounded by their
 * retention and compaction, and not produced here. Needs `make up`, and a broker whose log
 * directories are on this machine (KAFKA_DATA, infra/local/kafka.sh).
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { DATA_KINDS, DAY_MS, kindOfCapability, MARKETS, type Market } from '@skinprices/domain';
import {
  createKafka,
  deleteTopics,
  ensureTopics,
  EventProducer,
  EventSerde,
  topicDefinitions,
  type TopicDefinition,
} from '@skinprices/events';
import { adapterFor, UpstreamClient, type Kind } from '@skinprices/marketplaces';
import { Poller, PollerMetrics } from '@skinprices/poller';
import { createLogger } from '@skinprices/runtime';
import { Extras, FaultBoard, generateCatalogue, MarketModel, SimClock, Simulator } from '@skinprices/simulator';
import { benchArgs, round, writeResult } from './support/harness.js';
import { replayMix } from './support/replay-mix.js';

const MIN = 60_000;
const FULL_EVERY = 12;
const CATALOGUE = 35_000;
const args = benchArgs('topics', { seconds: 60 });
const windowMin = args.seconds;
const brokers = process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';
const registryUrl = process.env.SCHEMA_REGISTRY_URL ?? 'http://127.0.0.1:8081/apis/ccompat/v7';
const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5442/skinprices';
const logDirs = (process.env.KAFKA_LOG_DIRS ?? join('.local', 'kafka', 'data')).split(',');

/** Every `<topic>-<partition>` directory of `topics` under the broker's log dirs, at any depth below them. */
function partitionDirs(root: string, topics: ReadonlySet<string>, depth = 3): string[] {
  let out: string[] = [];
  let entries: string[];
  try {
    entries = readdirSync(root);
  } catch {
    return out;
  }
  for (const e of entries) {
    const path = join(root, e);
    if (topics.has(e.replace(/-\d+$/, ''))) out.push(path);
    // Other topics' directories come and go (tests delete theirs): only descend into plain folders.
    else if (depth > 0 && !e.includes('.')) out = out.concat(partitionDirs(path, topics, depth - 1));
  }
  return out;
}

/** The size of a partition's log segments; 0 for one deleted meanwhile. */
function segmentBytes(dir: string): number {
  let bytes = 0;
  try {
    for (const f of readdirSync(dir)) if (f.endsWith('.log')) bytes += statSync(join(dir, f)).size;
  } catch {
    return 0;
  }
  return bytes;
}

/** Bytes of log segments per topic of ours (summed over partitions and, in a cluster, replicas / replication factor). */
function topicBytes(topics: readonly string[]): Map<string, number> {
  const sizes = new Map<string, number>(topics.map((t) => [t, 0]));
  const replicas = new Map<string, Set<string>>();
  const wanted = new Set(topics);
  for (const root of logDirs)
    for (const dir of partitionDirs(root, wanted)) {
      const name = dir.split('/').at(-1) as string;
      const topic = name.replace(/-\d+$/, '');
      sizes.set(topic, (sizes.get(topic) as number) + segmentBytes(dir));
      const seen = replicas.get(name) ?? new Set<string>();
      seen.add(dir);
      replicas.set(name, seen);
    }
  // A partition found under several brokers' directories is one partition's replicas: count it once.
  const factor = new Map<string, number>();
  for (const [name, dirs] of replicas) factor.set(name.replace(/-\d+$/, ''), dirs.size);
  for (const [t, b] of sizes) sizes.set(t, b / Math.max(1, factor.get(t) ?? 1));
  return sizes;
}

interface Sample {
  market: string;
  kind: Kind;
  mode: 'FULL' | 'DELTA';
  bytes: Record<string, number>;
}

const suffix = `.bench_topics_${Date.now().toString(36)}`;
const defs: TopicDefinition[] = topicDefinitions().map((d) => ({ ...d, name: `${d.name}${suffix}` }));
const ours = defs.map((d) => d.name);
const kafka = createKafka({ brokers, clientId: 'bench-topics' });
const serde = new EventSerde({ registryUrl });
const logger = createLogger('bench-topics', 'silent');

const start = Date.UTC(2026, 10, 20, 0, 30);
const clock = new SimClock(start, 0);
const model = new MarketModel(generateCatalogue({ seed: 7, size: args.size }), 7);
const sim = new Simulator({ model, extras: new Extras(model), clock, faults: new FaultBoard(), logger });
const running = await sim.start({ host: '127.0.0.1', controlPort: 0, basePort: 0 });
await ensureTopics(kafka, defs);
const admin = kafka.admin();
await admin.connect();
const producer = new EventProducer(kafka);
await producer.connect();

const pollers: { market: Market; poller: Poller; intervals: Partial<Record<Kind, number>>; client: UpstreamClient }[] =
  [];
try {
  for (const market of MARKETS) {
    const adapter = adapterFor(market.upstreamFormat);
    const client = new UpstreamClient({
      baseUrl: running.marketUrls[market.slug] as string,
      market: market.slug,
      deadlineMs: 60_000,
      headersTimeoutMs: 30_000,
      headers: adapter.requestHeaders?.({}),
    });
    const intervals: Partial<Record<Kind, number>> = {};
    for (const c of market.capabilities) {
      const kind = kindOfCapability(c);
      const ms = market.refresh[DATA_KINDS[kind].refresh];
      if (ms !== undefined) intervals[kind] = ms;
    }
    const poller = new Poller(
      {
        market,
        intervals,
        fullEvery: FULL_EVERY,
        topicSuffix: suffix,
        retries: 3,
        backoffBaseMs: 50,
        backoffMaxMs: 500,
        requestsPerSecond: 10_000,
        circuitThreshold: 100,
        circuitCoolDownMs: 1_000,
        salesLookbackMs: 5 * MIN,
        // One closed day, its close and then its hours: what a steady day imports (measured below).
        historyBackfillDays: 1,
        hourlyBackfillDays: 1,
      },
      { client, producer, serde, admin, logger, metrics: new PollerMetrics(), adapter },
    );
    pollers.push({ market, poller, intervals, client });
  }

  const samples: Sample[] = [];
  const cycle = async (p: (typeof pollers)[number], kind: Kind): Promise<void> => {
    const before = topicBytes(ours);
    const { marker } = await p.poller.runOnce(kind);
    const after = topicBytes(ours);
    const bytes: Record<string, number> = {};
    for (const t of ours) {
      const d = (after.get(t) ?? 0) - (before.get(t) ?? 0);
      if (d > 0) bytes[t.slice(0, -suffix.length)] = d;
    }
    samples.push({ market: p.market.slug, kind, mode: marker.mode === 'DELTA' ? 'DELTA' : 'FULL', bytes });
  };

  // The window, minute by minute: each kind's cycle runs when its interval comes round, as the
  // pollers' schedules would run them (one after another here, in no time of the simulator's).
  const t0 = Date.now();
  for (let m = 0; m <= windowMin; m++) {
    if (m > 0) clock.set(start + m * MIN);
    for (const p of pollers)
      for (const [kind, ms] of Object.entries(p.intervals) as [Kind, number][]) {
        if (kind === 'HISTORY' || (m * MIN) % ms !== 0) continue;
        await cycle(p, kind);
      }
    if (m % 10 === 0)
      console.log(`  minute ${m}/${windowMin}: ${samples.length} cycles, ${Math.round((Date.now() - t0) / 1000)} s`);
  }

  // A steady day of history: the import of one closed day (close, then hours), the day after.
  const history: Record<string, number> = {};
  for (const p of pollers.filter((x) => x.intervals.HISTORY !== undefined)) {
    const before = topicBytes(ours);
    for (let i = 0; i < 4; i++) await p.poller.runOnce('HISTORY');
    const after = topicBytes(ours);
    for (const t of ours) {
      const d = (after.get(t) ?? 0) - (before.get(t) ?? 0);
      if (d > 0) history[t.slice(0, -suffix.length)] = (history[t.slice(0, -suffix.length)] ?? 0) + d;
    }
  }

  // A day per marketplace and kind: FULL and DELTA cycles apart (a delta kind's every fullEvery-th
  // cycle is FULL, and each upstream day's first).
  const perDay = new Map<string, number>();
  const perKind: Record<string, number> = {};
  const add = (topic: string, b: number): void => void perDay.set(topic, (perDay.get(topic) ?? 0) + b);
  for (const p of pollers)
    for (const [kind, ms] of Object.entries(p.intervals) as [Kind, number][]) {
      if (kind === 'HISTORY') continue;
      const mine = samples.filter((s) => s.market === p.market.slug && s.kind === kind);
      const cycles = DAY_MS / ms;
      const delta = DATA_KINDS[kind].mode === 'delta';
      const fulls = delta ? Math.max(1, cycles / FULL_EVERY) : cycles;
      const groups: [Sample[], number][] = delta
        ? [
            [mine.filter((s) => s.mode === 'FULL'), fulls],
            [mine.filter((s) => s.mode === 'DELTA'), cycles - fulls],
          ]
        : [[mine, cycles]];
      for (const [group, n] of groups) {
        if (group.length === 0) continue;
        const sums = new Map<string, number>();
        for (const s of group) for (const [t, b] of Object.entries(s.bytes)) sums.set(t, (sums.get(t) ?? 0) + b);
        for (const [t, b] of sums) {
          add(t, (b / group.length) * n);
          perKind[`${p.market.slug}:${kind}`] = (perKind[`${p.market.slug}:${kind}`] ?? 0) + (b / group.length) * n;
        }
      }
    }
  for (const [t, b] of Object.entries(history)) add(t, b);
  perKind['hist-a:HISTORY'] = Object.values(history).reduce((a, b) => a + b, 0);

  const scale = CATALOGUE / args.size;
  const GB = 1e9;
  const keptForever = (d: TopicDefinition): boolean =>
    d.config['retention.ms'] === '-1' && !(d.config['cleanup.policy'] ?? 'delete').includes('compact');
  const topics = topicDefinitions().map((d) => {
    const gb = ((perDay.get(d.name) ?? 0) * scale) / GB;
    return {
      topic: d.name,
      retention_ms: d.config['retention.ms'] ?? null,
      cleanup_policy: d.config['cleanup.policy'] ?? 'delete',
      kept_forever: keptForever(d),
      gb_per_day_35k: round(gb, 3),
      tb_per_year_35k: keptForever(d) ? round((gb * 365) / 1000, 2) : null,
      produced_here: perDay.has(d.name),
    };
  });
  const forever = topics.filter((t) => t.kept_forever).reduce((a, t) => a + t.gb_per_day_35k, 0);
  console.log('  replaying the window');
  const mix = await replayMix({ kafka, serde, logger, databaseUrl, topicSuffix: suffix });
  const result = {
    measured_at: new Date().toISOString(),
    size: args.size,
    window_minutes: windowMin,
    cycles: samples.length,
    wall_seconds: round((Date.now() - t0) / 1000, 1),
    topic_bytes_per_day_35k: round(forever, 2),
    topic_bytes_per_day_all_35k: round(
      topics.reduce((a, t) => a + t.gb_per_day_35k, 0),
      2,
    ),
    topics,
    ...mix,
    by_market_kind_gb_per_day_35k: Object.fromEntries(
      Object.entries(perKind)
        .sort((a, b) => b[1] - a[1])
        .map(([k, b]) => [k, round((b * scale) / GB, 3)]),
    ),
  };
  console.log(JSON.stringify(result, null, 2));
  await writeResult(args.out, result);
} finally {
  for (const p of pollers) {
    await p.poller.stop();
    await p.client.close();
  }
  await producer.disconnect();
  await admin.disconnect();
  await running.stop();
  await deleteTopics(kafka, ours).catch(() => undefined);
  for (const t of ours) await serde.deleteSubject(`${t}-value`).catch(() => undefined);
}

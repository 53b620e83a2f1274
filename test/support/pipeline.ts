/**
 * Fixtures for tests that run the upstream simulator and pollers in-process against the real
 * Kafka and registry, on topics of their own (the project's names plus a unique suffix).
 */
import { DATA_KIND_NAMES, getMarket, type MarketSlug, type UpstreamFormat } from '@skinprices/domain';
import {
  EventConsumer,
  EventProducer,
  topicDefinitions,
  type EventKind,
  type EventMap,
  type EventSerde,
} from '@skinprices/events';
import { adapterFor, UpstreamClient, type Adapter, type Kind } from '@skinprices/marketplaces';
import { Materializer, MIGRATIONS_DIR, OutboxPublisher, type MaterializerOptions } from '@skinprices/materializer';
import { PollerMetrics, Poller, type PollerDeps, type PollerOptions } from '@skinprices/poller';
import { createLogger } from '@skinprices/runtime';
import {
  Extras,
  FaultBoard,
  generateCatalogue,
  MarketModel,
  SimClock,
  Simulator,
  type RunningSimulator,
} from '@skinprices/simulator';
import type { Pool } from '@skinprices/store';
import type { Admin } from 'kafkajs';
import { type TestStack, uniqueName } from './stack.js';

export interface Sim {
  running: RunningSimulator;
  clock: SimClock;
  faults: FaultBoard;
  model: MarketModel;
  control: (method: string, path: string, body?: unknown) => Promise<unknown>;
}

/**
 * A simulator on free ports with a frozen clock (tests compare exact states); `formats` serves
 * marketplaces in another upstream format (a real marketplace's).
 */
export async function startSimulator(
  stack: TestStack,
  size: number,
  start = Date.UTC(2026, 10, 20, 12),
  formats: Partial<Record<MarketSlug, UpstreamFormat>> = {},
  extra: { dailyHistory?: boolean } = {},
): Promise<Sim> {
  const catalogue = generateCatalogue({ seed: 7, size });
  const model = new MarketModel(catalogue, 7);
  const clock = new SimClock(start, 0);
  const faults = new FaultBoard();
  const sim = new Simulator({ model, extras: new Extras(model), clock, faults, logger: createLogger('sim', 'silent') });
  const running = await sim.start({ host: '127.0.0.1', controlPort: 0, basePort: 0, formats, ...extra });
  stack.defer(() => running.stop());
  const control = async (method: string, path: string, body?: unknown): Promise<unknown> => {
    const res = await fetch(`${running.controlUrl}${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${await res.text()}`);
    return res.json();
  };
  return { running, clock, faults, model, control };
}

/** Creates every project topic under `<name><suffix>`; returns the suffix. */
export async function projectTopics(stack: TestStack): Promise<string> {
  const suffix = `.${uniqueName('t')}`;
  for (const t of topicDefinitions()) await stack.topicNamed(`${t.name}${suffix}`, t.event, t.partitions, t.config);
  return suffix;
}

export const FAST: Omit<PollerOptions, 'market' | 'intervals' | 'topicSuffix'> = {
  fullEvery: 12,
  retries: 3,
  backoffBaseMs: 20,
  backoffMaxMs: 200,
  requestsPerSecond: 500,
  circuitThreshold: 100,
  circuitCoolDownMs: 1_000,
  salesLookbackMs: 3 * 3_600_000,
  historyBackfillDays: 2,
};

/** What each marketplace polls once at the start: every endpoint then has data to answer with. */
export const EVERY_ENDPOINT_POLLS: [MarketSlug, Kind[]][] = [
  ['cn-a', ['LISTINGS', 'BUYORDERS', 'FLOAT_RANGED', 'FLOAT_BUYORDERS', 'SALES']],
  ['cn-b', ['LISTINGS', 'BUYORDERS', 'FLOAT_BUYORDERS']],
  ['eu-a', ['LISTINGS']],
  ['usd-1', ['LISTINGS']],
  ['store', ['LISTINGS', 'ORDER_BOOK']],
  ['hist-a', ['HISTORY']],
];

export async function startPoller(
  stack: TestStack,
  sim: Sim,
  market: MarketSlug,
  suffix: string,
  extra: Partial<PollerOptions> & {
    deadlineMs?: number;
    timeoutMs?: number;
    /** Poll the marketplace in this upstream format (as the poller's UPSTREAM_FORMAT). */
    format?: UpstreamFormat;
    /** As the poller's UPSTREAM_API_KEY. */
    apiKey?: string;
    /** Wraps the format's adapter (tests that watch or bend it). */
    wrapAdapter?: (adapter: Adapter) => Adapter;
    /** Wraps the schema-registry serde (tests that fail it for a while). */
    wrapSerde?: (serde: EventSerde) => EventSerde;
    /** The platform's catalogue, which the kinds other than the first listings wait for (PollerDeps.catalogue). */
    catalogue?: PollerDeps['catalogue'];
  } = {},
): Promise<{ poller: Poller; client: UpstreamClient }> {
  const { format, apiKey, deadlineMs, timeoutMs, wrapAdapter, wrapSerde, catalogue, ...options } = extra;
  const registered = getMarket(market);
  const m = format ? { ...registered, upstreamFormat: format } : registered;
  const formatAdapter = adapterFor(m.upstreamFormat);
  const adapter = wrapAdapter ? wrapAdapter(formatAdapter) : formatAdapter;
  const client = new UpstreamClient({
    baseUrl: sim.running.marketUrls[market],
    market,
    deadlineMs: deadlineMs ?? 10_000,
    headersTimeoutMs: timeoutMs ?? 5_000,
    headers: adapter.requestHeaders?.({ apiKey }),
  });
  const producer = new EventProducer(stack.kafka);
  await producer.connect();
  const admin: Admin = stack.kafka.admin();
  await admin.connect();
  const hour = 3_600_000;
  const intervals: Partial<Record<Kind, number>> = {};
  for (const k of DATA_KIND_NAMES) intervals[k] = hour;
  const poller = new Poller(
    { ...FAST, market: m, intervals, topicSuffix: suffix, ...options },
    {
      client,
      producer,
      serde: wrapSerde ? wrapSerde(stack.serde) : stack.serde,
      admin,
      logger: createLogger(`poller-${market}`, 'silent'),
      metrics: new PollerMetrics(),
      adapter,
      ...(catalogue ? { catalogue } : {}),
    },
  );
  stack.defer(async () => {
    await poller.stop();
    await producer.disconnect();
    await admin.disconnect();
    await client.close();
  });
  return { poller, client };
}

/** Reads a topic from the start until `done` says enough (or the timeout passes). */
export async function readTopic<K extends EventKind>(
  stack: TestStack,
  topic: string,
  kind: K,
  done: (events: EventMap[K][]) => boolean,
  timeoutMs = 20_000,
): Promise<EventMap[K][]> {
  const codec = await stack.serde.codec(topic, kind);
  const consumer = new EventConsumer(stack.kafka, [codec], { groupId: stack.groupId() });
  const events: EventMap[K][] = [];
  let finish!: () => void;
  const finished = new Promise<void>((r) => (finish = r));
  const timer = setTimeout(finish, timeoutMs);
  await consumer.start(async (batch) => {
    for (const m of batch.messages) if (m.value) events.push(JSON.parse(JSON.stringify(m.value)) as EventMap[K]);
    if (done(events)) finish();
  });
  await finished;
  clearTimeout(timer);
  await consumer.stop();
  return events;
}

/** An in-process materializer on the test's topics and schema. */
export async function startMaterializer(
  stack: TestStack,
  suffix: string,
  pool: Pool,
  options: Partial<MaterializerOptions> = {},
): Promise<Materializer> {
  const materializer = new Materializer(
    { groupId: stack.groupId(), topicSuffix: suffix, migrationsDir: MIGRATIONS_DIR, ...options },
    {
      kafka: stack.kafka,
      serde: stack.serde,
      pool,
      logger: createLogger('materializer', (process.env.TEST_MATERIALIZER_LOG ?? 'silent') as 'silent'),
    },
  );
  await materializer.start();
  stack.defer(() => materializer.stop());
  return materializer;
}

/**
 * Whether the marker of `cycleId` is applied and what it queued done: the outlier guard's second
 * look (migration 0017) and the recomputation of liquidity and the market cap (migration 0014),
 * the derive path's transactions after the markers'.
 */
const DERIVED_SQL = `SELECT applied_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM derive_pending)
    AND NOT EXISTS (SELECT 1 FROM judge_pending) AS done
  FROM poll_cycles WHERE cycle_id = $1`;

/** Waits until the materializer has applied the marker of `cycleId` and done what it queued (DERIVED_SQL). */
export async function untilApplied(pool: Pool, cycleId: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await pool.query<{ done: boolean }>(DERIVED_SQL, [cycleId]);
    if (rows[0]?.done) return;
    if (Date.now() > deadline) throw new Error(`marker ${cycleId} not applied within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** An outbox publisher (fast polling) on the test's topics and schema, with its own producer. */
export async function startOutbox(stack: TestStack, suffix: string, pool: Pool): Promise<OutboxPublisher> {
  const producer = new EventProducer(stack.kafka);
  await producer.connect();
  const outbox = new OutboxPublisher(
    { topicSuffix: suffix, intervalMs: 100, batchSize: 1000 },
    { pool, producer, serde: stack.serde, logger: createLogger('outbox', 'silent') },
  );
  outbox.start();
  stack.defer(async () => {
    await outbox.stop();
    await producer.disconnect();
  });
  return outbox;
}

/**
 * The environment of a materializer process as deployed (services/materializer/src/main.ts) on a
 * test's topics, schema and group: no change feed, and the shortest session Kafka allows, so a
 * killed member's partitions move on quickly. `extra` adds or overrides variables.
 */
export function materializerEnv(
  stack: TestStack,
  o: { schema: string; group: string; suffix: string; brokers?: string },
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    DATABASE_URL: stack.env.databaseUrl,
    DATABASE_SCHEMA: o.schema,
    KAFKA_BROKERS: o.brokers ?? stack.env.brokers,
    SCHEMA_REGISTRY_URL: stack.env.registryUrl,
    GROUP_ID: o.group,
    TOPIC_SUFFIX: o.suffix,
    PUBLISH_CHANGES: 'false',
    CONSUMER_SESSION_TIMEOUT_MS: '6000',
    LOG_LEVEL: 'error',
    ...extra,
  };
}

/** Wires one marketplace's poller: config → clients → Poller; named shutdown handlers. */
import { createKafka, EventProducer, EventSerde, kafkajsPatches } from '@skinprices/events';
import { AppError, marketsWith } from '@skinprices/domain';
import { adapterFor, UpstreamClient } from '@skinprices/marketplaces';
import { createLogger, parseConfig, ShutdownManager } from '@skinprices/runtime';
import { intervalsFor, marketFor, pollerConfigSchema, waitsForCatalogue } from './config.js';
import { CatalogueGate } from './catalogue-gate.js';
import { KafkaCursorStore } from './cursor-store.js';
import { PollerMetrics } from './metrics.js';
import { Poller, polledKinds } from './poller.js';

const config = parseConfig(pollerConfigSchema, process.env);
const market = marketFor(config);
const adapter = adapterFor(market.upstreamFormat);
const logger = createLogger(`poller-${market.slug}`, config.LOG_LEVEL);
if (adapter.needsApiKey && !config.UPSTREAM_API_KEY)
  throw new AppError('config_invalid', `UPSTREAM_API_KEY is required for the ${adapter.format} format`, {
    retryable: false,
  });
const shutdown = new ShutdownManager(logger);
const metrics = new PollerMetrics();

const kafka = createKafka({ brokers: config.KAFKA_BROKERS, clientId: `poller-${market.slug}` });
const producer = new EventProducer(kafka);
const admin = kafka.admin();
const client = new UpstreamClient({
  baseUrl: config.UPSTREAM_BASE_URL,
  market: market.slug,
  connections: config.UPSTREAM_CONNECTIONS,
  headersTimeoutMs: config.UPSTREAM_TIMEOUT_MS,
  deadlineMs: config.UPSTREAM_DEADLINE_MS,
  // The key goes into a header and nowhere else: the config is never logged whole.
  headers: adapter.requestHeaders?.({ apiKey: config.UPSTREAM_API_KEY }),
  onResponse: ({ status, ms }) => {
    metrics.requests.inc({ market: market.slug, status: String(status) });
    metrics.requestSeconds.observe({ market: market.slug }, ms / 1000);
  },
});
const serde = new EventSerde({ registryUrl: config.SCHEMA_REGISTRY_URL });
// Every kind but the listings (CATALOGUE_GATE_SCOPE=backfill: only the history-only
// marketplace's backfill) waits for the platform's first listings (catalogue-gate.ts).
const intervals = intervalsFor(market, config);
const catalogue = !waitsForCatalogue(market, config, polledKinds(market, intervals, adapter))
  ? undefined
  : new CatalogueGate(
      {
        markets:
          config.CATALOGUE_MARKETS.length > 0 ? config.CATALOGUE_MARKETS : marketsWith('listings').map((m) => m.slug),
        timeoutMs: config.CATALOGUE_GATE_MS,
        topicSuffix: config.TOPIC_SUFFIX,
        owner: `poller-${market.slug}`,
        materializerGroup: config.MATERIALIZER_GROUP,
      },
      { kafka, admin, serde, logger },
    );
const cursors = new KafkaCursorStore(
  { topicSuffix: config.TOPIC_SUFFIX, owner: `poller-${market.slug}` },
  { kafka, admin, serde, producer },
);
const poller = new Poller(
  {
    market,
    intervals,
    fullEvery: config.FULL_SNAPSHOT_EVERY,
    topicSuffix: config.TOPIC_SUFFIX,
    retries: config.RETRIES,
    backoffBaseMs: config.BACKOFF_BASE_MS,
    backoffMaxMs: config.BACKOFF_MAX_MS,
    requestsPerSecond: config.UPSTREAM_RPS,
    circuitThreshold: config.CIRCUIT_THRESHOLD,
    circuitCoolDownMs: config.CIRCUIT_COOLDOWN_MS,
    salesLookbackMs: config.SALES_LOOKBACK_MS,
    historyBackfillDays: config.HISTORY_BACKFILL_DAYS,
    hourlyBackfillDays: config.HOURLY_BACKFILL_DAYS,
    hourlyPaceMs: config.HOURLY_PACE_MS,
    ...(config.DAILY_HISTORY === 'off' ? {} : { dailyHistory: adapterFor(config.DAILY_HISTORY) }),
  },
  {
    client,
    producer,
    serde,
    admin,
    logger,
    metrics,
    adapter,
    cursors,
    ...(catalogue ? { catalogue } : {}),
  },
);

await producer.connect();
shutdown.register('kafka-producer', () => producer.disconnect());
await admin.connect();
shutdown.register('kafka-admin', () => admin.disconnect());
shutdown.register('upstream-client', () => client.close());
if (catalogue) shutdown.register('catalogue-gate', () => catalogue.stop());
if (config.METRICS_PORT !== undefined) {
  const server = await metrics.serve(config.METRICS_HOST, config.METRICS_PORT);
  shutdown.register('metrics', server.close);
  logger.info({ url: server.url }, 'metrics listening');
}
// Where the history import and the sales window stopped before a restart (cursor-store.ts).
await poller.resume();
poller.start();
// Registered last, so it runs first: stop polling (the running cycle ends with its marker),
// then the producer flushes and disconnects.
shutdown.register('poller', () => poller.stop());
shutdown.listen();
logger.info(
  // kafkajs: whether its produce path is ours (packages/events/src/kafkajs.ts); 'patched' expected.
  { kinds: poller.kinds, upstream: config.UPSTREAM_BASE_URL, format: market.upstreamFormat, kafkajs: kafkajsPatches },
  'poller started',
);

/**
 * Times one full-catalogue cycle: the simulator (own process) serving the real catalogue size,
 * a poller per marketplace (here in one process) running one cycle of every data kind, through
 * the real Kafka and registry. Writes bench/results/full-cycle.json.
 *
 *   npx tsx bench/full-cycle.ts [catalogueSize=35000] [kinds=all|LISTINGS,SALES,…]
 *
 * Needs `make up`. Topics are the project's names plus a run suffix, deleted afterwards.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { MARKETS } from '@skinprices/domain';
import {
  createKafka,
  deleteTopics,
  ensureTopics,
  EventProducer,
  EventSerde,
  topicDefinitions,
} from '@skinprices/events';
import { UpstreamClient } from '@skinprices/marketplaces';
import { Poller, PollerMetrics } from '@skinprices/poller';
import { createLogger, waitForUrl } from '@skinprices/runtime';

const size = Number(process.argv[2] ?? 35_000);
const onlyKinds = process.argv[3] && process.argv[3] !== 'all' ? new Set(process.argv[3].split(',')) : undefined;
const label = onlyKinds ? [...onlyKinds].join('+').toLowerCase() : 'all';
const brokers = process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';
const registryUrl = process.env.SCHEMA_REGISTRY_URL ?? 'http://127.0.0.1:8081/apis/ccompat/v7';
const controlPort = 7300;
const basePort = 7301;

const sim = spawn(process.execPath, ['--import', 'tsx', 'services/simulator/src/main.ts'], {
  env: {
    ...process.env,
    SIM_CONTROL_PORT: String(controlPort),
    SIM_BASE_PORT: String(basePort),
    SIM_CATALOGUE_SIZE: String(size),
    SIM_SPEED: '0',
    SIM_START: '2026-11-20T12:00:00.000Z',
    LOG_LEVEL: 'warn',
  },
  stdio: ['ignore', 'inherit', 'inherit'],
});
const stopSim = () => sim.kill('SIGTERM');
process.on('exit', stopSim);

await waitForUrl(`http://127.0.0.1:${controlPort}/healthz`, 120_000);
const markets = (await (await fetch(`http://127.0.0.1:${controlPort}/_sim/markets`)).json()) as {
  slug: string;
  baseUrl: string;
}[];
const kafka = createKafka({ brokers, clientId: 'bench-full-cycle' });
const suffix = `.bench_${Date.now().toString(36)}`;
const topics = topicDefinitions().map((t) => ({ ...t, name: `${t.name}${suffix}` }));
await ensureTopics(kafka, topics);
const serde = new EventSerde({ registryUrl });
const producer = new EventProducer(kafka);
await producer.connect();
const admin = kafka.admin();
await admin.connect();
const logger = createLogger('bench', 'warn');

const results: Record<string, { kind: string; seconds: number; items: number; events: number; outcome: string }[]> = {};
const started = performance.now();
await Promise.all(
  MARKETS.map(async (market) => {
    const baseUrl = markets.find((m) => m.slug === market.slug)?.baseUrl as string;
    const client = new UpstreamClient({ baseUrl, market: market.slug, deadlineMs: 120_000 });
    const intervals = {
      LISTINGS: 1,
      BUYORDERS: 1,
      FLOAT_RANGED: 1,
      FLOAT_BUYORDERS: 1,
      SALES: 1,
      ORDER_BOOK: 1,
      HISTORY: 1,
    };
    const poller = new Poller(
      {
        market,
        intervals,
        fullEvery: 12,
        topicSuffix: suffix,
        retries: 3,
        backoffBaseMs: 250,
        backoffMaxMs: 5_000,
        requestsPerSecond: 200,
        circuitThreshold: 3,
        circuitCoolDownMs: 60_000,
        salesLookbackMs: 3_600_000,
        historyBackfillDays: 1,
      },
      { client, producer, serde, admin, logger, metrics: new PollerMetrics() },
    );
    results[market.slug] = [];
    for (const kind of poller.kinds.filter((k) => !onlyKinds || onlyKinds.has(k))) {
      const t0 = performance.now();
      const { marker } = await poller.runOnce(kind);
      results[market.slug]!.push({
        kind,
        seconds: (performance.now() - t0) / 1000,
        items: marker.items_seen,
        events: marker.events_emitted,
        outcome: marker.outcome,
      });
    }
    await client.close();
  }),
);
const totalSeconds = (performance.now() - started) / 1000;
const listingEvents = Object.values(results)
  .flatMap((r) => r.filter((x) => x.kind === 'LISTINGS'))
  .reduce((n, x) => n + x.events, 0);
const allEvents = Object.values(results)
  .flat()
  .reduce((n, x) => n + x.events, 0);
const report = {
  what: `one cycle of ${onlyKinds ? [...onlyKinds].join(', ') : 'every data kind'} on all 14 marketplaces, simulator to Kafka (events acknowledged)`,
  machine: '2 cores, simulator in its own process, all pollers in one process',
  catalogue_names: size,
  total_seconds: Number(totalSeconds.toFixed(2)),
  listing_events: listingEvents,
  all_events: allEvents,
  events_per_second: Math.round(allEvents / totalSeconds),
  per_market: results,
  measured_at: new Date().toISOString(),
};
writeFileSync(new URL(`./results/full-cycle-${label}.json`, import.meta.url), `${JSON.stringify(report, null, 2)}\n`);
console.log(
  JSON.stringify({
    total_seconds: report.total_seconds,
    listing_events: listingEvents,
    all_events: allEvents,
    events_per_second: report.events_per_second,
  }),
);

await producer.disconnect();
await deleteTopics(
  kafka,
  topics.map((t) => t.name),
);
await admin.disconnect();
for (const t of topics) await serde.deleteSubject(`${t.name}-value`);
stopSim();
process.exit(0);

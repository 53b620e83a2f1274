/**
 * `make run`: the whole platform on this machine with demo data. After `make up` (Kafka, registry,
 * PostgreSQL), it creates the topics, issues demo keys, and starts under one supervisor: the
 * upstream simulator, a poller per marketplace, the materializer, the API and the webhook notifier. Ctrl-C stops them
 * all. The end-to-end test boots the platform through this same file.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { API_MIGRATIONS_DIR, KeyStore, type Plan } from '@skinprices/api';
import { AppError, MARKETS } from '@skinprices/domain';
import { createKafka, ensureTopics, EventSerde, topicDefinitions, waitForKafka } from '@skinprices/events';
import { commonEnv, createLogger, intFromEnv, parseConfig, waitForUrl } from '@skinprices/runtime';
import { createPool, ensureDatabase, ensureSchema, migrate } from '@skinprices/store';
import { SecretBox } from '@skinprices/webhooks';
import { z } from 'zod';
import { buildDirectory, buildServices, SERVICE_ENTRIES } from './build.js';
import { DEFAULT_RESTART_POLICY } from './restart-policy.js';
import { claimPlatform, platformPorts, runLockFile } from './run-guard.js';
import { Supervisor } from './supervisor.js';

const schema = z.object({
  ...commonEnv,
  RUN_CATALOGUE_SIZE: intFromEnv(1, 35_000)
    .default(300)
    .describe('simulated catalogue: small, so data shows within minutes'),
  API_HOST: z.string().default('127.0.0.1'),
  API_PORT: intFromEnv(1, 65_535).default(8080),
  SIM_CONTROL_PORT: intFromEnv(1, 65_535).default(7100),
  SIM_BASE_PORT: intFromEnv(1, 65_535).default(7101),
  DATABASE_SCHEMA: z.string().default('readmodel'),
  KEYS_SCHEMA: z.string().default('api'),
  WEBHOOKS_SCHEMA: z.string().default('webhooks'),
  TOPIC_SUFFIX: z.string().default(''),
  SERVICE_CPU_PROF_DIR: z
    .string()
    .default('')
    .describe('when set, every service runs under --cpu-prof and writes its profile here on exit (bench --profile)'),
  DEMO_KEYS_FILE: z.string().default('.local/demo-keys.json'),
  POLL_LISTINGS_MS: intFromEnv(0, 86_400_000).default(0).describe('listing interval (0: the registry default, 5 min)'),
  HISTORY_BACKFILL_DAYS: intFromEnv(0, 400)
    .default(400)
    .describe('days of daily closes imported on start: the history-only marketplace, and with RUN_WARM every one'),
  HOURLY_BACKFILL_DAYS: intFromEnv(0, 400)
    .default(100)
    .describe(
      "with RUN_WARM: of those days, the most recent whose hourly candles every listing marketplace imports too (the hourly history's retention is 100 days)",
    ),
  HOURLY_PACE_MS: intFromEnv(0, 60_000)
    .default(2_500)
    .describe(
      "with RUN_WARM: each poller's pause between the hourly backfill's days (13 marketplaces x 7,200 candles a day every 2.5 s is the ~37k candles/s the materializer applied here, so the backfill does not queue ahead of closes and live prices)",
    ),
  RUN_WARM: z
    .enum(['true', 'false'])
    .default('true')
    .transform((v) => v === 'true')
    .describe(
      "warm demo: every listing marketplace's daily closes of HISTORY_BACKFILL_DAYS days are imported through the pipeline (the simulator serves them), so changes and averages are filled from the start",
    ),
  RUN_FORMATS: z
    .string()
    .regex(/^(\s*[a-z0-9-]+=[a-z-]+\s*(,|$))*$/, "'<market>=<format>,…'")
    .default('')
    .describe(
      "marketplaces served and polled in a real marketplace's format, e.g. 'eu-a=skinport,usd-2=dmarket,usd-3=csfloat,usd-4=steam-market'",
    ),
  METRICS_PORT_OFFSET: intFromEnv(0, 60_000)
    .default(2_000)
    .describe(
      'Prometheus /metrics at API_PORT + this: the materializer, then the API, then one poller per marketplace, then the notifier (0: none)',
    ),
  RESTART_HEALTHY_MS: intFromEnv(0, 86_400_000)
    .default(DEFAULT_RESTART_POLICY.healthyMs)
    .describe('a service that ran this long restarts after the shortest pause again'),
  WEBHOOK_SECRET_KEYS: z
    .string()
    .optional()
    .describe(
      'the key ring sealing webhook signing secrets (docs/operations.md); unset: one generated at the first run and kept in .local/webhook-secret-keys, so subscriptions outlive a restart',
    ),
  SKINPRICES_LOCAL_DIR: z
    .string()
    .optional()
    .describe('state of the local stack (as lib.sh); the run lock is in its run/'),
});
const config = parseConfig(schema, process.env);
const logger = createLogger('run', config.LOG_LEVEL);

// ---- one platform at a time -------------------------------------------------------------------
// Before anything is touched (demo keys, the keys file, topics): a second run would delete the
// first one's keys and crash-loop on its ports while the first answered its health checks.
const localDir = config.SKINPRICES_LOCAL_DIR ?? resolve(dirname(fileURLToPath(import.meta.url)), '../../.local');
const api = `http://${config.API_HOST}:${config.API_PORT}`;
// Metrics listeners, each on its own port (never the public API port): materializer, API, pollers,
// notifier (last, so that the pollers' ports stay where they were).
const metricsBase = config.METRICS_PORT_OFFSET ? config.API_PORT + config.METRICS_PORT_OFFSET : 0;
const metricsPorts = metricsBase
  ? ['materializer', 'api', ...MARKETS.map((m) => `poller-${m.slug}`), 'notifier'].map((owner, i) => ({
      owner: `${owner} metrics`,
      host: '127.0.0.1',
      port: metricsBase + i,
    }))
  : [];
const metricsEnv = (owner: string): Record<string, string> => {
  const p = metricsPorts.find((x) => x.owner === `${owner} metrics`);
  return p ? { METRICS_HOST: p.host, METRICS_PORT: String(p.port) } : {};
};
const lock = await claimPlatform(
  runLockFile(localDir, config.DATABASE_URL, config.KEYS_SCHEMA),
  { pid: process.pid, startedAt: new Date().toISOString(), api },
  [
    ...platformPorts({
      apiHost: config.API_HOST,
      apiPort: config.API_PORT,
      // The simulator's default address; run.ts does not move it.
      simHost: '127.0.0.1',
      simControlPort: config.SIM_CONTROL_PORT,
      simBasePort: config.SIM_BASE_PORT,
      markets: MARKETS.map((m) => m.slug),
    }),
    ...metricsPorts,
  ],
).catch((err: unknown) => {
  if (!(err instanceof AppError) || err.code !== 'busy') throw err;
  process.stderr.write(`\nmake run refused to start: ${err.message}\n\n`);
  process.exit(1);
});
process.on('exit', () => lock.release());

// ---- topics and demo keys ---------------------------------------------------------------------
await ensureDatabase(config.DATABASE_URL);
const kafka = createKafka({ brokers: config.KAFKA_BROKERS, clientId: 'make-run' });
await waitForKafka(kafka);
await ensureTopics(
  kafka,
  topicDefinitions().map((t) => ({ ...t, name: `${t.name}${config.TOPIC_SUFFIX}` })),
);

// Register every topic's schema once, here, before the services start: fourteen pollers and a
// materializer registering one new subject at the same moment race on its compatibility rule
// (Apicurio answers 409 or NONE mid-way); a deploy registers schemas first for the same reason.
const serde = new EventSerde({ registryUrl: config.SCHEMA_REGISTRY_URL });
for (const t of topicDefinitions()) await serde.codec(`${t.name}${config.TOPIC_SUFFIX}`, t.event);

const keysPool = createPool({ databaseUrl: config.DATABASE_URL, schema: config.KEYS_SCHEMA, max: 1 });
await ensureSchema(keysPool, config.KEYS_SCHEMA);
await migrate(keysPool, API_MIGRATIONS_DIR);
// Each run issues fresh demo keys; the previous run's stop working.
await keysPool.query(`DELETE FROM api_keys WHERE note = 'demo'`);
const store = new KeyStore(keysPool);
const demo = async (customer: string, plan: Plan, extra = {}) =>
  (await store.create({ customer, plan, note: 'demo', ...extra })).secret;
const keys = {
  basic: await demo('demo-basic@example.com', 'basic'),
  pro: await demo('demo-pro@example.com', 'pro'),
  enterprise: await demo('demo-enterprise@example.com', 'enterprise'),
  acl: await demo('demo-acl@example.com', 'enterprise', { allowedEndpoints: ['GET /v1/prices/latest'] }),
  disabled: await demo('demo-disabled@example.com', 'pro', { disabled: true }),
  expired: await demo('demo-expired@example.com', 'pro', { expiresAt: new Date(Date.now() - 60_000) }),
};
await keysPool.end();
mkdirSync(dirname(config.DEMO_KEYS_FILE), { recursive: true });
writeFileSync(config.DEMO_KEYS_FILE, `${JSON.stringify(keys, null, 2)}\n`);

// The API seals webhook signing secrets and the notifier opens them with the same key ring. A
// local run keeps its generated ring beside the stack's data: a new ring would leave every stored
// subscription unable to sign.
const webhookKeysFile = resolve(localDir, 'webhook-secret-keys');
if (!config.WEBHOOK_SECRET_KEYS && !existsSync(webhookKeysFile)) {
  mkdirSync(localDir, { recursive: true });
  writeFileSync(webhookKeysFile, `k1:${SecretBox.generateKey()}\n`, { mode: 0o600 });
}
const webhooksSchema = config.WEBHOOKS_SCHEMA;
const webhookKeys = config.WEBHOOK_SECRET_KEYS ?? readFileSync(webhookKeysFile, 'utf8').trim();

// ---- the services -------------------------------------------------------------------------------
// Compiled ahead, as deployed (build.ts), into a directory of this run's own.
const build = buildDirectory('run-');
process.on('exit', build.remove);
const bundles = await buildServices(SERVICE_ENTRIES, build.dir);
const bundle = (service: string) => bundles.get(`services/${service}/src/main.ts`) as string;
const supervisor = new Supervisor({
  policy: { ...DEFAULT_RESTART_POLICY, healthyMs: config.RESTART_HEALTHY_MS },
  nodeFlags: config.SERVICE_CPU_PROF_DIR ? ['--cpu-prof', `--cpu-prof-dir=${config.SERVICE_CPU_PROF_DIR}`] : [],
});
const common = {
  DATABASE_URL: config.DATABASE_URL,
  KAFKA_BROKERS: config.KAFKA_BROKERS,
  SCHEMA_REGISTRY_URL: config.SCHEMA_REGISTRY_URL,
  TOPIC_SUFFIX: config.TOPIC_SUFFIX,
};
supervisor.start({
  name: 'simulator',
  script: bundle('simulator'),
  env: {
    SIM_CONTROL_PORT: String(config.SIM_CONTROL_PORT),
    SIM_BASE_PORT: String(config.SIM_BASE_PORT),
    SIM_CATALOGUE_SIZE: String(config.RUN_CATALOGUE_SIZE),
    SIM_FORMATS: config.RUN_FORMATS,
    SIM_DAILY_HISTORY: String(config.RUN_WARM),
    LOG_LEVEL: 'warn',
  },
});
// The same marketplaces' pollers speak those formats (the simulator refuses unknown ones).
const formatOf = new Map(
  config.RUN_FORMATS.split(',')
    .map((p) => p.trim().split('='))
    .filter((p): p is [string, string] => p.length === 2),
);
const formatEnv = (slug: string): Record<string, string> => {
  const format = formatOf.get(slug);
  if (!format) return {};
  // The simulated CSFloat wants some key; a real deployment sets its own UPSTREAM_API_KEY.
  return { UPSTREAM_FORMAT: format, ...(format === 'csfloat' ? { UPSTREAM_API_KEY: 'simulated-key' } : {}) };
};
const control = `http://127.0.0.1:${config.SIM_CONTROL_PORT}`;
await waitForUrl(`${control}/healthz`, 300_000);
const markets = (await (await fetch(`${control}/_sim/markets`)).json()) as { slug: string; baseUrl: string }[];
for (const m of MARKETS)
  supervisor.start({
    name: `poller-${m.slug}`,
    script: bundle('poller'),
    env: {
      ...common,
      MARKET: m.slug,
      UPSTREAM_BASE_URL: markets.find((x) => x.slug === m.slug)?.baseUrl as string,
      ...formatEnv(m.slug),
      ...(config.RUN_WARM && m.capabilities.includes('listings')
        ? {
            DAILY_HISTORY: 'history',
            HOURLY_BACKFILL_DAYS: String(config.HOURLY_BACKFILL_DAYS),
            HOURLY_PACE_MS: String(config.HOURLY_PACE_MS),
          }
        : {}),
      HISTORY_BACKFILL_DAYS: String(config.HISTORY_BACKFILL_DAYS),
      // Every kind but the listings (and the history-only marketplace's backfill) waits until
      // this group has ingested every marketplace's first listings (services/poller/src/catalogue-gate.ts).
      MATERIALIZER_GROUP: `materializer${config.TOPIC_SUFFIX}`,
      ...(config.POLL_LISTINGS_MS ? { POLL_LISTINGS_MS: String(config.POLL_LISTINGS_MS) } : {}),
      ...metricsEnv(`poller-${m.slug}`),
      LOG_LEVEL: 'warn',
    },
  });
supervisor.start({
  name: 'materializer',
  script: bundle('materializer'),
  env: {
    ...common,
    DATABASE_SCHEMA: config.DATABASE_SCHEMA,
    GROUP_ID: `materializer${config.TOPIC_SUFFIX}`,
    ...metricsEnv('materializer'),
    LOG_LEVEL: 'warn',
  },
});
supervisor.start({
  name: 'api',
  script: bundle('api'),
  env: {
    ...common,
    DATABASE_SCHEMA: config.DATABASE_SCHEMA,
    KEYS_SCHEMA: config.KEYS_SCHEMA,
    API_HOST: config.API_HOST,
    API_PORT: String(config.API_PORT),
    WEBHOOKS_SCHEMA: webhooksSchema,
    WEBHOOK_SECRET_KEYS: webhookKeys,
    // Local demo receivers listen on this machine: an operator's setting, never a production one.
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    ...metricsEnv('api'),
    LOG_LEVEL: 'info',
  },
});
supervisor.start({
  name: 'notifier',
  script: bundle('notifier'),
  env: {
    ...common,
    KEYS_SCHEMA: config.KEYS_SCHEMA,
    WEBHOOKS_SCHEMA: webhooksSchema,
    WEBHOOK_SECRET_KEYS: webhookKeys,
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    GROUP_ID: `notifier${config.TOPIC_SUFFIX}`,
    ...metricsEnv('notifier'),
    LOG_LEVEL: 'warn',
  },
});
await waitForUrl(`${api}/openapi.json`, 300_000);

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping every service');
    void supervisor.stop().then(() => process.exit(0));
  });

process.stdout.write(`
The platform is up: simulator (${control}), ${MARKETS.length} pollers, the materializer, the API (${api}) and the webhook notifier.
Data appears within a minute or two. Demo keys (also in ${config.DEMO_KEYS_FILE}):

  basic       ${keys.basic}
  pro         ${keys.pro}
  enterprise  ${keys.enterprise}
  acl         ${keys.acl}   (enterprise, only GET /v1/prices/latest)
  disabled    ${keys.disabled}
  expired     ${keys.expired}

  curl -s -H 'x-api-key: ${keys.basic}' ${api}/v1/prices/cn-a
  curl -s --compressed -H 'Authorization: Bearer ${keys.basic}' '${api}/v1/prices/latest?markets=cn-a,eu-a'
  curl -s -H 'x-api-key: ${keys.pro}' ${api}/v1/prices/cn-b/buyorder
  curl -s -H 'x-api-key: ${keys.enterprise}' '${api}/v1/indexes/market-cap?resolution=hourly'
  curl -s -H 'x-api-key: ${keys.enterprise}' -o sales.zip ${api}/v1/market-sales/export
  curl -s -H 'x-api-key: ${keys.basic}' '${api}/v1/prices/changes?since=now'   # then follow next_cursor
  curl -N -H 'x-api-key: ${keys.pro}' ${api}/v1/prices/stream                # live changes (SSE)
  curl -s -H 'x-api-key: ${keys.basic}' ${api}/v1/status
  curl -s -H 'x-api-key: ${keys.pro}' -H 'content-type: application/json' \\
       -d '{"url":"http://127.0.0.1:9000/hook","filters":{"min_change_pct":"5"}}' ${api}/v1/webhooks
       # a signed POST per matching change (receiver: npx tsx examples/webhook-receiver.ts; local URLs allowed here)
  curl -s -H 'x-api-key: ${keys.acl}' ${api}/v1/prices/cn-a          # 403: not in its ACL
  curl -s -H 'x-api-key: ${keys.expired}' ${api}/v1/prices/cn-a      # 401
  open ${api}/docs                                                    # no key needed
${metricsBase ? `\nPrometheus metrics: http://127.0.0.1:${metricsBase}/metrics (materializer), :${metricsBase + 1} (API), :${metricsBase + 2}… (pollers, in registry order), :${metricsBase + 2 + MARKETS.length} (notifier)\n` : ''}
Ctrl-C stops everything.
`);

// ---- warming: a progress line until every marketplace's history is in --------------------------
if (config.RUN_WARM && config.HISTORY_BACKFILL_DAYS > 0) void reportWarming();

/**
 * Prints how much of the imported history the read model has applied, until all of it: first the
 * daily closes (a marketplace-day is one HISTORY cycle; changes and averages stand on them), then
 * the recent days' hourly candles, which the pollers import in a second pass (their cycles end in
 * `:hours`).
 */
async function reportWarming(): Promise<void> {
  const days = config.HISTORY_BACKFILL_DAYS;
  const closes =
    MARKETS.filter((m) => m.capabilities.includes('listings') || m.capabilities.includes('history')).length * days;
  const hourlyDays = Math.min(config.HOURLY_BACKFILL_DAYS, days);
  const hours = MARKETS.filter((m) => m.capabilities.includes('listings')).length * hourlyDays;
  const pool = createPool({ databaseUrl: config.DATABASE_URL, schema: config.DATABASE_SCHEMA, max: 1 });
  const started = Date.now();
  let closesDone = false;
  try {
    for (;;) {
      await new Promise((r) => setTimeout(r, 5_000));
      if (stopping) return;
      const { rows } = await pool
        .query<{ closes: number; hours: number }>(
          `SELECT count(*) FILTER (WHERE cycle_id NOT LIKE '%:hours')::int AS closes,
                  count(*) FILTER (WHERE cycle_id LIKE '%:hours')::int AS hours
           FROM poll_cycles WHERE kind = 'HISTORY' AND applied_at IS NOT NULL`,
        )
        .catch(() => ({ rows: [{ closes: 0, hours: 0 }] })); // the materializer has not created its tables yet
      const c = Math.min(closes, rows[0]?.closes ?? 0);
      const h = Math.min(hours, rows[0]?.hours ?? 0);
      const s = Math.round((Date.now() - started) / 1000);
      const pct = (n: number, of: number) => Math.floor((100 * n) / of);
      if (!closesDone && c >= closes) {
        closesDone = true;
        process.stdout.write(
          `warm: ${days} days of daily closes on every marketplace, in ${s} s (changes and averages filled)\n`,
        );
      }
      if (closesDone && h >= hours) {
        if (hours > 0)
          process.stdout.write(
            `warm: hourly candles of the last ${hourlyDays} days on every listing marketplace, in ${s} s\n`,
          );
        return;
      }
      process.stdout.write(
        closesDone
          ? `warming: ${h} of ${hours} marketplace-days of hourly candles applied (${pct(h, hours)} %, ${s} s)\n`
          : `warming: ${c} of ${closes} marketplace-days of daily history applied (${pct(c, closes)} %, ${s} s)\n`,
      );
    }
  } finally {
    await pool.end();
  }
}

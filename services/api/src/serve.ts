/**
 * One API process: config → pools, the schemas it reads, key store, limiter, read model, followers,
 * listener → Fastify. It writes nothing but webhook subscriptions, and those through a pool of their
 * own, opened on the first webhook request (WEBHOOKS_DATABASE_URL: the primary), so it runs on a
 * hot standby as on a primary. Run alone, or as one of a cluster primary's workers (cluster.ts),
 * which then serves the metrics and, without Redis, counts the rate limits.
 */
import { AggregatorRegistry } from 'prom-client';
import { ShutdownManager, type Logger } from '@skinprices/runtime';
import { createPool, PgNotifications, READ_CONTRACT_V1, waitForContract, type Pool } from '@skinprices/store';
import { buildApp } from './app.js';
import { ChangeFollower } from './changes/follower.js';
import { SharedStreamSlots } from './changes/slots-shared.js';
import { ChangeWaker } from './changes/waker.js';
import type { ApiConfig } from './config.js';
import { KEYS_CONTRACT, KeyStore } from './keys.js';
import { FailedAuthLimiter, MemoryRateLimiter, RedisRateLimiter, type RateLimiter } from './limits.js';
import { SharedRateLimiter } from './limits-shared.js';
import { ApiMetrics } from './metrics.js';
import { ReadModel } from './readmodel.js';
import { DEFAULT_STATUS_OPTIONS, loadStatus } from './status.js';
import { ReadModelVersion } from './version.js';

/** alone: the only API process here; worker: one of a cluster primary's. */
type Role = 'alone' | 'worker';

/** The two pools, once the schemas this version reads are there (the API migrates nothing). */
async function openPools(config: ApiConfig, logger: Logger, shutdown: ShutdownManager) {
  const keysPool = createPool({
    databaseUrl: config.DATABASE_URL,
    schema: config.KEYS_SCHEMA,
    max: 2,
    applicationName: `${config.DB_APPLICATION_NAME}-keys`,
  });
  shutdown.register('keys-pool', () => keysPool.end());
  const readPool = createPool({
    databaseUrl: config.DATABASE_URL,
    schema: config.DATABASE_SCHEMA,
    max: config.DB_POOL_SIZE,
    acquireTimeoutMs: config.DB_ACQUIRE_TIMEOUT_MS,
    applicationName: config.DB_APPLICATION_NAME,
  });
  shutdown.register('read-pool', () => readPool.end());
  // The materializer migrates the read model and keys-cli the key table, on the primary; this
  // process waits until what it reads is there (on a standby: replayed).
  const waitFor = (pool: Pool, schema: string, contract: typeof KEYS_CONTRACT | typeof READ_CONTRACT_V1) =>
    waitForContract({
      pool,
      schema,
      contract,
      kind: contract === KEYS_CONTRACT ? 'r' : 'v',
      hint:
        contract === KEYS_CONTRACT
          ? `Migrate the key table on the primary: make keys ARGS=migrate (tsx services/api/src/keys-cli.ts migrate) with KEYS_SCHEMA=${schema}`
          : `The materializer migrates the read model at its start, on the primary (DATABASE_SCHEMA=${schema})`,
      timeoutMs: config.SCHEMA_WAIT_S * 1000,
      onWait: (needs) =>
        logger.warn({ schema, needs }, 'waiting for the schema this version reads (the API migrates nothing)'),
    });
  await Promise.all([
    waitFor(keysPool, config.KEYS_SCHEMA, KEYS_CONTRACT),
    waitFor(readPool, config.DATABASE_SCHEMA, READ_CONTRACT_V1),
  ]);
  return { keysPool, readPool };
}

/**
 * The caches learn what changed from the change position, read every CHANGE_POLL_MS and at once on
 * the materializer's NOTIFY; key edits arrive by the key version (keys.ts), polled the same way.
 */
function followChanges(
  deps: { config: ApiConfig; logger: Logger; shutdown: ShutdownManager; read: ReadModel; keys: KeyStore },
  readPool: Pool,
  listen: boolean,
) {
  const { config, logger, shutdown, read, keys } = deps;
  const version = new ReadModelVersion();
  shutdown.register('version', async () => version.stop());
  const follower = new ChangeFollower(
    (since) => read.changedTags(since),
    // Anything may have changed (the first read, a journal that no longer reaches back): every
    // cache looks again; the lists follow positions of their own, so they need no rebuild for it.
    (tags) => (tags ? version.bump(tags) : version.bumpAll()),
    config.CHANGE_POLL_MS,
    logger,
  );
  follower.start();
  shutdown.register('change-follower', () => follower.stop());
  const keyFollower = new ChangeFollower(
    async () => ({ position: (await keys.refreshIfChanged()) ?? '', tags: [] }),
    () => undefined,
    config.CHANGE_POLL_MS,
    logger,
  );
  keyFollower.start();
  shutdown.register('key-follower', () => keyFollower.stop());
  const changeWaker = new ChangeWaker();
  // One connection follows all three: the materializer's commits, its change log and the key table.
  const notifications = new PgNotifications(
    readPool,
    [
      { channel: 'skinprices_readmodel', payload: config.DATABASE_SCHEMA, onNotify: () => follower.wake() },
      // The materializer's outbox numbered new changes into the change log: streams read them.
      { channel: 'skinprices_changes', payload: config.DATABASE_SCHEMA, onNotify: () => changeWaker.notify() },
      {
        channel: 'skinprices_keys',
        payload: config.KEYS_SCHEMA,
        onNotify: () => void keys.reload().catch((err: unknown) => logger.warn({ err }, 'reloading keys failed')),
      },
    ],
    logger,
    (listening) => keys.setListening(listening),
  );
  if (listen) {
    notifications.start();
    shutdown.register('notifications', () => notifications.stop());
  }
  return { version, changeWaker };
}

/**
 * Limits are exact over every process that serves a key: Redis when configured (several machines),
 * else the cluster primary's counts (this machine's workers), else this process's own.
 */
function rateLimiter(config: ApiConfig, role: Role, metrics: ApiMetrics): RateLimiter {
  if (config.REDIS_URL) return new RedisRateLimiter(config.REDIS_URL, metrics.registry);
  return role === 'worker' ? new SharedRateLimiter() : new MemoryRateLimiter();
}

/** /metrics: served here when alone; a worker's series are summed by the primary, which serves them. */
async function exposeMetrics(config: ApiConfig, role: Role, metrics: ApiMetrics, logger: Logger) {
  if (role === 'worker') {
    // Constructing one installs prom-client's answer to the primary's requests for our series.
    new AggregatorRegistry();
    AggregatorRegistry.setRegistries([metrics.registry]);
    return undefined;
  }
  if (config.METRICS_PORT === undefined) return undefined;
  const served = await metrics.serve(config.METRICS_HOST, config.METRICS_PORT);
  logger.info({ url: served.url }, 'metrics served');
  return served;
}

/**
 * A worker stops on SIGTERM, and a repeated one does not force it: a signal to the whole process
 * group (Ctrl-C's SIGINT, systemd's stop) reaches the workers as well as their primary, which then
 * sends its own SIGTERM. Forcing is the primary's, by SIGKILL past its deadline (cluster.ts).
 */
function stopOnPrimarysSignal(shutdown: ShutdownManager): void {
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', () => {
    void shutdown.shutdown().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
}

export async function serve(config: ApiConfig, logger: Logger, role: Role): Promise<void> {
  const shutdown = new ShutdownManager(logger);
  // A worker answers the primary's scrapes from its first moment: the primary's /metrics fails
  // whole while any worker stays silent, and the schema wait below may last minutes.
  const metrics = new ApiMetrics();
  const served = await exposeMetrics(config, role, metrics, logger);
  if (served) shutdown.register('metrics', served.close);
  const { keysPool, readPool } = await openPools(config, logger, shutdown);
  const read = new ReadModel(readPool);
  const standby = (await read.replication()).standby;
  const listen = config.DB_LISTEN === 'auto' ? !standby : config.DB_LISTEN === 'true';
  const limiter = rateLimiter(config, role, metrics);
  shutdown.register('limiter', () => limiter.close());
  const keys = new KeyStore(keysPool);
  await keys.reload();
  const { version, changeWaker } = followChanges({ config, logger, shutdown, read, keys }, readPool, listen);
  const statusOptions = {
    ...DEFAULT_STATUS_OPTIONS,
    graceMs: config.STALE_GRACE_S * 1000,
    deadAfterMs: config.MATERIALIZER_DEAD_AFTER_S * 1000,
    stallAfterMs: config.PIPELINE_STALL_AFTER_S * 1000,
    maxReplicaLagMs: config.REPLICA_MAX_LAG_S * 1000,
  };
  // /metrics carries what /v1/status knows, for the alert rules (infra/prometheus).
  // A worker's report must be in before the primary's aggregation gives up on it (5 s, prom-client).
  metrics.observeStatus(() => loadStatus(read, statusOptions), role === 'worker' ? { timeoutMs: 3_000 } : {});
  const app = buildApp({
    keys,
    limiter,
    read,
    version: (deps) => version.value(deps),
    derived: {
      version: () => version.derived(),
      maxLagMs: config.DERIVED_MAX_LAG_MS,
      scores: () => version.scores(),
    },
    resets: () => version.resets(),
    watch: (listener) => version.onBump(listener),
    logger,
    status: statusOptions,
    failedAuth: new FailedAuthLimiter(config.AUTH_FAILURES_PER_MINUTE),
    metrics,
    changeWaker,
    // A key's open streams are counted over this machine's workers by the primary (cluster.ts).
    streamSlots: role === 'worker' ? new SharedStreamSlots() : undefined,
    wholeReadsAtOnce: config.WHOLE_READS_AT_ONCE,
    // Connected on the first webhook request only (webhooks/store.ts).
    webhooks: {
      databaseUrl: config.WEBHOOKS_DATABASE_URL ?? config.DATABASE_URL,
      schema: config.WEBHOOKS_SCHEMA,
      secretKeys: config.WEBHOOK_SECRET_KEYS,
      allowPrivateUrls: config.WEBHOOK_ALLOW_PRIVATE_URLS,
      applicationName: `${config.DB_APPLICATION_NAME}-webhooks`,
    },
  });
  await app.listen({ host: config.API_HOST, port: config.API_PORT });
  shutdown.register('http', () => app.close());
  if (role === 'worker') stopOnPrimarysSignal(shutdown);
  else shutdown.listen();
  logger.info(
    {
      host: config.API_HOST,
      port: config.API_PORT,
      limiter: config.REDIS_URL ? 'redis' : role === 'worker' ? 'cluster primary' : 'memory',
      database: standby ? 'standby' : 'primary',
      listen,
      pid: process.pid,
    },
    'api listening',
  );
}

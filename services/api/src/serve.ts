/**
 * One API process: config → pools, the schemas it reads, key store, limiter, read model, followers,
 * listener → Fastify. It writes nothing, so it runs on a hot standby as on a primary. Run alone, or
 * as one of a cluster primary's workers (cluster.ts), which then serves the metrics and, without
 * Redis, counts the rate limits.
 */
import { AggregatorRegistry } from 'prom-client';
import { ShutdownManager, type Logger } from '@skinprices/runtime';
import { createPool, READ_CONTRACT_V1, waitForContract, type Pool } from '@skinprices/store';
import { buildApp } from './app.js';
import { ChangeFollower } from './changes/follower.js';
import { ChangeWaker } from './changes/waker.js';
import type { ApiConfig } from './config.js';
import { KEYS_CONTRACT, KeyStore } from './keys.js';
import { FailedAuthLimiter, MemoryRateLimiter, RedisRateLimiter, type RateLimiter } from './limits.js';
import { SharedRateLimiter } from './limits-shared.js';
import { ApiMetrics } from './metrics.js';
import { ReadModel } from './readmodel.js';
import { DEFAULT_STATUS_OPTIONS, loadStatus } from './status.js';
import { PgNotifications, ReadModelVersion } from './version.js';

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

export async function serve(config: ApiConfig, logger: Logger, role: Role): Promise<void> {
  const shutdown = new ShutdownManager(logger);
  const { keysPool, readPool } = await openPools(config, logger, shutdown);
  const read = new ReadModel(readPool);
  const standby = (await read.replication()).standby;
  const listen = config.DB_LISTEN === 'auto' ? !standby : config.DB_LISTEN === 'true';
  const metrics = new ApiMetrics();
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
  metrics.observeStatus(() => loadStatus(read, statusOptions));
  const served = await exposeMetrics(config, role, metrics, logger);
  if (served) shutdown.register('metrics', served.close);
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
    wholeReadsAtOnce: config.WHOLE_READS_AT_ONCE,
  });
  await app.listen({ host: config.API_HOST, port: config.API_PORT });
  shutdown.register('http', () => app.close());
  // A worker stops on its primary's SIGTERM only: Ctrl-C's SIGINT reaches the whole process group,
  // and would otherwise count as a second signal after the primary's and cut the drain short.
  if (role === 'worker') process.on('SIGINT', () => undefined);
  shutdown.listen(undefined, role === 'worker' ? ['SIGTERM'] : undefined);
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

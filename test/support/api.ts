/**
 * The read API over a test's read-model schema, as the pipeline tests use it: keys in a schema of
 * their own (one key per plan asked for), an in-memory limiter, a silent logger, closed with the
 * stack. `listen` puts it on a loopback port for real clients (fetch, curl, Chromium).
 */
import {
  API_MIGRATIONS_DIR,
  buildApp,
  KeyStore,
  MemoryRateLimiter,
  ReadModel,
  type AppDeps,
  type Plan,
} from '@skinprices/api';
import { createLogger } from '@skinprices/runtime';
import { migrate, type Pool } from '@skinprices/store';
import type { FastifyInstance } from 'fastify';
import type { TestStack } from './stack.js';

export interface TestApi {
  app: FastifyInstance;
  store: KeyStore;
  /** A key per plan asked for (customer `<plan>@<customer>`). */
  keys: Record<Plan, string>;
  /** The loopback origin when listening. */
  origin?: string;
}

export async function startApi(
  stack: TestStack,
  pool: Pool,
  o: {
    plans?: readonly Plan[];
    customer?: string;
    listen?: boolean;
    /** Overrides of buildApp's dependencies (version, status options, change polling …). */
    deps?: Partial<AppDeps>;
  } = {},
): Promise<TestApi> {
  const keysSchema = await stack.schema();
  await migrate(keysSchema.pool, API_MIGRATIONS_DIR);
  const store = new KeyStore(keysSchema.pool);
  const keys = {} as Record<Plan, string>;
  for (const plan of o.plans ?? ['basic'])
    keys[plan] = (await store.create({ customer: `${plan}@${o.customer ?? 'test.example'}`, plan })).secret;
  const app = buildApp({
    keys: store,
    limiter: new MemoryRateLimiter(),
    read: new ReadModel(pool),
    version: () => 0,
    logger: createLogger('api', 'silent'),
    ...o.deps,
  });
  stack.defer(() => app.close());
  if (!o.listen) {
    await app.ready();
    return { app, store, keys };
  }
  const origin = await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, store, keys, origin };
}

/**
 * /v1/status against a real pipeline: a poller, a materializer running as its own process (so it
 * can be SIGKILLed), real Kafka and PostgreSQL. A complete cycle is fresh by the wall clock; a dead
 * materializer shows as `down` within its dead-after threshold (30 s in production, 3 s here).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  API_MIGRATIONS_DIR,
  buildApp,
  DEFAULT_STATUS_OPTIONS,
  KeyStore,
  MemoryRateLimiter,
  ReadModel,
} from '@skinprices/api';
import { createLogger } from '@skinprices/runtime';
import { migrate, parsePayload, type Pool } from '@skinprices/store';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  materializerEnv,
  projectTopics,
  startPoller,
  startSimulator,
  untilApplied,
  type Sim,
} from '../support/pipeline.js';
import { TestStack } from '../support/stack.js';

interface Status {
  status: string;
  pipeline: {
    status: string;
    problems: string[];
    materializers: { alive: boolean; state: string; lag: number | null }[];
  };
  markets: {
    market: string;
    kind: string;
    stale: boolean;
    age_seconds: number | null;
    refresh_interval_seconds: number;
  }[];
}

describe('/v1/status on a real pipeline', () => {
  const stack = new TestStack();
  let sim: Sim;
  let suffix: string;
  let pool: Pool;
  let schema: string;
  let app: FastifyInstance;
  let key: string;
  let child: ChildProcess;
  let log = '';

  beforeAll(async () => {
    sim = await startSimulator(stack, 40);
    suffix = await projectTopics(stack);
    const read = await stack.schema();
    pool = read.pool;
    schema = read.name;
    child = spawn(process.execPath, ['--import', 'tsx', 'services/materializer/src/main.ts'], {
      env: {
        ...process.env,
        ...materializerEnv(
          stack,
          { schema: read.name, group: stack.groupId(), suffix },
          { HEARTBEAT_INTERVAL_MS: '1000', LOG_LEVEL: 'warn' },
        ),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.on('data', (c: Buffer) => (log += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (log += c.toString()));
    stack.defer(async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await new Promise((r) => child.once('exit', r));
      }
    });
    const k = await stack.schema();
    await migrate(k.pool, API_MIGRATIONS_DIR);
    const keys = new KeyStore(k.pool);
    key = (await keys.create({ customer: 'ops@example.com', plan: 'basic' })).secret;
    app = buildApp({
      keys,
      limiter: new MemoryRateLimiter(),
      read: new ReadModel(pool),
      version: () => 0,
      logger: createLogger('api', 'silent'),
      status: { ...DEFAULT_STATUS_OPTIONS, deadAfterMs: 3_000, stallAfterMs: 60_000 },
    });
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await stack.cleanup();
  });

  const status = async (): Promise<Status> => {
    const res = await app.inject({ method: 'GET', url: '/v1/status', headers: { 'x-api-key': key } });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };

  async function until(
    what: string,
    ok: (s: Status) => boolean,
    timeoutMs: number,
  ): Promise<{ s: Status; ms: number }> {
    const t0 = Date.now();
    for (;;) {
      const s = await status().catch(() => undefined);
      if (s && ok(s)) return { s, ms: Date.now() - t0 };
      if (Date.now() - t0 > timeoutMs)
        throw new Error(`${what}: not within ${timeoutMs} ms\n${JSON.stringify(s)}\n${log}`);
      await sleep(200);
    }
  }

  it('a complete cycle is fresh on the wall clock, and the live materializer is reported with its lag', async () => {
    // The materializer migrates the schema; wait for its first heartbeat.
    await until('heartbeat', (s) => s.pipeline.materializers.some((m) => m.alive), 60_000);
    // Every commit's NOTIFY names what it touched, so the API rebuilds only those bodies.
    const listener = await pool.connect();
    const payloads: string[] = [];
    listener.on('notification', (msg) => payloads.push(msg.payload ?? ''));
    await listener.query('LISTEN skinprices_readmodel');
    const { poller } = await startPoller(stack, sim, 'cn-a', suffix);
    await untilApplied(pool, (await poller.runOnce('LISTINGS')).marker.cycle_id, 60_000);
    await sleep(200);
    await listener.query('UNLISTEN *');
    listener.release();
    const tags = new Set(payloads.flatMap((p) => parsePayload(p).tags ?? ['untagged']));
    expect(payloads.every((p) => parsePayload(p).schema === schema)).toBe(true);
    // Ingest: the rows (`listing:cn-a`) and the candles (`candles:cn-a`); the derive path's
    // transactions: `derived` (markers, and the second look if a verdict moved). No liquidity
    // score changed (`scores`): a day's score reads the day before's closes, and there are none.
    expect([...tags].sort()).toEqual(['candles:cn-a', 'derived', 'listing:cn-a']);
    // The heartbeat measures lag on its own beat, so the first one after the batch may still count it.
    const { s } = await until(
      'lag 0 measured after the batch',
      (x) => x.pipeline.status === 'ok' && x.pipeline.materializers[0]?.lag === 0,
      20_000,
    );
    expect(s.markets.find((m) => m.market === 'cn-a' && m.kind === 'LISTINGS')).toMatchObject({
      stale: false,
      refresh_interval_seconds: 300,
    });
    expect(s.pipeline.materializers[0]).toMatchObject({ alive: true, state: 'consuming', lag: 0 });
  });

  // Root cause guarded: a dead materializer showed nothing in /v1/status.
  it('a SIGKILLed materializer shows as down within its dead-after threshold', async () => {
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    const { s, ms } = await until('down', (x) => x.pipeline.status === 'down', 15_000);
    console.log(`materializer SIGKILLed: /v1/status said down after ${ms} ms (threshold 3 s, heartbeat 1 s)`);
    expect(s.status).toBe('degraded');
    expect(s.pipeline.problems.join()).toMatch(/no materializer heartbeat/);
  });
});

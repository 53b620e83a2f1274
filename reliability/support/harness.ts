/**
 * What every chaos scenario shares: its command line (`--smoke --seed --out`), a seeded random
 * source, the API as a process with keys of its own, bounded waiting, and its result file.
 * Processes that must die with the scenario, wrk-free statistics and result writing come from
 * the benchmarks' harness (bench/support/harness.ts), which this extends rather than copies.
 */
import { type ChildProcess } from 'node:child_process';
import { parseArgs } from 'node:util';
import { API_MIGRATIONS_DIR, KeyStore, type CreateKeyInput } from '@skinprices/api';
import { waitForUrl } from '@skinprices/runtime';
import { deleteTopics, ensureTopics, topicDefinitions } from '@skinprices/events';
import { createPool, ensureSchema, migrate } from '@skinprices/store';
import { SecretBox, WEBHOOKS_MIGRATIONS_DIR } from '@skinprices/webhooks';
import { freePort } from '../../test/support/services.js';
import { type TestStack, uniqueName } from '../../test/support/stack.js';
import { startService, stopProcess, writeResult } from '../../bench/support/harness.js';

export { startService, stopProcess } from '../../bench/support/harness.js';

export interface ChaosArgs {
  /** The size `make test` runs: the same scenario, fewer kills, rounds and requests. */
  smoke: boolean;
  /** Every random choice of the scenario derives from it (printed, in the result). */
  seed: number;
  /** Where the scenario writes its JSON. */
  out: string;
}

const aborts: (() => void)[] = [];
/**
 * Runs `f` (synchronously) when the run stops this scenario for going over its time budget
 * (SIGTERM), before the process exits; children started through startProcess are stopped then too.
 */
export function onAbort(f: () => void): void {
  aborts.push(f);
}

export function chaosArgs(name: string): ChaosArgs {
  // Node's default for SIGTERM skips 'exit' handlers, which stop the services a scenario started.
  process.once('SIGTERM', () => {
    for (const f of aborts.splice(0)) f();
    process.exit(143);
  });
  const { values } = parseArgs({
    options: {
      smoke: { type: 'boolean', default: false },
      seed: { type: 'string' },
      out: { type: 'string', default: `reliability/results/${name}.json` },
    },
    strict: true,
  });
  const seed = Number(values.seed ?? process.env.CHAOS_SEED ?? Date.now() % 2 ** 31);
  if (!Number.isSafeInteger(seed) || seed < 0) throw new Error(`--seed: a non-negative integer, got '${values.seed}'`);
  return { smoke: values.smoke as boolean, seed, out: values.out as string };
}

/** A scenario's own seed from the run's: scenarios stay reproducible when run alone (--only). */
export function scenarioSeed(runSeed: number, scenario: string): number {
  let h = runSeed >>> 0;
  for (const c of scenario) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193) >>> 0;
  return h;
}

/** mulberry32: small, fast and good enough to choose kill points and fault parameters. */
export class Rng {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  }
  /** Integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  pick<T>(xs: readonly T[]): T {
    if (xs.length === 0) throw new Error('pick from nothing');
    return xs[Math.floor(this.next() * xs.length)] as T;
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `probe` until it returns a value (not undefined) or the deadline passes (then undefined). */
export async function within<T>(timeoutMs: number, probe: () => Promise<T | undefined>, everyMs = 100) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) return undefined;
    await sleep(everyMs);
  }
}

/**
 * Runs `f` up to `times` times: creating topics while other test runs create and delete theirs on
 * the same broker now and then meets a transient metadata error (UNKNOWN_TOPIC_OR_PARTITION).
 */
async function retry<T>(times: number, f: () => Promise<T>): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await f();
    } catch (err) {
      if (i >= times) throw err;
      await sleep(1_000 * i);
    }
  }
}

/**
 * The project's topics under a suffix of this run (as test/support's projectTopics), each created
 * with retries: on the three-node cluster kafkajs's createTopics, waiting for leaders, fails about
 * every second time with UNKNOWN_TOPIC_OR_PARTITION although the topic was created (a broker asked
 * for metadata before it heard of the topic); ensureTopics skips what exists, so retrying is safe.
 * Deleted, with their schema subjects, at the stack's clean-up.
 */
export async function runTopics(stack: TestStack): Promise<string> {
  const suffix = `.${uniqueName('t')}`;
  const names = topicDefinitions().map((t) => `${t.name}${suffix}`);
  stack.defer(async () => {
    await deleteTopics(stack.kafka, names);
    for (const n of names) await stack.serde.deleteSubject(`${n}-value`).catch(() => undefined);
  });
  for (const t of topicDefinitions())
    await retry(5, () => ensureTopics(stack.kafka, [{ ...t, name: `${t.name}${suffix}` }]));
  return suffix;
}

/** Writes the scenario's result (with its seed and mode) and prints one line. */
export async function writeScenario(args: ChaosArgs, result: Record<string, unknown>): Promise<void> {
  await writeResult(args.out, { mode: args.smoke ? 'smoke' : 'full', seed: args.seed, ...result });
  console.log(`wrote ${args.out}`);
}

// ---- the API as deployed, on a read-model schema of the scenario -------------------------------

export interface ApiProcess {
  url: string;
  port: number;
  child: ChildProcess;
  /** Times the process was found dead and started again. */
  restarts: number;
  /** Starts it again if it died (a supervisor would); true when it had to. */
  ensureAlive(): Promise<boolean>;
  /** SIGTERM, SIGKILL after `graceMs`; resolves with the seconds it took and whether it had to kill. */
  stop(graceMs?: number): Promise<{ seconds: number; killed: boolean }>;
}

const HOOK_KEYS = `k1:${SecretBox.generateKey()}`;

/** An API process on the scenario's schemas, with the webhook routes configured (`<keys>_hooks`). */
export async function startApi(env: {
  databaseUrl: string;
  schema: string;
  keysSchema: string;
  extra?: Record<string, string>;
}): Promise<ApiProcess> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  // Webhooks configured as deployed (the notifier's schema beside the keys', migrated here as the
  // notifier would): otherwise their routes answer 503, which the fuzz rightly counts as a 5xx.
  const hooksSchema = `${env.keysSchema}_hooks`;
  const hooksPool = createPool({ databaseUrl: env.databaseUrl, schema: hooksSchema, max: 1 });
  await ensureSchema(hooksPool, hooksSchema);
  await migrate(hooksPool, WEBHOOKS_MIGRATIONS_DIR);
  await hooksPool.end();
  const launch = () =>
    startService(
      'services/api/src/main.ts',
      {
        DATABASE_URL: env.databaseUrl,
        DATABASE_SCHEMA: env.schema,
        KEYS_SCHEMA: env.keysSchema,
        API_HOST: '127.0.0.1',
        API_PORT: String(port),
        WEBHOOKS_SCHEMA: hooksSchema,
        WEBHOOK_SECRET_KEYS: HOOK_KEYS,
        LOG_LEVEL: 'error',
        // API_PROCESSES left at its default (a cluster primary and a worker per core), as deployed:
        // without Redis the limiter scenario's counts are then the primary's, shared by the workers.
        ...env.extra,
      },
      undefined,
      // Its log goes nowhere: the fuzz makes it log every 500 it answers; the answers are counted.
      'ignore',
    );
  const api: ApiProcess = {
    url,
    port,
    child: launch(),
    restarts: 0,
    async ensureAlive() {
      if (api.child.exitCode === null && api.child.signalCode === null) return false;
      api.restarts++;
      api.child = launch();
      await waitForUrl(`${url}/openapi.json`, 120_000, 100);
      return true;
    },
    async stop(graceMs = 10_000) {
      const t0 = Date.now();
      let killed = false;
      api.child.once('exit', (_code, signal) => (killed = signal === 'SIGKILL'));
      await stopProcess(api.child, graceMs);
      return { seconds: (Date.now() - t0) / 1000, killed };
    },
  };
  await waitForUrl(`${url}/openapi.json`, 120_000, 100);
  return api;
}

/** Migrates the keys schema (as `make run` does) and creates keys; returns their secrets by name. */
export async function createKeys<N extends string>(
  databaseUrl: string,
  keysSchema: string,
  keys: Record<N, CreateKeyInput>,
): Promise<Record<N, string>> {
  const pool = createPool({ databaseUrl, schema: keysSchema, max: 1 });
  try {
    await ensureSchema(pool, keysSchema);
    await migrate(pool, API_MIGRATIONS_DIR);
    const store = new KeyStore(pool);
    const out = {} as Record<N, string>;
    for (const [name, input] of Object.entries(keys) as [N, CreateKeyInput][])
      out[name] = (await store.create(input)).secret;
    return out;
  } finally {
    await pool.end();
  }
}

/** An error's message, for result files (never a stack). */
export const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

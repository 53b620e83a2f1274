/**
 * The platform under soak, booted exactly as `make run` boots it (infra/local/run.ts: simulator, a
 * poller per marketplace at its normal intervals, materializer, API, each its own process under one
 * supervisor) on topics, schemas, keys and ports of its own, all removed afterwards. The API's
 * limiter is Redis when Redis answers on loopback, as a deployment of several APIs runs it. The
 * services inherit this process's environment, so a run can set any of their variables.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { deleteTopics, topicDefinitions } from '@skinprices/events';
import { waitForUrl } from '@skinprices/runtime';
import { createPool } from '@skinprices/store';
import { portFree, processExists } from '../../infra/local/run-guard.js';
import { TestStack, uniqueName } from '../../test/support/stack.js';

/** The metrics listeners sit this far above the API port: the materializer's, the API's, then the pollers'. */
const METRICS_OFFSET = 20;
/** Ports from the API's: API, simulator control, 14 marketplaces, then 16 metrics listeners. */
const BLOCK = METRICS_OFFSET + 16;

export interface Platform {
  api: string;
  control: string;
  apiMetrics: string;
  materializerMetrics: string;
  /** The enterprise demo key `make run` issued. */
  key: string;
  limiter: 'redis' | 'memory';
  /** The supervisor's process. */
  child: ChildProcess;
  /** SIGINT, as Ctrl-C on `make run`; SIGKILLs what is left after `graceMs` (default 60 s). */
  stop: (graceMs?: number) => Promise<StopResult>;
  /** Removes the platform's topics, subjects and schemas. */
  remove: () => Promise<void>;
}

export interface StopResult {
  seconds: number;
  exit: number | string | null;
  /** Services still running after the supervisor exited (then killed). */
  survivors: string[];
}

/**
 * A base port below Linux's ephemeral range whose whole block is free (as the end-to-end test
 * finds one: a random base alone met other services' ports on these machines).
 */
async function freeBlock(): Promise<number> {
  for (let tries = 0; tries < 50; tries++) {
    const base = 20_000 + Math.floor(Math.random() * 10_000);
    const probes = await Promise.all(Array.from({ length: BLOCK }, (_, i) => portFree('127.0.0.1', base + i)));
    if (probes.every((p) => p.free)) return base;
  }
  throw new Error(`no free block of ${BLOCK} ports between 20000 and 30000`);
}

/** Whether a Redis server answers PING at host:port within a second. */
function redisAnswers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host, port });
    const done = (ok: boolean) => (s.destroy(), resolve(ok));
    s.setTimeout(1_000, () => done(false));
    s.once('connect', () => s.write('PING\r\n'));
    s.once('data', (d: Buffer) => done(d.toString().startsWith('+PONG')));
    s.once('error', () => done(false));
  });
}

export async function startPlatform(o: {
  catalogue: number;
  pollListingsMs: number;
  logFile: string;
}): Promise<Platform> {
  const stack = new TestStack();
  const tag = uniqueName('soak');
  const port = await freeBlock();
  const keysFile = join(mkdtempSync(join(tmpdir(), 'soak-')), 'demo-keys.json');
  const redis = (await redisAnswers('127.0.0.1', 6379)) ? 'redis://127.0.0.1:6379' : undefined;
  const child = launch(o.logFile, {
    KAFKA_BROKERS: stack.env.brokers,
    SCHEMA_REGISTRY_URL: stack.env.registryUrl,
    DATABASE_URL: stack.env.databaseUrl,
    TOPIC_SUFFIX: `.${tag}`,
    DATABASE_SCHEMA: tag,
    KEYS_SCHEMA: `${tag}_keys`,
    WEBHOOKS_SCHEMA: `${tag}_webhooks`,
    API_PORT: String(port),
    SIM_CONTROL_PORT: String(port + 1),
    SIM_BASE_PORT: String(port + 2),
    METRICS_PORT_OFFSET: String(METRICS_OFFSET),
    DEMO_KEYS_FILE: keysFile,
    RUN_CATALOGUE_SIZE: String(o.catalogue),
    POLL_LISTINGS_MS: String(o.pollListingsMs),
    // The steady state, not the warm demo's import of 400 days of history (minutes of backfill
    // that would fill the windows the soak compares); a month of the history-only marketplace.
    RUN_WARM: 'false',
    HISTORY_BACKFILL_DAYS: '30',
    ...(redis ? { REDIS_URL: redis } : {}),
  });
  const api = `http://127.0.0.1:${port}`;
  const remove = () => removeRun(stack, tag, keysFile);
  try {
    await untilUp(child, `${api}/openapi.json`, o.logFile);
  } catch (err) {
    await stopPlatform(child);
    await remove();
    throw err;
  }
  let stopped: Promise<StopResult> | undefined;
  return {
    api,
    control: `http://127.0.0.1:${port + 1}`,
    materializerMetrics: `http://127.0.0.1:${port + METRICS_OFFSET}/metrics`,
    apiMetrics: `http://127.0.0.1:${port + METRICS_OFFSET + 1}/metrics`,
    key: (JSON.parse(readFileSync(keysFile, 'utf8')) as { enterprise: string }).enterprise,
    limiter: redis ? 'redis' : 'memory',
    child,
    // Once: a second call (the soak's clean-up after its own stop) gets the first one's result.
    stop: (graceMs) => (stopped ??= stopPlatform(child, graceMs)),
    remove,
  };
}

/** `make run` with `env` over this process's environment, its output appended to `logFile`. */
function launch(logFile: string, env: Record<string, string>): ChildProcess {
  mkdirSync(dirname(logFile), { recursive: true });
  const log = openSync(logFile, 'a');
  const child = spawn(process.execPath, ['--import', 'tsx', 'infra/local/run.ts'], {
    env: { ...process.env, ...env },
    stdio: ['ignore', log, log],
  });
  closeSync(log); // the child holds its own copy
  // However this process ends, the supervisor is asked to stop its services.
  process.on('exit', () => child.kill('SIGINT'));
  return child;
}

/** Until `url` answers; throws at once when `make run` exits first (it refused to start). */
async function untilUp(child: ChildProcess, url: string, logFile: string): Promise<void> {
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code) =>
      reject(new Error(`make run exited (${String(code)}) before the API answered: see ${logFile}`)),
    ),
  );
  await Promise.race([waitForUrl(url, 300_000, 500), exited]);
}

/**
 * Deletes what the run made: topics, their schema subjects, the read-model and keys schemas, the
 * keys file. Each step on its own: a platform that never started has created only some of them.
 */
async function removeRun(stack: TestStack, tag: string, keysFile: string): Promise<void> {
  rmSync(dirname(keysFile), { recursive: true, force: true });
  const names = topicDefinitions().map((t) => `${t.name}.${tag}`);
  const problems: string[] = [];
  const step = (what: string, f: () => Promise<unknown>) =>
    f().catch((err: unknown) => problems.push(`${what}: ${String(err)}`));
  await step('topics', async () => {
    // Deleting a topic that was never created fails the whole request.
    const admin = stack.kafka.admin();
    await admin.connect();
    const existing = new Set(await admin.listTopics().finally(() => admin.disconnect()));
    await deleteTopics(
      stack.kafka,
      names.filter((n) => existing.has(n)),
    );
  });
  for (const n of names) await stack.serde.deleteSubject(`${n}-value`).catch(() => undefined);
  const admin = createPool({ databaseUrl: stack.env.databaseUrl, max: 1 });
  await step('schemas', () =>
    admin.query(
      `DROP SCHEMA IF EXISTS ${tag} CASCADE; DROP SCHEMA IF EXISTS ${tag}_keys CASCADE; DROP SCHEMA IF EXISTS ${tag}_webhooks CASCADE`,
    ),
  );
  await admin.end();
  if (problems.length) console.error(`clean-up: ${problems.join('; ')}`);
}

async function stopPlatform(child: ChildProcess, graceMs = 60_000): Promise<StopResult> {
  const services = serviceProcesses(child.pid as number);
  const t0 = Date.now();
  const exited = new Promise<void>((resolve) =>
    child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve()),
  );
  child.kill('SIGINT');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
  const seconds = (Date.now() - t0) / 1000;
  // The services run in process groups of their own: a supervisor killed leaves them running.
  const survivors = [...services].filter(([name, pid]) => name !== 'supervisor' && processExists(pid));
  for (const [, pid] of survivors) process.kill(pid, 'SIGKILL');
  return { seconds, exit: child.exitCode ?? child.signalCode, survivors: survivors.map(([name]) => name) };
}

/**
 * The platform's processes by service name (`supervisor`, `simulator`, `poller cn-a`, …,
 * `materializer`, `api`) → pid: the supervisor's process tree, each named by its bundle and, for
 * a poller, its MARKET.
 */
export function serviceProcesses(rootPid: number): Map<string, number> {
  const ps = spawnSync('ps', ['-eo', 'pid=,ppid='], { encoding: 'utf8' }).stdout;
  const procs = ps
    .trim()
    .split('\n')
    .map((l) => l.trim().split(/\s+/).map(Number) as [number, number]);
  const tree = new Set<number>([rootPid]);
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, ppid] of procs)
      if (!tree.has(pid) && tree.has(ppid)) {
        tree.add(pid);
        grew = true;
      }
  }
  const out = new Map<string, number>();
  for (const pid of tree) {
    const name = serviceName(pid);
    if (name) out.set(name, pid);
  }
  return out;
}

function serviceName(pid: number): string | undefined {
  try {
    const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    if (cmd.some((a) => a.endsWith('infra/local/run.ts'))) return 'supervisor';
    const bundle = cmd.find((a) => a.endsWith('.mjs'));
    if (!bundle) return undefined;
    const service = basename(bundle, '.mjs');
    if (service !== 'poller') return service;
    const env = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    return `poller ${env.find((e) => e.startsWith('MARKET='))?.slice(7) ?? '?'}`;
  } catch {
    return undefined; // gone meanwhile
  }
}

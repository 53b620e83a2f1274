import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  acquireRunLock,
  checkPorts,
  claimPlatform,
  isLiveRun,
  platformPorts,
  portFree,
  runLockFile,
  type PlannedPort,
} from './run-guard.js';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** Occupies a free loopback port, as the first `make run`'s API would. */
async function occupy(host = '127.0.0.1'): Promise<number> {
  const server = createServer();
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, host, r));
  return (server.address() as { port: number }).port;
}

/** A port nobody listens on (taken, then given back). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

const tmpLock = (): string => join(mkdtempSync(join(tmpdir(), 'run-guard-')), 'run', 'platform.pid');
const me = { pid: process.pid, startedAt: '2026-01-01T00:00:00.000Z', api: 'http://127.0.0.1:8080' };
/** The pid of a process that has exited. */
const deadPid = (): number => spawnSync(process.execPath, ['-e', '0']).pid as number;

describe('run lock', () => {
  it('is taken, written with our pid, and released', () => {
    const file = tmpLock();
    const lock = acquireRunLock(file, me, () => true);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual(me);
    lock.release();
    expect(existsSync(file)).toBe(false);
  });

  it('refuses while another live run holds it, naming that run', () => {
    const file = tmpLock();
    acquireRunLock(file, { ...me, pid: 4242 }, () => true);
    expect(() => acquireRunLock(file, me, (pid) => pid === 4242)).toThrowError(
      expect.objectContaining({
        code: 'busy',
        message: expect.stringMatching(/already running \(pid 4242, .*API at http:\/\/127\.0\.0\.1:8080\)/),
      }),
    );
  });

  it('takes over a stale lock: its process is gone or is no longer a run (recycled pid)', () => {
    const file = tmpLock();
    mkdirSync(dirname(file), { recursive: true });
    for (const stale of [`{"pid":${deadPid()},"startedAt":"x"}`, `${process.pid === 1 ? 2 : 1}\n`, 'garbage']) {
      writeFileSync(file, stale);
      const lock = acquireRunLock(file, me);
      expect(JSON.parse(readFileSync(file, 'utf8')).pid).toBe(process.pid);
      lock.release();
    }
  });

  it('release leaves a lock that is no longer ours alone', () => {
    const file = tmpLock();
    const lock = acquireRunLock(file, me, () => false);
    writeFileSync(file, JSON.stringify({ ...me, pid: 4242 }));
    lock.release();
    expect(existsSync(file)).toBe(true);
  });

  it('knows a live run by its command line, and a dead pid as none', async () => {
    expect(isLiveRun(deadPid())).toBe(false);
    // Not run.ts: the test runner itself.
    expect(isLiveRun(process.pid)).toBe(false);
    const fake = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)', 'infra/local/run.ts'], {
      stdio: 'ignore',
    });
    try {
      await new Promise((r) => fake.once('spawn', r));
      expect(isLiveRun(fake.pid as number)).toBe(true);
    } finally {
      fake.kill('SIGKILL');
    }
  });

  it('is one per keys schema and database, so runs with keys of their own do not block each other', () => {
    const a = runLockFile('/x/.local', 'postgres://postgres@127.0.0.1:5432/skinprices', 'api');
    expect(a).toBe('/x/.local/run/platform-127.0.0.1-5432-skinprices-api.pid');
    expect(runLockFile('/x/.local', 'postgres://postgres@127.0.0.1:5432/skinprices', 'e2e_1_keys')).not.toBe(a);
  });
});

describe('port check', () => {
  it('plans the API, the simulator control port and one port per marketplace', () => {
    expect(
      platformPorts({
        apiHost: '127.0.0.1',
        apiPort: 8080,
        simHost: '127.0.0.1',
        simControlPort: 7100,
        simBasePort: 7101,
        markets: ['cn-a', 'cn-b'],
      }).map((p) => `${p.owner}=${p.port}`),
    ).toEqual(['api=8080', 'simulator control=7100', 'simulator cn-a=7101', 'simulator cn-b=7102']);
  });

  it('sees a port held by a listener, on 127.0.0.1 or on every address', async () => {
    expect(await portFree('127.0.0.1', await occupy())).toEqual({ free: false, reason: 'in use' });
    expect((await portFree('127.0.0.1', await occupy('0.0.0.0'))).free).toBe(false);
    expect(await portFree('127.0.0.1', await freePort())).toEqual({ free: true });
  });

  it('names every taken port, and passes when all are free', async () => {
    const taken = await occupy();
    const ports: PlannedPort[] = [
      { owner: 'api', host: '127.0.0.1', port: await freePort() },
      { owner: 'simulator cn-a', host: '127.0.0.1', port: taken },
    ];
    await expect(checkPorts(ports)).rejects.toMatchObject({
      code: 'busy',
      message: expect.stringContaining(`127.0.0.1:${taken} (simulator cn-a: in use)`),
    });
    await expect(checkPorts(ports.slice(0, 1))).resolves.toBeUndefined();
    const many = await Promise.all(
      Array.from({ length: 6 }, async (_, i) => ({ owner: `simulator ${i}`, host: '127.0.0.1', port: await occupy() })),
    );
    await expect(checkPorts(many)).rejects.toMatchObject({ message: expect.stringContaining('and 2 more.') });
  });

  it('second make run: a taken port refuses the claim and gives the lock back (issue 13)', async () => {
    // Root cause: run.ts checked nothing; the second run's health checks were answered by the
    // first run's simulator and API, so it said "up" while its own crash-looped on the ports.
    const file = tmpLock();
    const port = await occupy();
    await expect(
      claimPlatform(file, me, [{ owner: 'api', host: '127.0.0.1', port }], () => false),
    ).rejects.toMatchObject({ code: 'busy' });
    expect(existsSync(file)).toBe(false);
  });
});

/** Runs infra/local/run.ts as `make run` does and returns its exit code and output. */
async function makeRun(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'infra/local/run.ts'], {
    env: {
      ...process.env,
      // Nothing real to reach: were the guard to let it pass, it could not touch anyone's data.
      DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
      KAFKA_BROKERS: '127.0.0.1:1',
      SCHEMA_REGISTRY_URL: 'http://127.0.0.1:1/apis/ccompat/v7',
      KEYS_SCHEMA: 'run_guard_test',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const code = await new Promise<number | null>((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.once('exit', (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
  return { code, output };
}

describe('make run (infra/local/run.ts) when the platform is already there', () => {
  it('second make run refuses before it touches the demo keys or their file, with a non-zero exit (issue 13)', async () => {
    // Root cause: the second run deleted the first run's demo keys and overwrote
    // .local/demo-keys.json before any of its services found their ports taken.
    const dir = mkdtempSync(join(tmpdir(), 'run-guard-'));
    const keysFile = join(dir, 'demo-keys.json');
    writeFileSync(keysFile, '{"first":"run"}\n');
    const apiPort = await occupy();
    const sim = await freePort();
    const { code, output } = await makeRun({
      SKINPRICES_LOCAL_DIR: dir,
      API_PORT: String(apiPort),
      SIM_CONTROL_PORT: String(sim),
      SIM_BASE_PORT: String(sim + 1),
      DEMO_KEYS_FILE: keysFile,
    });
    expect(output).toContain('make run refused to start');
    expect(output).toContain(`127.0.0.1:${apiPort} (api: in use)`);
    expect(code).toBe(1);
    expect(readFileSync(keysFile, 'utf8')).toBe('{"first":"run"}\n');
    expect(readdirSync(join(dir, 'run'))).toEqual([]);
  }, 30_000);

  it('refuses while a live run holds the lock, naming its pid, and leaves its lock alone', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'run-guard-'));
    const lockFile = runLockFile(dir, 'postgres://nobody@127.0.0.1:1/none', 'run_guard_test');
    const first = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)', 'infra/local/run.ts'], {
      stdio: 'ignore',
    });
    try {
      await new Promise((r) => first.once('spawn', r));
      acquireRunLock(lockFile, { pid: first.pid as number, startedAt: 'earlier' });
      const { code, output } = await makeRun({ SKINPRICES_LOCAL_DIR: dir, API_PORT: String(await freePort()) });
      expect(output).toContain(`the platform is already running (pid ${first.pid}, started earlier)`);
      expect(code).toBe(1);
      expect(JSON.parse(readFileSync(lockFile, 'utf8')).pid).toBe(first.pid);
    } finally {
      first.kill('SIGKILL');
    }
  }, 30_000);
});

/**
 * `make run` must be the only platform using its ports and its demo keys. A second run used to
 * print "The platform is up" while its simulator and API crash-looped on the taken ports (its
 * health checks were answered by the first run), and on the way it deleted the first run's demo
 * keys and overwrote .local/demo-keys.json. So before run.ts touches anything it:
 *
 *   1. takes a lock file in .local/run (O_EXCL, holding its pid); a lock whose process is gone,
 *      or is no longer a `make run` (a recycled pid), is stale and taken over;
 *   2. tries to listen on every port the platform's services will bind; one it cannot have is
 *      taken, whoever holds it (the lock only knows runs that wrote one).
 *
 * Either failing is an AppError('busy') naming who or what is in the way; the lock is released
 * when the process exits.
 */
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { AppError } from '@skinprices/domain';

export interface PlannedPort {
  /** Who will listen there, for the message ("api", "simulator control", "simulator cn-a"). */
  owner: string;
  host: string;
  port: number;
}

export interface LockHolder {
  pid: number;
  startedAt: string;
  /** Where that run's API answers, for the message. */
  api?: string;
}

/** A run of `make run` is this process: alive, and its command line names run.ts. */
export type IsRun = (pid: number) => boolean;

/** The marker in a run's command line (`node --import tsx infra/local/run.ts`). */
const RUN_SCRIPT = 'infra/local/run.ts';

/** Whether process `pid` exists: a signal 0 to it is refused with ESRCH only when it does not (EPERM: another user's). */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Alive and still a `make run`: on Linux its /proc cmdline says so; elsewhere alive is enough. */
export const isLiveRun: IsRun = (pid) => {
  // Another user's process still tells what it is by its command line.
  if (!processExists(pid)) return false;
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8')
      .split('\0')
      .some((arg) => arg.endsWith(RUN_SCRIPT));
  } catch {
    return process.platform !== 'linux';
  }
};

/**
 * The lock of the platform whose demo keys live in `keysSchema` of `databaseUrl`'s database: two
 * runs that share those would delete each other's keys. Runs with keys of their own (the
 * end-to-end test, the benchmark) do not block each other; their ports are checked separately.
 */
export function runLockFile(localDir: string, databaseUrl: string, keysSchema: string): string {
  const url = new URL(databaseUrl);
  const db = `${url.hostname}-${url.port || '5432'}${url.pathname.replaceAll('/', '-')}`;
  const safe = `${db}-${keysSchema}`.replaceAll(/[^A-Za-z0-9_.-]/g, '_');
  return join(localDir, 'run', `platform-${safe}.pid`);
}

function readHolder(file: string): LockHolder | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  try {
    const parsed = JSON.parse(text) as LockHolder;
    if (Number.isInteger(parsed.pid) && parsed.pid > 0) return parsed;
  } catch {
    const pid = Number.parseInt(text, 10);
    if (Number.isInteger(pid) && pid > 0) return { pid, startedAt: 'unknown' };
  }
  return undefined;
}

export interface RunLock {
  readonly file: string;
  /** Removes the lock if it is still ours. Idempotent. */
  release(): void;
}

/**
 * Takes the lock or throws AppError('busy') naming the run that holds it. A stale lock (dead
 * process, recycled pid, unreadable file) is replaced; two attempts bound the loop.
 */
export function acquireRunLock(file: string, me: LockHolder, isRun: IsRun = isLiveRun): RunLock {
  mkdirSync(join(file, '..'), { recursive: true });
  for (let attempt = 0; attempt < 2; attempt++) {
    let fd: number;
    try {
      fd = openSync(file, 'wx');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = readHolder(file);
      if (holder && holder.pid !== me.pid && isRun(holder.pid))
        throw new AppError(
          'busy',
          `the platform is already running (pid ${holder.pid}, started ${holder.startedAt}` +
            `${holder.api ? `, API at ${holder.api}` : ''}). Stop it first (Ctrl-C in its terminal, or kill ${holder.pid}).`,
          { details: { lock: file, holder } },
        );
      rmSync(file, { force: true });
      continue;
    }
    writeSync(fd, `${JSON.stringify(me)}\n`);
    closeSync(fd);
    let released = false;
    return {
      file,
      release() {
        if (released) return;
        released = true;
        if (readHolder(file)?.pid === me.pid) rmSync(file, { force: true });
      },
    };
  }
  throw new AppError('busy', `could not take the lock ${file}: another run keeps replacing it`, {
    details: { lock: file },
  });
}

/**
 * Whether we could listen on `host:port` ourselves: the exact question a service will ask. A
 * listener on 0.0.0.0 or [::] blocks 127.0.0.1 as well, which a connect probe would also see,
 * but a bind probe needs no peer to answer and no timeout.
 */
export function portFree(host: string, port: number): Promise<{ free: true } | { free: false; reason: string }> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', (err: NodeJS.ErrnoException) =>
      resolve({ free: false, reason: err.code === 'EADDRINUSE' ? 'in use' : (err.code ?? err.message) }),
    );
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve({ free: true })));
  });
}

/**
 * The ports `make run`'s services will listen on: the API, the simulator's control port and one
 * per marketplace from SIM_BASE_PORT (registry order, as the simulator assigns them).
 */
export function platformPorts(o: {
  apiHost: string;
  apiPort: number;
  simHost: string;
  simControlPort: number;
  simBasePort: number;
  markets: readonly string[];
}): PlannedPort[] {
  return [
    { owner: 'api', host: o.apiHost, port: o.apiPort },
    { owner: 'simulator control', host: o.simHost, port: o.simControlPort },
    ...o.markets.map((m, i) => ({ owner: `simulator ${m}`, host: o.simHost, port: o.simBasePort + i })),
  ];
}

/** Every planned port someone else holds, with the reason (one at a time: at most a few dozen). */
async function takenPorts(ports: readonly PlannedPort[]): Promise<(PlannedPort & { reason: string })[]> {
  const taken: (PlannedPort & { reason: string })[] = [];
  for (const p of ports) {
    const r = await portFree(p.host, p.port);
    if (!r.free) taken.push({ ...p, reason: r.reason });
  }
  return taken;
}

/** AppError('busy') listing the taken ports, or nothing when all are free. */
export async function checkPorts(ports: readonly PlannedPort[]): Promise<void> {
  const taken = await takenPorts(ports);
  if (taken.length === 0) return;
  // Named one by one up to a handful; a whole running simulator would be sixteen of them.
  const named = taken.slice(0, 4).map((p) => `${p.host}:${p.port} (${p.owner}: ${p.reason})`);
  const list = named.join(', ') + (taken.length > named.length ? ` and ${taken.length - named.length} more` : '');
  throw new AppError(
    'busy',
    `ports the platform needs are taken: ${list}. Is the platform already running? ` +
      'Stop whatever holds them, or choose other ports (API_PORT, SIM_CONTROL_PORT, SIM_BASE_PORT).',
    { details: { taken } },
  );
}

/**
 * Both checks, lock first (its message names the running platform, which is the likely case);
 * the lock is released again when a port is taken. Touches nothing but the lock file.
 */
export async function claimPlatform(
  lockFile: string,
  me: LockHolder,
  ports: readonly PlannedPort[],
  isRun: IsRun = isLiveRun,
): Promise<RunLock> {
  const lock = acquireRunLock(lockFile, me, isRun);
  try {
    await checkPorts(ports);
  } catch (err) {
    lock.release();
    throw err;
  }
  return lock;
}

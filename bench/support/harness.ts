/**
 * What every benchmark shares: its command line (`--size --runs --seconds --out --profile`),
 * statistics, child processes that die with the benchmark, RSS, wrk and nginx.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { KeyStore } from '@skinprices/api';
import { waitForUrl } from '@skinprices/runtime';
import { MIGRATIONS_DIR } from '@skinprices/materializer';
import { createPool, ensureSchema, migrate, type Pool } from '@skinprices/store';
import { nodeArgs } from '../../infra/local/supervisor.js';
import { writeFormatted } from './format.js';

export interface BenchArgs {
  /** Catalogue names (35,000 is the real catalogue). */
  size: number;
  /** Repetitions; every reported figure is the median over them. */
  runs: number;
  /** Duration of one load run. */
  seconds: number;
  /** Where the benchmark writes its JSON. */
  out: string;
  /** Directory for `--cpu-prof` profiles of the measured Node processes; unset: no profiling. */
  profileDir: string | undefined;
}

export function benchArgs<Extra extends string = never>(
  name: string,
  defaults: {
    seconds?: number;
    /** A benchmark's own options, each a positive integer, by name with its default. */
    ints?: Record<Extra, number>;
  } = {},
): BenchArgs & { ints: Record<Extra, number> } {
  const extra = Object.entries<number>(defaults.ints ?? ({} as Record<Extra, number>));
  const { values } = parseArgs({
    options: {
      size: { type: 'string', default: '35000' },
      runs: { type: 'string', default: '3' },
      seconds: { type: 'string', default: String(defaults.seconds ?? 10) },
      out: { type: 'string', default: `bench/results/${name}.json` },
      profile: { type: 'string' },
      ...Object.fromEntries(extra.map(([k, v]) => [k, { type: 'string', default: String(v) } as const])),
    },
    strict: true,
  });
  const int = (key: string, v: string | undefined): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${key}: a positive integer, got '${v}'`);
    return n;
  };
  return {
    size: int('size', values.size),
    runs: int('runs', values.runs),
    seconds: int('seconds', values.seconds),
    out: values.out as string,
    profileDir: values.profile,
    ints: Object.fromEntries(
      extra.map(([k]) => [k, int(k, (values as Record<string, string | undefined>)[k])]),
    ) as Record<Extra, number>,
  };
}

/** Drops a benchmark's schema, if it is there. */
export async function dropSchema(databaseUrl: string, name: string): Promise<void> {
  const admin = createPool({ databaseUrl, max: 1 });
  await admin.query(`DROP SCHEMA IF EXISTS ${name} CASCADE`);
  await admin.end();
}

/** The schema `name` made anew and migrated, with a pool of `max` connections on it. */
export async function freshSchema(
  databaseUrl: string,
  name: string,
  max: number,
  applicationName: string,
): Promise<Pool> {
  await dropSchema(databaseUrl, name);
  const pool = createPool({ databaseUrl, schema: name, max, applicationName });
  await ensureSchema(pool, name);
  await migrate(pool, MIGRATIONS_DIR);
  return pool;
}

export const median = (xs: readonly number[]): number => {
  if (xs.length === 0) throw new Error('median of nothing');
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};

/** Nearest-rank percentile (p in 0..100). */
export const percentile = (xs: readonly number[], p: number): number => {
  if (xs.length === 0) throw new Error('percentile of nothing');
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] as number;
};

export const round = (x: number, digits = 3): number => Number(x.toFixed(digits));

export function writeResult(path: string, result: object): Promise<void> {
  return writeFormatted(path, `${JSON.stringify({ ...result, measured_at: new Date().toISOString() }, null, 2)}\n`);
}

const children = new Set<ChildProcess>();
// SIGTERM, not SIGKILL: nginx's master takes its worker down only when it is asked to stop, and
// a Node service writes its --cpu-prof profile on the way out.
process.on('exit', () => {
  for (const c of children) c.kill('SIGTERM');
});

/** A child that is killed when the benchmark exits, however it exits. */
function startProcess(
  cmd: string,
  args: string[],
  env: Record<string, string> = {},
  stdio: 'ignore' | 'inherit' = 'ignore',
): ChildProcess {
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', stdio, 'inherit'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/**
 * A Node service: a bundle compiled ahead as deployed (infra/local/build.ts), or a TypeScript
 * entry under `--import tsx`; with `--cpu-prof` when profiling.
 */
export function startService(
  script: string,
  env: Record<string, string>,
  profileDir: string | undefined,
  stdio: 'ignore' | 'inherit' = 'ignore',
): ChildProcess {
  const prof = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
  return startProcess(process.execPath, [...prof, ...nodeArgs(script)], env, stdio);
}

/** Stops a child with SIGTERM (so `--cpu-prof` writes its profile) and waits for it. */
export async function stopProcess(child: ChildProcess, graceMs = 15_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

export function rssMb(pid: number): number {
  const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? Number.NaN);
  return Math.round(kb / 1024);
}

export function requireTool(cmd: string, aptPackage: string): void {
  if (spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status !== 0)
    throw new Error(`${cmd} not found: apt-get install -y ${aptPackage}`);
}

// ---- wrk ----------------------------------------------------------------------------------------

export interface Load {
  rps: number;
  mb_per_s: number;
  p50_ms: number;
  p99_ms: number;
  requests: number;
  /** Connect, read, write and timeout errors plus non-2xx/3xx answers: any makes the run invalid. */
  errors: number;
}

// wrk's Lua hooks: an optional request body, and a JSON summary with exact percentiles at the end.
const WRK_LUA = `
local body = os.getenv("WRK_BODY_FILE")
if body then
  local f = io.open(body, "rb"); wrk.body = f:read("*a"); f:close()
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end
-- A list of paths (one per line) is requested in turn, so a cache keyed by the request is not
-- measured on one key.
local pathsFile = os.getenv("WRK_PATHS_FILE")
if pathsFile then
  local paths, i = {}, 0
  for line in io.lines(pathsFile) do paths[#paths + 1] = line end
  request = function()
    i = i + 1
    return wrk.format(nil, paths[(i % #paths) + 1])
  end
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%d,"bytes":%d,"duration_us":%d,"errors":%d,"p50_us":%d,"p99_us":%d}\\n',
    summary.requests, summary.bytes, summary.duration,
    e.connect + e.read + e.write + e.timeout + e.status,
    latency:percentile(50), latency:percentile(99)))
end
`;

let luaFile: string | undefined;

/** wrk (Debian's package, a C load generator) at `connections` connections on 2 threads. */
export async function wrk(
  url: string,
  opts: {
    seconds: number;
    connections?: number;
    headers?: Record<string, string>;
    body?: string;
    /** Paths requested in turn on `url`'s host (instead of `url`'s path alone). */
    paths?: readonly string[];
  },
): Promise<Load> {
  requireTool('wrk', 'wrk');
  if (!luaFile) {
    const dir = mkdtempSync(join(tmpdir(), 'bench-wrk-'));
    luaFile = join(dir, 'report.lua');
    writeFileSync(luaFile, WRK_LUA);
  }
  const env: Record<string, string> = {};
  if (opts.body !== undefined) {
    const bodyFile = join(dirname(luaFile), `body-${Date.now()}.json`);
    writeFileSync(bodyFile, opts.body);
    env.WRK_BODY_FILE = bodyFile;
  }
  if (opts.paths !== undefined) {
    const pathsFile = join(dirname(luaFile), `paths-${Date.now()}.txt`);
    writeFileSync(pathsFile, `${opts.paths.join('\n')}\n`);
    env.WRK_PATHS_FILE = pathsFile;
  }
  const args = ['-t2', `-c${opts.connections ?? 50}`, `-d${opts.seconds}s`, '--timeout', '10s', '-s', luaFile];
  for (const [k, v] of Object.entries(opts.headers ?? {})) args.push('-H', `${k}: ${v}`);
  args.push(url);
  const out = await new Promise<string>((resolve, reject) => {
    const child = spawn('wrk', args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
    let text = '';
    child.stdout.on('data', (c: Buffer) => (text += c.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`wrk exited ${code}: ${text}`))));
  });
  const line = out.split('\n').find((l) => l.startsWith('WRKJSON '));
  if (!line) throw new Error(`wrk printed no summary:\n${out}`);
  const r = JSON.parse(line.slice(8)) as Record<string, number>;
  const seconds = (r.duration_us as number) / 1e6;
  const load: Load = {
    rps: Math.round((r.requests as number) / seconds),
    mb_per_s: round((r.bytes as number) / seconds / 1e6, 1),
    p50_ms: round((r.p50_us as number) / 1000, 2),
    p99_ms: round((r.p99_us as number) / 1000, 2),
    requests: r.requests as number,
    errors: r.errors as number,
  };
  // A run with errors measured something else (404s look fast): refuse it.
  if (load.errors > 0 || load.requests === 0)
    throw new Error(`${url}: ${JSON.stringify(load)}: not a valid measurement`);
  return load;
}

// ---- nginx --------------------------------------------------------------------------------------

/**
 * nginx serving fixed bytes at fixed paths, with `workers` worker processes (as many as the Node
 * processes it is compared with; default 1). `sendfile` picks how: the kernel's sendfile (best for
 * small bodies here) or reads into one buffer as large as the largest body and writes it (nearly
 * twice as fast for megabyte bodies on this loopback); a benchmark runs both and takes the faster
 * as the limit.
 */
export async function startNginx(
  port: number,
  files: { path: string; body: Buffer; headers: Record<string, string> }[],
  opts: { sendfile: boolean; workers?: number } = { sendfile: true },
): Promise<ChildProcess> {
  requireTool('nginx', 'nginx-light');
  const dir = mkdtempSync(join(tmpdir(), 'bench-nginx-'));
  const locations = files.map((f, i) => {
    writeFileSync(join(dir, `body-${i}`), f.body);
    chmodSync(join(dir, `body-${i}`), 0o644);
    const headers = Object.entries(f.headers)
      .map(([k, v]) => `      add_header ${k} '${v}';`)
      .join('\n');
    return `    location = ${f.path} {\n      default_type application/json;\n${headers}\n      alias ${dir}/body-${i};\n    }`;
  });
  writeFileSync(
    join(dir, 'nginx.conf'),
    `worker_processes ${opts.workers ?? 1};
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  ${
    opts.sendfile
      ? 'sendfile on;\n  tcp_nopush on;'
      : `sendfile off;\n  output_buffers 1 ${Math.ceil(Math.max(...files.map((f) => f.body.length)) / 1024) + 1}k;`
  }
  open_file_cache max=100;
  keepalive_requests 1000000;
  client_body_temp_path ${dir}/tmp;
  proxy_temp_path ${dir}/tmp;
  fastcgi_temp_path ${dir}/tmp;
  uwsgi_temp_path ${dir}/tmp;
  scgi_temp_path ${dir}/tmp;
  server {
    listen 127.0.0.1:${port};
${locations.join('\n')}
  }
}
`,
  );
  // nginx's worker runs as an unprivileged user: the temp dir (mkdtemp makes it 0700) must be readable.
  chmodSync(dir, 0o755);
  const nginx = startProcess('nginx', ['-c', join(dir, 'nginx.conf'), '-p', dir]);
  await waitForUrl(`http://127.0.0.1:${port}${files[0]?.path ?? '/'}`);
  return nginx;
}

// ---- where PostgreSQL time goes -------------------------------------------------------------------

/**
 * Wall time per SQL statement of every client of `pool` (the materializer spends most of its time
 * waiting on PostgreSQL, which a Node CPU profile shows as idle). Statements are keyed by their
 * first 100 characters; a COPY stream is timed until it finishes.
 */
export function sqlProfile(pool: {
  on(event: 'acquire', cb: (client: { query: (...a: unknown[]) => unknown }) => void): unknown;
}): { top(n: number): { statement: string; calls: number; ms: number }[] } {
  const totals = new Map<string, { calls: number; ms: number }>();
  const wrapped = new WeakSet<object>();
  const add = (text: string, ms: number) => {
    const key = text.replace(/\s+/g, ' ').trim().slice(0, 100);
    const t = totals.get(key) ?? { calls: 0, ms: 0 };
    t.calls++;
    t.ms += ms;
    totals.set(key, t);
  };
  pool.on('acquire', (client) => {
    if (wrapped.has(client)) return;
    wrapped.add(client);
    const query = client.query.bind(client);
    client.query = (...a: unknown[]) => {
      const first = a[0] as string | { text?: string; constructor: { name: string } };
      const text = typeof first === 'string' ? first : (first.text ?? `(${first.constructor.name})`);
      const t0 = performance.now();
      const result = query(...a) as { then?: unknown; on?: (e: string, cb: () => void) => void };
      if (typeof result?.then === 'function')
        (result as Promise<unknown>).then(
          () => add(text, performance.now() - t0),
          () => add(text, performance.now() - t0),
        );
      else if (typeof result?.on === 'function') result.on('finish', () => add(text, performance.now() - t0));
      return result;
    };
  });
  return {
    top: (n) =>
      [...totals]
        .map(([statement, t]) => ({ statement, calls: t.calls, ms: Math.round(t.ms) }))
        .sort((a, b) => b.ms - a.ms)
        .slice(0, n),
  };
}

// ---- where CPU goes across processes --------------------------------------------------------------

/**
 * CPU seconds (user + system) so far of every process in `rootPid`'s tree, named by its service
 * (script and MARKET), plus the stack's Kafka, registry and PostgreSQL: a per-process profile of a
 * whole-platform phase is the difference of two of these.
 */
export function cpuSeconds(rootPid: number): Map<string, number> {
  const tick = 100; // USER_HZ on Linux
  const ps = spawnSync('ps', ['-eo', 'pid=,ppid=,comm='], { encoding: 'utf8' }).stdout;
  const procs = ps
    .trim()
    .split('\n')
    .map((l) => l.trim().split(/\s+/))
    .map(([pid, ppid, comm]) => ({ pid: Number(pid), ppid: Number(ppid), comm: comm as string }));
  const tree = new Set<number>([rootPid]);
  for (let grew = true; grew;) {
    grew = false;
    for (const p of procs)
      if (!tree.has(p.pid) && tree.has(p.ppid)) {
        tree.add(p.pid);
        grew = true;
      }
  }
  const out = new Map<string, number>();
  const add = (name: string, pid: number) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const s = (Number(f[11]) + Number(f[12])) / tick;
      out.set(name, (out.get(name) ?? 0) + s);
    } catch {
      // gone meanwhile
    }
  };
  for (const pid of tree) {
    let name = 'other';
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      // A service's TypeScript entry (services/<name>/src/main.ts) or its bundle (<name>.mjs).
      const script = cmd.find((a) => a.includes('/src/main.ts') || a.endsWith('.mjs') || a.endsWith('run.ts'));
      const env = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      const market = env.find((e) => e.startsWith('MARKET='))?.slice(7);
      name = script
        ? script
            .replace(/^.*services\/([^/]+)\/.*$/, '$1')
            .replace(/^(.*\/)?([^/]+)\.mjs$/, '$2')
            .replace(/^.*\/run\.ts$/, 'supervisor')
        : 'other';
      if (market && name === 'poller') name = `poller ${market}`;
    } catch {
      continue;
    }
    add(name, pid);
  }
  for (const p of procs) {
    if (p.comm === 'postgres') add('postgresql', p.pid);
    else if (p.comm === 'java') {
      const cmd = readFileSync(`/proc/${p.pid}/cmdline`, 'utf8');
      add(
        cmd.includes('kafka.Kafka')
          ? 'kafka'
          : cmd.includes('apicurio') || cmd.includes('quarkus')
            ? 'registry'
            : 'java',
        p.pid,
      );
    }
  }
  return out;
}

/** `after - before` per name, largest first, in whole seconds with one decimal. */
export function cpuDelta(before: Map<string, number>, after: Map<string, number>): Record<string, number> {
  return Object.fromEntries(
    [...after]
      .map(([k, v]) => [k, round(v - (before.get(k) ?? 0), 1)] as const)
      .filter(([, v]) => v > 0)
      .sort((a, b) => b[1] - a[1]),
  );
}

// ---- an API key without limits --------------------------------------------------------------------

/**
 * An enterprise key with limits no benchmark reaches, in the keys schema `schema` (migrated): the
 * demo keys carry the plans' rate limits, and a benchmark asks faster than they allow.
 */
export async function benchKey(databaseUrl: string, schema: string): Promise<string> {
  const pool = createPool({ databaseUrl, schema, max: 1 });
  try {
    const { secret } = await new KeyStore(pool).create({
      customer: 'bench@example.com',
      plan: 'enterprise',
      perSecond: 1_000_000,
      perMinute: 1_000_000_000,
      perDay: 1_000_000_000,
    });
    return secret;
  } finally {
    await pool.end();
  }
}

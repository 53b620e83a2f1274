/**
 * The API on every core: a node:cluster primary forks one worker per process wanted (each a whole
 * API process: serve.ts), and owns what they must share. It restarts a worker that dies, stops them
 * all on SIGTERM or SIGINT, serves /metrics summed over them, and, without Redis, holds the rate
 * limits' counts (limits-shared.ts), so a key's limit stays exact over the processes; and always
 * each key's open streams (changes/slots-shared.ts). The primary itself serves no request and
 * opens no database connection.
 *
 * Its life is a small state machine: starting (until every worker listens) → running → stopping
 * (a signal, a worker refusing its configuration, or a crash loop) → exit with the stop's code.
 */
import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import { serveMetrics, type Logger } from '@skinprices/runtime';
import { AggregatorRegistry } from 'prom-client';
import { serveSharedStreamSlots } from './changes/slots-shared.js';
import { serveSharedLimits } from './limits-shared.js';

/** The exit code of a process whose configuration was refused: restarting cannot help. */
const CONFIG_REFUSED = 78;
/** This many worker deaths within `CRASH_WINDOW_MS` is a crash loop: the primary gives up. */
const CRASHES_TO_GIVE_UP = 5;
const CRASH_WINDOW_MS = 60_000;
/** Past the workers' own shutdown deadline (30 s), what is left is killed. */
const STOP_DEADLINE_MS = 35_000;

/** API_PROCESSES resolved: `auto` is one per core the runtime may use. */
export const processCount = (setting: 'auto' | number): number =>
  setting === 'auto' ? availableParallelism() : setting;

export interface PrimaryOptions {
  processes: number;
  logger: Logger;
  /** Where the summed /metrics are served (the workers serve none of their own); unset: nowhere. */
  metrics?: { host: string; port: number };
  /** Hold the rate limits' counts here (no Redis): the workers ask over IPC. */
  sharedLimits: boolean;
  exit?: (code: number) => void;
}

type State = 'starting' | 'running' | 'stopping';

export class ApiPrimary {
  private state: State = 'starting';
  private readonly workers = new Set<Worker>();
  private readonly listening = new Set<Worker>();
  private readonly crashes: number[] = [];
  private exitCode = 0;
  private readonly cleanups: (() => Promise<void> | void)[] = [];
  private killTimer: NodeJS.Timeout | undefined;
  /** Forks waiting for their backoff after a worker died. */
  private readonly restarts = new Set<NodeJS.Timeout>();

  constructor(private readonly o: PrimaryOptions) {}

  async start(): Promise<void> {
    if (this.o.sharedLimits) this.cleanups.push(serveSharedLimits(cluster));
    // Always: open streams were never counted in Redis, so the machine's count is the primary's.
    this.cleanups.push(serveSharedStreamSlots(cluster));
    if (this.o.metrics) {
      const aggregated = new AggregatorRegistry();
      const served = await serveMetrics(
        { metrics: () => aggregated.clusterMetrics(), contentType: aggregated.contentType },
        this.o.metrics.host,
        this.o.metrics.port,
      );
      this.cleanups.push(served.close);
      this.o.logger.info({ url: served.url }, 'metrics served (summed over the workers)');
    }
    cluster.on('listening', (worker) => this.onListening(worker));
    cluster.on('exit', (worker, code, signal) => this.onExit(worker, code, signal));
    for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => this.onSignal(signal));
    for (let i = 0; i < this.o.processes; i++) this.fork();
  }

  private fork(): void {
    // glibc gives each thread that allocates (libuv's pool compresses the bodies) an arena of its
    // own, which keeps freed pages resident; two bound it, per worker, under the 512 MB budget.
    const worker = cluster.fork({ MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? '2' });
    this.workers.add(worker);
  }

  private onListening(worker: Worker): void {
    this.listening.add(worker);
    if (this.state !== 'starting' || this.listening.size < this.o.processes) return;
    this.state = 'running';
    this.o.logger.info({ processes: this.o.processes, pid: process.pid }, 'api workers listening');
  }

  private onExit(worker: Worker, code: number | null, signal: string | null): void {
    this.workers.delete(worker);
    this.listening.delete(worker);
    if (this.state === 'stopping') {
      // A worker killed by the stop's signal before its handlers were installed stopped cleanly too.
      if (code !== 0 && !(code === null && signal === 'SIGTERM')) this.exitCode ||= 1;
      if (this.workers.size === 0) void this.finish();
      return;
    }
    const log = { worker: worker.id, pid: worker.process.pid, code, signal };
    if (code === CONFIG_REFUSED) {
      this.o.logger.error(log, 'a worker refused its configuration: stopping the API');
      return this.stop(CONFIG_REFUSED);
    }
    const now = Date.now();
    this.crashes.push(now);
    while ((this.crashes[0] ?? now) < now - CRASH_WINDOW_MS) this.crashes.shift();
    if (this.crashes.length >= CRASHES_TO_GIVE_UP) {
      this.o.logger.error({ ...log, crashes: this.crashes.length }, 'workers keep dying: stopping the API');
      return this.stop(1);
    }
    // A worker that dies alone is replaced; the others keep serving meanwhile. The wait grows with
    // recent deaths, so a fault that kills each new worker does not fork in a tight loop.
    const waitMs = 250 * 2 ** (this.crashes.length - 1);
    this.o.logger.error({ ...log, restartInMs: waitMs }, 'a worker died: starting another');
    // Not unref'd: with every worker dead it is what keeps the primary alive until the next fork.
    const restart = setTimeout(() => {
      this.restarts.delete(restart);
      if (this.state !== 'stopping') this.fork();
    }, waitMs);
    this.restarts.add(restart);
  }

  private onSignal(signal: NodeJS.Signals): void {
    if (this.state === 'stopping') {
      this.o.logger.warn({ signal }, 'second signal: killing the workers');
      for (const w of this.workers) w.process.kill('SIGKILL');
      this.exitCode = 1;
      return;
    }
    this.o.logger.info({ signal }, 'shutting down');
    this.stop(0);
  }

  /**
   * Each worker gets SIGTERM from here, once: a terminal's Ctrl-C reaches the whole process group,
   * and workers ignore SIGINT (serve.ts) so that it does not count as a second, forcing signal.
   */
  private stop(code: number): void {
    this.state = 'stopping';
    this.exitCode = code;
    for (const t of this.restarts) clearTimeout(t);
    this.restarts.clear();
    if (this.workers.size === 0) return void this.finish();
    for (const w of this.workers) w.process.kill('SIGTERM');
    this.killTimer = setTimeout(() => {
      this.o.logger.error({ left: this.workers.size }, 'workers did not stop in time: killing them');
      for (const w of this.workers) w.process.kill('SIGKILL');
    }, STOP_DEADLINE_MS);
    this.killTimer.unref();
  }

  private async finish(): Promise<void> {
    clearTimeout(this.killTimer);
    for (const c of this.cleanups.reverse()) await c();
    this.o.logger.info({ code: this.exitCode }, 'api stopped');
    (this.o.exit ?? process.exit)(this.exitCode);
  }
}

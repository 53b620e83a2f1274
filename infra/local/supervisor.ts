/*
 * Runs each service as its own process (its bundle compiled ahead, build.ts, or `node --import tsx`
 * for a TypeScript entry; never the tsx CLI: that runs the program in a grandchild, so a signal to
 * it would not reach the service), prefixes its output with its name, restarts it after a crash,
 * and stops them all in reverse order.
 *
 * When to restart is decided by the pure transition in restart-policy.ts (its diagram is there);
 * this class only performs the effects of each new state:
 *   starting → spawn;   backoff → a timer for the pause, then restartDue;
 *   failed → says why and what to do, once;   stopping → SIGTERM (SIGKILL after the grace
 *   period);   exited → nothing more.
 *
 * A service that failed (an exit code restarting cannot fix) stays down and the others keep
 * running, as units of a deployment do: the API goes on serving the read model it has (its
 * /v1/status reports the materializer dead) and the pollers go on recording to Kafka, so nothing
 * is missed; the operator's fix (`make reset-offsets`) needs only that service stopped.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import {
  DEFAULT_RESTART_POLICY,
  EX_CONFIG,
  INITIAL_RESTART_STATE,
  next,
  type RestartEvent,
  type RestartPhase,
  type RestartPolicy,
  type RestartState,
} from './restart-policy.js';

export type ChildState = RestartPhase;

export interface ServiceSpec {
  name: string;
  script: string;
  env: Record<string, string>;
}

export interface SupervisorOptions {
  /** Where the services' prefixed lines and the supervisor's own notes go. @default stdout */
  write: (line: string) => void;
  /** @default DEFAULT_RESTART_POLICY (1 s doubling to 30 s; a healthy minute resets it) */
  policy: RestartPolicy;
  /** @default Date.now */
  now: () => number;
  /**
   * Starts one service's process. @default `node --enable-source-maps <script>` for a compiled
   * bundle, `node --import tsx <script>` for a TypeScript entry, in its own process group
   */
  launch: (spec: ServiceSpec) => ChildProcess;
  /**
   * Node flags before every service's own (the default launch only): `--cpu-prof` and its kin,
   * which Node refuses in NODE_OPTIONS. @default none
   */
  nodeFlags: readonly string[];
}

interface Child {
  spec: ServiceSpec;
  state: RestartState;
  process?: ChildProcess;
  timer?: NodeJS.Timeout;
}

/** How Node runs `script`: a bundle (build.ts) with its source maps, a TypeScript entry under tsx. */
export function nodeArgs(script: string, flags: readonly string[] = []): string[] {
  return [...flags, ...(script.endsWith('.ts') ? ['--import', 'tsx', script] : ['--enable-source-maps', script])];
}

function launchNode(spec: ServiceSpec, flags: readonly string[]): ChildProcess {
  return spawn(process.execPath, nodeArgs(spec.script, flags), {
    env: { ...process.env, ...spec.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group: a terminal's Ctrl-C reaches only the supervisor, which then stops
    // the services in order (a service hit by both SIGINT and our SIGTERM would exit at once).
    detached: true,
  });
}

/** What a final exit code means and what to do about it, by code (restart-policy.ts: `finalCodes`). */
const FINAL_EXIT_HELP: Readonly<Record<number, string>> = {
  [EX_CONFIG]:
    "EX_CONFIG: stored state or configuration this environment contradicts; restarting cannot fix it. Its last lines above name the problem. The materializer exits 78 with 'offsets_mismatch' when its stored offsets belong to another Kafka cluster (after 'make clean', or another KAFKA_BROKERS): see what is wrong with 'make reset-offsets', then 'make reset-offsets ARGS=--yes' (keep the read model) or 'make replay' (rebuild it), and start 'make run' again (docs/operations.md, runbook: exit code 78)",
};

const alive = (p: ChildProcess | undefined): p is ChildProcess =>
  p !== undefined && p.exitCode === null && p.signalCode === null;

export class Supervisor {
  private readonly children: Child[] = [];
  private readonly o: SupervisorOptions;

  constructor(options: Partial<SupervisorOptions> = {}) {
    this.o = {
      write: (l) => process.stdout.write(`${l}\n`),
      policy: DEFAULT_RESTART_POLICY,
      now: Date.now,
      launch: (spec) => launchNode(spec, this.o.nodeFlags),
      nodeFlags: [],
      ...options,
    };
    // Should the supervisor itself die, its detached services must not outlive it.
    process.on('exit', () => {
      for (const c of this.children) if (alive(c.process)) c.process.kill('SIGKILL');
    });
  }

  start(spec: ServiceSpec): void {
    const child: Child = { spec, state: INITIAL_RESTART_STATE };
    this.children.push(child);
    this.spawn(child);
  }

  get states(): Record<string, ChildState> {
    return Object.fromEntries(this.children.map((c) => [c.spec.name, c.state.phase]));
  }

  private prefix(child: Child): string {
    return `[${child.spec.name}]`.padEnd(22);
  }

  private dispatch(child: Child, event: RestartEvent): void {
    const before = child.state;
    const after = next(before, event, this.o.policy);
    if (after === before) return;
    child.state = after;
    if (after.phase === 'starting') this.spawn(child);
    else if (after.phase === 'backoff')
      child.timer = setTimeout(() => this.dispatch(child, { type: 'restartDue' }), after.pauseMs);
  }

  private write(child: Child, line: string): void {
    this.o.write(`${this.prefix(child)} ${line}`);
  }

  private spawn(child: Child): void {
    const p = this.o.launch(child.spec);
    child.process = p;
    for (const stream of [p.stdout, p.stderr])
      if (stream) createInterface({ input: stream }).on('line', (l) => this.write(child, l));
    // Without a listener a failed kill or spawn would throw in the supervisor itself.
    p.on('error', (err) => this.write(child, `process error: ${err.message}`));
    p.on('exit', (code, signal) => {
      this.dispatch(child, { type: 'exited', at: this.o.now(), code });
      const s = child.state;
      if (s.phase === 'failed') {
        const help = FINAL_EXIT_HELP[s.code] ?? 'restarting cannot fix it; its last lines above say why';
        const others = this.children.some((c) => c !== child && alive(c.process))
          ? '; the other services keep running'
          : '';
        this.write(child, `exited with code ${s.code}: NOT restarting it${others}. ${help}`);
        return;
      }
      if (s.phase !== 'backoff') return;
      const streak = s.streak > 1 ? `, crash ${s.streak} in a row` : '';
      this.write(
        child,
        `exited (${signal ?? `code ${code}`}) after ${Math.round(s.ranMs / 1000)} s${streak}; restarting in ${s.pauseMs / 1000} s`,
      );
    });
    this.dispatch(child, { type: 'started', at: this.o.now() });
  }

  /** SIGTERM to every service, last started first; SIGKILL what has not exited after `graceMs`. */
  async stop(graceMs = 10_000): Promise<void> {
    // Every child first, so one that crashes while an earlier one is being stopped is not restarted.
    for (const child of this.children) {
      clearTimeout(child.timer);
      this.dispatch(child, { type: 'stop' });
    }
    for (const child of [...this.children].reverse()) {
      const p = child.process;
      if (child.state.phase !== 'stopping' || !alive(p)) {
        // A failed service stays `failed`: the states still say which one never ran to the end.
        if (child.state.phase !== 'failed') child.state = { phase: 'exited' };
        continue;
      }
      const exited = new Promise<void>((resolve) => p.once('exit', () => resolve()));
      p.kill('SIGTERM');
      const killer = setTimeout(() => p.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(killer);
    }
  }
}

/*
 * Runs each service as its own process (`node --import tsx …`, never the tsx CLI: that runs the
 * program in a grandchild, so a signal to it would not reach the service), prefixes its output
 * with its name, restarts it after a crash, and stops them all in reverse order.
 *
 *   starting ──spawned──▶ running ──exit≠0──▶ backoff ──(1 s … 30 s)──▶ starting
 *                            │
 *                            └──stop()──▶ stopping ──exit (or SIGKILL after 10 s)──▶ exited
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

export type ChildState = 'starting' | 'running' | 'backoff' | 'stopping' | 'exited';

export interface ServiceSpec {
  name: string;
  script: string;
  env: Record<string, string>;
}

interface Child {
  spec: ServiceSpec;
  state: ChildState;
  process?: ChildProcess;
  restarts: number;
  timer?: NodeJS.Timeout;
}

export class Supervisor {
  private readonly children: Child[] = [];
  private stopping = false;

  constructor(private readonly write: (line: string) => void = (l) => process.stdout.write(`${l}\n`)) {
    // Should the supervisor itself die, its detached services must not outlive it.
    process.on('exit', () => {
      for (const c of this.children)
        if (c.process?.exitCode === null && c.process.signalCode === null) c.process.kill('SIGKILL');
    });
  }

  start(spec: ServiceSpec): void {
    const child: Child = { spec, state: 'starting', restarts: 0 };
    this.children.push(child);
    this.spawn(child);
  }

  get states(): Record<string, ChildState> {
    return Object.fromEntries(this.children.map((c) => [c.spec.name, c.state]));
  }

  private spawn(child: Child): void {
    child.state = 'starting';
    const p = spawn(process.execPath, ['--import', 'tsx', child.spec.script], {
      env: { ...process.env, ...child.spec.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group: a terminal's Ctrl-C reaches only the supervisor, which then stops
      // the services in order (a service hit by both SIGINT and our SIGTERM would exit at once).
      detached: true,
    });
    child.process = p;
    child.state = 'running';
    const prefix = `[${child.spec.name}]`.padEnd(22);
    for (const stream of [p.stdout, p.stderr])
      createInterface({ input: stream }).on('line', (l) => this.write(`${prefix} ${l}`));
    p.on('exit', (code, signal) => {
      if (this.stopping || child.state === 'stopping') {
        child.state = 'exited';
        return;
      }
      // A crash: restart with a growing pause, so a broken service does not spin.
      const wait = Math.min(30_000, 1_000 * 2 ** Math.min(child.restarts, 5));
      child.restarts++;
      child.state = 'backoff';
      this.write(`${prefix} exited (${signal ?? `code ${code}`}); restarting in ${wait / 1000} s`);
      child.timer = setTimeout(() => this.spawn(child), wait);
    });
  }

  /** SIGTERM to every service, last started first; SIGKILL what has not exited after `graceMs`. */
  async stop(graceMs = 10_000): Promise<void> {
    this.stopping = true;
    for (const child of [...this.children].reverse()) {
      clearTimeout(child.timer);
      const p = child.process;
      if (!p || p.exitCode !== null || p.signalCode !== null) {
        child.state = 'exited';
        continue;
      }
      child.state = 'stopping';
      const exited = new Promise<void>((resolve) => p.once('exit', () => resolve()));
      p.kill('SIGTERM');
      const killer = setTimeout(() => p.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(killer);
      child.state = 'exited';
    }
  }
}

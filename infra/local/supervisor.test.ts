import type { ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { nodeArgs, Supervisor, type ServiceSpec } from './supervisor.js';

/** A stand-in for a service's process: no I/O, exits when told to. */
class FakeProcess extends EventEmitter {
  exitCode: number | null = null;
  signalCode: NodeJS.Signals | null = null;
  readonly stdout = null;
  readonly stderr = null;
  readonly signals: string[] = [];

  crash(code = 1): void {
    this.exitCode = code;
    this.emit('exit', code, null);
  }

  kill(signal: NodeJS.Signals = 'SIGTERM'): boolean {
    this.signals.push(signal);
    // Exits on SIGTERM a moment later, like a service running its shutdown handlers.
    setTimeout(() => {
      this.signalCode = signal;
      this.emit('exit', null, signal);
    }, 10);
    return true;
  }
}

function harness() {
  const launched: FakeProcess[] = [];
  const lines: string[] = [];
  const supervisor = new Supervisor({
    write: (l) => lines.push(l),
    now: () => Date.now(),
    launch: () => {
      const p = new FakeProcess();
      launched.push(p);
      return p as unknown as ChildProcess;
    },
  });
  const spec: ServiceSpec = { name: 'api', script: 'services/api/src/main.ts', env: {} };
  return { supervisor, launched, lines, spec, last: () => launched.at(-1) as FakeProcess };
}

describe('nodeArgs', () => {
  it('runs a compiled bundle with its source maps and a TypeScript entry under tsx', () => {
    expect(nodeArgs('/repo/.local/build/run-1-x/api.mjs')).toEqual([
      '--enable-source-maps',
      '/repo/.local/build/run-1-x/api.mjs',
    ]);
    expect(nodeArgs('services/api/src/main.ts')).toEqual(['--import', 'tsx', 'services/api/src/main.ts']);
  });

  it("puts the supervisor's node flags (--cpu-prof, refused in NODE_OPTIONS) before the script's own", () => {
    expect(nodeArgs('/b/api.mjs', ['--cpu-prof', '--cpu-prof-dir=/p'])).toEqual([
      '--cpu-prof',
      '--cpu-prof-dir=/p',
      '--enable-source-maps',
      '/b/api.mjs',
    ]);
  });
});

describe('Supervisor', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  it('restarts a crashed service after the pause, and not before', async () => {
    const h = harness();
    h.supervisor.start(h.spec);
    expect(h.supervisor.states).toEqual({ api: 'running' });
    h.last().crash();
    expect(h.supervisor.states).toEqual({ api: 'backoff' });
    await vi.advanceTimersByTimeAsync(999);
    expect(h.launched).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(h.launched).toHaveLength(2);
    expect(h.supervisor.states).toEqual({ api: 'running' });
    expect(h.lines.join('\n')).toMatch(/exited \(code 1\) after 0 s; restarting in 1 s/);
  });

  it('restart pause resets after a healthy minute: six quick crashes, ten good minutes, then a crash costs 1 s (issue 13)', async () => {
    // Root cause: the pause grew with a per-service counter that was never reset, so after a
    // bad start every later crash cost 30 s even after hours of healthy running.
    const h = harness();
    h.supervisor.start(h.spec);
    for (const pause of [1, 2, 4, 8, 16, 30]) {
      h.last().crash();
      await vi.advanceTimersByTimeAsync(pause * 1000);
    }
    expect(h.launched).toHaveLength(7);
    await vi.advanceTimersByTimeAsync(10 * 60_000);
    h.last().crash();
    expect(h.lines.at(-1)).toMatch(/after 600 s; restarting in 1 s$/);
    await vi.advanceTimersByTimeAsync(1000);
    expect(h.launched).toHaveLength(8);
  });

  it('stops every service, last started first, and restarts none that crash meanwhile', async () => {
    const h = harness();
    h.supervisor.start(h.spec);
    h.supervisor.start({ ...h.spec, name: 'materializer' });
    h.supervisor.start({ ...h.spec, name: 'poller' });
    const [api, materializer, poller] = h.launched as [FakeProcess, FakeProcess, FakeProcess];
    poller.crash();
    const stopped = h.supervisor.stop(1_000);
    // The api crashes while the materializer is being stopped: it must stay down.
    api.crash();
    await vi.advanceTimersByTimeAsync(60_000);
    await stopped;
    expect(h.supervisor.states).toEqual({ api: 'exited', materializer: 'exited', poller: 'exited' });
    expect(materializer.signals).toEqual(['SIGTERM']);
    expect(api.signals).toEqual([]);
    expect(h.launched).toHaveLength(3);
  });

  it('exit 78: the materializer is not restarted, the supervisor says why and what to do, the others keep running', async () => {
    // Root cause: the supervisor restarted on every exit, so a materializer refusing offsets of
    // another Kafka cluster (exit 78, EX_CONFIG) was started again and again, each time
    // refusing, its explanation scrolling away under the other services' output.
    const h = harness();
    h.supervisor.start(h.spec);
    h.supervisor.start({ ...h.spec, name: 'materializer' });
    const [api, materializer] = h.launched as [FakeProcess, FakeProcess];
    materializer.crash(78);
    await vi.advanceTimersByTimeAsync(10 * 60_000);
    expect(h.launched).toHaveLength(2);
    expect(h.supervisor.states).toEqual({ api: 'running', materializer: 'failed' });
    const said = h.lines.filter((l) => l.startsWith('[materializer]'));
    expect(said).toHaveLength(1);
    expect(said[0]).toMatch(/exited with code 78: NOT restarting it; the other services keep running\. EX_CONFIG/);
    expect(said[0]).toContain("'make reset-offsets'");
    // Stopping the platform stops the others and leaves the failed one as it is.
    const stopped = h.supervisor.stop(1_000);
    await vi.advanceTimersByTimeAsync(100);
    await stopped;
    expect(api.signals).toEqual(['SIGTERM']);
    expect(materializer.signals).toEqual([]);
    expect(h.supervisor.states).toEqual({ api: 'exited', materializer: 'failed' });
  });

  it('SIGKILLs a service that ignores SIGTERM for the grace period', async () => {
    const h = harness();
    h.supervisor.start(h.spec);
    const p = h.last();
    p.kill = (signal: NodeJS.Signals = 'SIGTERM') => {
      p.signals.push(signal);
      if (signal === 'SIGKILL') setTimeout(() => p.emit('exit', null, 'SIGKILL'), 10);
      return true;
    };
    const stopped = h.supervisor.stop(500);
    await vi.advanceTimersByTimeAsync(499);
    expect(p.signals).toEqual(['SIGTERM']);
    await vi.advanceTimersByTimeAsync(100);
    await stopped;
    expect(p.signals).toEqual(['SIGTERM', 'SIGKILL']);
    expect(h.supervisor.states).toEqual({ api: 'exited' });
  });
});

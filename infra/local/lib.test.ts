/**
 * lib.sh's stop_pids, on stand-in processes marked the way kafka.sh and registry.sh mark theirs
 * (`skinprices-<name>` on the command line), in a local dir of their own.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const LIB = join(import.meta.dirname, 'lib.sh');

/** A process named skinprices-<name> that exits `exitAfterTermS` seconds after SIGTERM (or never: -1). */
function standIn(localDir: string, name: string, exitAfterTermS: number): number {
  const onTerm = exitAfterTermS < 0 ? '' : `sleep ${exitAfterTermS}; exit 0`;
  const script = `trap '${onTerm}' TERM; while :; do sleep 0.05; done`;
  const p = spawn('bash', ['-c', `exec -a skinprices-${name} bash -c "${script}"`], {
    detached: true,
    stdio: 'ignore',
  });
  p.unref();
  writeFileSync(join(localDir, 'run', `${name}.pid`), `${p.pid}\n`);
  return p.pid as number;
}

/** Runs stop_pids asynchronously: a blocking spawnSync would keep this process from reaping its exited stand-ins. */
async function stopPids(localDir: string, names: string[], graceS: number): Promise<{ ms: number; stderr: string }> {
  const started = performance.now();
  const p = spawn('bash', ['-c', `source "${LIB}"; stop_pids ${names.join(' ')}`], {
    env: { ...process.env, SKINPRICES_LOCAL_DIR: localDir, STOP_GRACE_S: String(graceS) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  p.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const code = await new Promise((r) => p.once('exit', r));
  expect(code).toBe(0);
  return { ms: performance.now() - started, stderr };
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

function localDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'lib-sh-'));
  mkdirSync(join(dir, 'run'));
  return dir;
}

describe('lib.sh stop_pids', () => {
  it('make down of a three-node cluster: signals every node at once, so the stop takes the slowest node, not the sum (issue 13)', async () => {
    // Root cause: kafka.sh stopped the nodes one after another, each waited for in turn; the last
    // KRaft node stopped alone (and without a quorum it then hung until killed after 30 s).
    const dir = localDir();
    const pids = ['kafka-3-1', 'kafka-3-2', 'kafka-3-3'].map((n) => standIn(dir, n, 1));
    await new Promise((r) => setTimeout(r, 300)); // let the traps be set
    const { ms, stderr } = await stopPids(dir, ['kafka-3-1', 'kafka-3-2', 'kafka-3-3'], 10);
    expect(ms).toBeLessThan(2_800); // one after another: ≥ 3 s
    expect(stderr).not.toMatch(/killing/);
    expect(pids.filter(alive)).toEqual([]);
    for (const n of [1, 2, 3]) expect(existsSync(join(dir, 'run', `kafka-3-${n}.pid`))).toBe(false);
  }, 20_000);

  it('SIGKILLs what outlives the grace period, and forgets pid files of processes not ours', async () => {
    const dir = localDir();
    const stubborn = standIn(dir, 'registry', -1);
    writeFileSync(join(dir, 'run', 'kafka-1-1.pid'), `${process.pid}\n`); // alive, but not ours
    await new Promise((r) => setTimeout(r, 300));
    const { stderr } = await stopPids(dir, ['registry', 'kafka-1-1'], 1);
    expect(stderr).toMatch(/registry did not stop in 1 s; killing it/);
    await new Promise((r) => setTimeout(r, 200));
    expect(alive(stubborn)).toBe(false);
    expect(alive(process.pid)).toBe(true);
    expect(existsSync(join(dir, 'run', 'kafka-1-1.pid'))).toBe(false);
  }, 20_000);
});

/**
 * The bare `node:http` floor (floor-server.ts) as a benchmark's child process: the answers written
 * to a directory of their own, the server started with one process or N, and awaited until every
 * process listens.
 */
import { type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FloorManifestEntry } from './floor-server.js';
import { startService } from './harness.js';

/** One prepared answer: what a request of `method` on `url` (path and query) gets. */
export interface FloorAnswer {
  /** @default 'GET' */
  method?: 'GET' | 'POST';
  url: string;
  /** @default 200 */
  status?: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** The entry a benchmark compiles (infra/local/build.ts `buildServices`) and passes to `startFloor`. */
export const FLOOR_ENTRY = 'bench/support/floor-server.ts';

/**
 * Starts the floor's compiled `script` on `port` with `processes` processes (> 1: a node:cluster
 * primary and its workers) serving `answers`; resolves once every process listens.
 */
export async function startFloor(
  script: string,
  port: number,
  answers: readonly FloorAnswer[],
  processes: number,
): Promise<ChildProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-floor-'));
  const manifest: FloorManifestEntry[] = answers.map((a, i) => {
    writeFileSync(join(dir, `body-${i}`), a.body);
    return { method: a.method ?? 'GET', url: a.url, status: a.status ?? 200, headers: a.headers, file: `body-${i}` };
  });
  writeFileSync(join(dir, 'answers.json'), JSON.stringify(manifest));
  const env = { FLOOR_DIR: dir, FLOOR_PORT: String(port), FLOOR_PROCESSES: String(processes) };
  const floor = startService(script, env, undefined);
  // Not a URL poll: the first worker to listen answers it while the others may still be starting.
  for (const deadline = Date.now() + 30_000; !existsSync(join(dir, 'ready')); await sleep(50)) {
    if (floor.exitCode !== null || floor.signalCode !== null) throw new Error(`the floor on :${port} exited`);
    if (Date.now() > deadline) throw new Error(`the floor on :${port} did not listen within 30 s`);
  }
  return floor;
}

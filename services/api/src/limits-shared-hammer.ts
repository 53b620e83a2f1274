/**
 * Test fixture for limits-shared.test.ts: hammers keys through a limiter, many hits per event-loop
 * turn, turn after turn, and tallies the verdicts. Run as a node:cluster worker's main (the test
 * forks two), it hammers through a SharedRateLimiter when the primary sends it a plan, and answers
 * with its tally: real processes, a real IPC channel, one primary counting.
 */
import cluster from 'node:cluster';
import { pathToFileURL } from 'node:url';
import type { LimitedKey, Verdict } from './limits-windows.js';
import { SharedRateLimiter } from './limits-shared.js';

export interface HammerPlan {
  /** Each key, and how far its hits' time moves per turn (0: every hit in the same second). */
  keys: { key: LimitedKey; start: number; stepMs: number }[];
  turns: number;
  /** Hits per key per turn, fired together. */
  perTurn: number;
}

/** Per key prefix, how many hits got each answer. */
export type Tally = Record<string, Record<'ok' | 'second' | 'minute' | 'day', number>>;

export async function hammer(
  limiter: { hit(key: LimitedKey, now: number): Promise<Verdict> },
  plan: HammerPlan,
): Promise<Tally> {
  const hits: { prefix: string; verdict: Promise<Verdict> }[] = [];
  for (let t = 0; t < plan.turns; t++) {
    for (const { key, start, stepMs } of plan.keys)
      for (let i = 0; i < plan.perTurn; i++)
        hits.push({ prefix: key.prefix, verdict: limiter.hit(key, start + t * stepMs) });
    await new Promise((resolve) => setImmediate(resolve));
  }
  const tally: Tally = {};
  for (const { prefix, verdict } of hits) {
    const v = await verdict;
    const counts = (tally[prefix] ??= { ok: 0, second: 0, minute: 0, day: 0 });
    counts[v.ok ? 'ok' : v.window]++;
  }
  return tally;
}

/** As a cluster worker: waits for plans from the primary, answers each with its tally. */
function serveHammer(): void {
  const limiter = new SharedRateLimiter();
  const send = (m: object) => process.send?.(m);
  process.on('message', (m: { type?: string; plan?: HammerPlan }) => {
    if (m.type !== 'test:hammer' || !m.plan) return;
    hammer(limiter, m.plan).then(
      (tally) => send({ type: 'test:tally', tally }),
      (err: unknown) => send({ type: 'test:tally', error: String(err) }),
    );
  });
  send({ type: 'test:ready' });
}

if (cluster.isWorker && process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) serveHammer();

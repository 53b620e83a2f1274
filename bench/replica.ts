/**
 * Freshness through a PostgreSQL hot standby: the pipeline writes to the primary (`make up`), API
 * processes read from the primary and from the standby (`make up-replica`), and price changes set
 * upstream are timed from the end of the poll that produced them (its last record and marker in
 * Kafka) until each API serves them in GET /v1/prices/{market}. The standby's extra time over the
 * primary's is the replication's share; the standby's replay lag is sampled from its /v1/status
 * while the changes travel.
 *
 *   node --import tsx bench/replica.ts [--size 35000] [--runs 3]
 *
 * Needs `make up` and `make up-replica`. Own topics, schemas and ports; all removed afterwards.
 */
import type { MarketSlug } from '@skinprices/domain';
import { startReplicaPlatform, timeChanges, type TimedChange } from '../test/support/replica.js';
import { TestStack } from '../test/support/stack.js';
import { benchArgs, median, percentile, round, writeResult } from './support/harness.js';

const args = benchArgs('replica');
const MARKETS: MarketSlug[] = ['cn-a', 'eu-a', 'cn-b'];
const CHANGES = args.size >= 10_000 ? 10 : 4;
const ROUNDS = args.size >= 10_000 ? 4 : 2;

async function run(): Promise<{ changes: TimedChange[]; lagSamples: number[]; lagBytes: number[] }> {
  const stack = new TestStack();
  try {
    const p = await startReplicaPlatform(stack, {
      size: args.size,
      apis: [
        ['standby-1', 'standby'],
        ['primary-1', 'primary'],
      ],
      perMinute: 60,
    });
    // Warm: each API builds each list once before anything is timed (the platform bench does the
    // same); a cold build of a 35k-row list is not a change's freshness.
    for (const api of p.apis)
      for (const m of MARKETS)
        await fetch(`${api.url}/v1/prices/${m}`, { headers: { 'x-api-key': p.keys.reader } }).then((r) =>
          r.arrayBuffer(),
        );
    const lagSamples: number[] = [];
    const lagBytes: number[] = [];
    let sampling = true;
    const standbyApi = p.apis[0]!;
    const sampler = (async () => {
      while (sampling) {
        const res = await fetch(`${standbyApi.url}/v1/status`, { headers: { 'x-api-key': p.keys.reader } });
        const s = (await res.json()) as {
          database?: { replay_lag_seconds: number | null; replay_lag_bytes: number | null };
        };
        if (s.database?.replay_lag_seconds != null) lagSamples.push(s.database.replay_lag_seconds);
        if (s.database?.replay_lag_bytes != null) lagBytes.push(s.database.replay_lag_bytes);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const changes: TimedChange[] = [];
    for (let r = 0; r < ROUNDS; r++)
      for (const m of MARKETS) changes.push(...(await timeChanges(p, m, CHANGES, r, 60_000)));
    sampling = false;
    await sampler;
    return { changes, lagSamples, lagBytes };
  } finally {
    await stack.cleanup();
  }
}

type Figures = Record<string, number | null>;
const runs: Figures[] = [];
for (let i = 0; i < args.runs; i++) {
  const r = await run();
  const standby = r.changes.map((c) => c.visibleMs['standby-1'] ?? Number.POSITIVE_INFINITY);
  const primary = r.changes.map((c) => c.visibleMs['primary-1'] ?? Number.POSITIVE_INFINITY);
  const extra = r.changes.map((c) => (c.visibleMs['standby-1'] ?? Infinity) - (c.visibleMs['primary-1'] ?? 0));
  const figures: Figures = {
    changes: r.changes.length,
    missed: standby.filter((ms) => !Number.isFinite(ms)).length,
    standby_freshness_p50_s: round(median(standby) / 1000),
    standby_freshness_p99_s: round(percentile(standby, 99) / 1000),
    primary_freshness_p99_s: round(percentile(primary, 99) / 1000),
    standby_extra_p99_s: round(percentile(extra, 99) / 1000),
    commit_p99_s: round(
      percentile(
        r.changes.map((c) => c.commitMs),
        99,
      ) / 1000,
    ),
    replay_lag_p99_s: r.lagSamples.length ? round(percentile(r.lagSamples, 99)) : null,
    replay_lag_max_bytes: r.lagBytes.length ? Math.max(...r.lagBytes) : null,
    lag_samples: r.lagSamples.length,
  };
  console.log(`run ${i + 1}: ${JSON.stringify(figures)}`);
  runs.push(figures);
}
const med = (key: string) => median(runs.map((r) => Number(r[key])));
await writeResult(args.out, {
  size: args.size,
  runs: runs.length,
  changes_per_run: runs[0]?.changes,
  standby_freshness_p99_s: med('standby_freshness_p99_s'),
  standby_freshness_p50_s: med('standby_freshness_p50_s'),
  primary_freshness_p99_s: med('primary_freshness_p99_s'),
  standby_extra_p99_s: med('standby_extra_p99_s'),
  commit_p99_s: med('commit_p99_s'),
  replay_lag_p99_s: med('replay_lag_p99_s'),
  replay_lag_max_bytes: med('replay_lag_max_bytes'),
  missed: runs.reduce((s, r) => s + Number(r.missed), 0),
  per_run: runs,
});
process.exit(0);

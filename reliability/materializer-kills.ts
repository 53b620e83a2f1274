/**
 * The materializer SIGKILLed at seeded random points while it works through the topics, restarted
 * after each kill (as the supervisor of `make run` restarts it), then compared with a materializer
 * that read the same topics undisturbed: every table's checksum (services/materializer
 * tableChecksums, the ones `make replay` prints) must be equal — nothing lost, nothing applied twice.
 *
 * The workload is real: the simulator and the pollers of six marketplaces, every data kind they
 * collect (listings, buy orders, float-ranged, float buy orders, sales, the store's book, history),
 * several rounds with the clock moving five hours each. A kill point is a number of records applied
 * (drawn from the seed); the victim is killed once it has applied that many and made progress since
 * it started, after a seeded pause of a few milliseconds, so kills land mid-batch as often as between.
 *
 *   node --import tsx reliability/materializer-kills.ts [--smoke] [--seed n] [--out file]
 */
import type { ChildProcess } from 'node:child_process';
import type { MarketSlug } from '@skinprices/domain';
import { topicFor } from '@skinprices/events';
import { MATERIALIZED_KINDS, tableChecksums } from '@skinprices/materializer';
import type { Poller } from '@skinprices/poller';
import type { Pool } from '@skinprices/store';
import { materializerEnv, startMaterializer, startPoller, startSimulator } from '../test/support/pipeline.js';
import { TestStack } from '../test/support/stack.js';
import { chaosArgs, message, runTopics, Rng, sleep, startService, within, writeScenario } from './support/harness.js';

const args = chaosArgs('materializer-kills');
const rng = new Rng(args.seed);
const KILLS = args.smoke ? 4 : 22;
const CATALOGUE = args.smoke ? 500 : 1_500;
const ROUNDS = args.smoke ? 2 : 8;
const MARKETS: MarketSlug[] = ['cn-a', 'cn-b', 'eu-a', 'usd-1', 'store', 'hist-a'];

const result: Record<string, unknown> = { catalogue_names: CATALOGUE, rounds: ROUNDS, errors: [] as string[] };
const errors = result.errors as string[];
const stack = new TestStack();
let child: ChildProcess | undefined;
const began = Date.now();
try {
  const sim = await startSimulator(stack, CATALOGUE);
  const suffix = await runTopics(stack);
  const pollers: Poller[] = [];
  for (const m of MARKETS) pollers.push((await startPoller(stack, sim, m, suffix, { fullEvery: 1 })).poller);
  for (let r = 0; r < ROUNDS; r++) {
    await Promise.all(pollers.map((p) => Promise.all(p.kinds.map((k) => p.runOnce(k)))));
    await sim.control('POST', '/_sim/clock', { advanceMs: 5 * 3_600_000 });
  }
  const topics = MATERIALIZED_KINDS.map((k) => `${topicFor(k).name}${suffix}`);
  const admin = stack.kafka.admin();
  await admin.connect();
  let total = 0;
  for (const t of topics) for (const p of await admin.fetchTopicOffsets(t)) total += Number(p.high);
  await admin.disconnect();
  result.records = total;
  console.log(`workload: ${total} records on ${topics.length} topics`);

  // The undisturbed reference, in-process, in its own schema and group.
  const reference = await stack.schema();
  await startMaterializer(stack, suffix, reference.pool);

  // The victim: the materializer as deployed (main.ts), a process of its own.
  const victim = await stack.schema();
  const group = stack.groupId();
  const launch = (): ChildProcess =>
    startService(
      'services/materializer/src/main.ts',
      materializerEnv(stack, { schema: victim.name, group, suffix }),
      undefined,
    );
  const alive = (c: ChildProcess | undefined) => c !== undefined && c.exitCode === null && c.signalCode === null;
  stack.defer(async () => {
    if (alive(child)) child?.kill('SIGKILL');
  });
  const applied = async (pool: Pool): Promise<number> => {
    const { rows } = await pool
      .query<{ n: string }>('SELECT coalesce(sum(next_offset), 0)::text AS n FROM consumer_offsets')
      .catch(() => ({ rows: [{ n: '0' }] }));
    return Number(rows[0]?.n ?? 0);
  };

  const points = Array.from({ length: KILLS }, () => Math.floor(total * (0.02 + 0.93 * rng.next()))).sort(
    (a, b) => a - b,
  );
  result.kill_points = points;
  const kills: { point: number; applied_at_kill: number; pause_ms: number; seconds: number }[] = [];
  for (const point of points) {
    const t0 = Date.now();
    child = launch();
    const start = await applied(victim.pool);
    const reached = await within(
      120_000,
      async () => {
        if (!alive(child)) return -1;
        const n = await applied(victim.pool);
        return n >= point && n > start ? n : undefined;
      },
      5,
    );
    if (reached === -1) {
      // Not ours: it died on its own (a supervisor restarts it; so does the next round here).
      errors.push(`the materializer exited by itself (code ${child.exitCode}) before kill point ${point}`);
      continue;
    }
    if (reached === undefined) {
      errors.push(`kill at ${point}: no progress within 120 s (applied ${await applied(victim.pool)})`);
      break;
    }
    const pause = rng.int(0, 40);
    await sleep(pause);
    const before = await applied(victim.pool);
    if (before >= total) break; // nothing left to interrupt
    const exited = new Promise((r) => child?.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    kills.push({ point, applied_at_kill: before, pause_ms: pause, seconds: (Date.now() - t0) / 1000 });
    console.log(`kill ${kills.length}: at ${before} of ${total} records applied`);
  }
  result.kills = kills;
  result.materializer_kills = kills.filter((k) => k.applied_at_kill < total).length;

  // The last start runs to the end; then both read models must be equal, table by table.
  child = launch();
  const caughtUp = await within(
    180_000,
    async () => ((await applied(victim.pool)) >= total && (await applied(reference.pool)) >= total ? true : undefined),
    250,
  );
  if (!caughtUp)
    errors.push(
      `not caught up in 180 s: victim ${await applied(victim.pool)}, reference ${await applied(reference.pool)} of ${total}`,
    );
  // Markers apply once their data is in, and what they queue is judged again and recomputed in
  // transactions of their own (migrations 0017, 0014): let all land, on both sides, before judging.
  const queued = async (pool: Pool) =>
    (
      await pool.query<{ n: number }>(
        'SELECT ((SELECT count(*) FROM derive_pending) + (SELECT count(*) FROM judge_pending))::int AS n',
      )
    ).rows[0]?.n ?? 0;
  const equal = await within(
    30_000,
    async () =>
      (await queued(victim.pool)) === 0 &&
      (await queued(reference.pool)) === 0 &&
      JSON.stringify(await tableChecksums(victim.pool)) === JSON.stringify(await tableChecksums(reference.pool))
        ? true
        : undefined,
    500,
  );
  const [a, b] = [await tableChecksums(victim.pool), await tableChecksums(reference.pool)];
  result.tables_equal = equal === true;
  result.tables = Object.fromEntries(
    Object.keys(b).map((t) => [t, { rows: b[t]?.rows, equal: JSON.stringify(a[t]) === JSON.stringify(b[t]) }]),
  );
  result.tables_different = Object.keys(b).filter((t) => JSON.stringify(a[t]) !== JSON.stringify(b[t]));
  const { rows } = await victim.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM dead_letters');
  result.dead_letters = rows[0]?.n ?? null;
  const exited = new Promise<number | null>((r) => child?.once('exit', (code) => r(code)));
  const stopping = Date.now();
  child.kill('SIGTERM');
  result.clean_exit_code = await exited;
  result.materializer_stop_s = Number(((Date.now() - stopping) / 1000).toFixed(2));
} catch (err) {
  errors.push(message(err));
  console.error(err);
} finally {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await stack.cleanup().catch((err: unknown) => errors.push(`clean-up: ${message(err)}`));
  result.seconds = Number(((Date.now() - began) / 1000).toFixed(1));
  await writeScenario(args, result);
}
process.exit(0);

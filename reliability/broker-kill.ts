/**
 * One Kafka broker of the three-node cluster (`make up-cluster`: KRaft, replication 3, min ISR 2)
 * killed with SIGKILL while the pollers produce, kept down for a seeded while, and brought back;
 * the materializer (a process, as deployed, restarted if it dies, as `make run`'s supervisor does)
 * consumes throughout. The pollers of five marketplaces run every kind they collect, round after
 * round, the simulator's clock an hour further each round. Afterwards:
 *
 * - lost: listings whose final state (the simulator's truth at the last round) is missing, different
 *   or still present in the read model when the truth has none, plus sales the upstream sold in the
 *   windows polled that the read model lacks (and whether they ever reached the topic);
 * - doubled: effects applied twice in the read model — sales stored twice, price changes recorded
 *   twice, tables that differ from an undisturbed materializer reading the same topics. Records
 *   written to the topics more than once (same topic, key and bytes: a producer session kafkajs
 *   re-initialised after the kill can write a batch again) are reported beside: the read model
 *   absorbs them (observed_at guards, sales by sale_id).
 *
 * The cluster runs beside the single-node stack (its own ports 19092/29092/39092 and 19093/…,
 * data, config and pid files under .local/; the registry keeps its schemas in PostgreSQL, not in
 * Kafka); started here when it is not running, and stopped again afterwards if it was.
 *
 *   node --import tsx reliability/broker-kill.ts [--seed n] [--out file]
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MARKETS, type MarketSlug } from '@skinprices/domain';
import { createKafka, topicFor, waitForKafka } from '@skinprices/events';
import { Materializer, MATERIALIZED_KINDS, MIGRATIONS_DIR, tableChecksums } from '@skinprices/materializer';
import type { UpstreamClient } from '@skinprices/marketplaces';
import type { Poller } from '@skinprices/poller';
import { createLogger } from '@skinprices/runtime';
import type { Pool } from '@skinprices/store';
import { FAST, materializerEnv, startPoller, startSimulator, untilApplied } from '../test/support/pipeline.js';
import { TestStack } from '../test/support/stack.js';
import {
  chaosArgs,
  message,
  onAbort,
  runTopics,
  Rng,
  sleep,
  startService,
  stopProcess,
  within,
  writeScenario,
} from './support/harness.js';
import { normPrice } from './support/truth.js';

const args = chaosArgs('broker-kill');
const rng = new Rng(args.seed);
const CLUSTER = process.env.CHAOS_CLUSTER_BROKERS ?? '127.0.0.1:19092,127.0.0.1:29092,127.0.0.1:39092';
// A TestStack reads KAFKA_BROKERS when it is built: the one below talks to the cluster.
process.env.KAFKA_BROKERS = CLUSTER;

const RUN_DIR = join(process.env.SKINPRICES_LOCAL_DIR ?? '.local', 'run');
const CATALOGUE = args.smoke ? 300 : 800;
const MIN_ROUNDS = args.smoke ? 6 : 10;
const MAX_ROUNDS = 40;
const ROUND_TIMEOUT_MS = 180_000;
const MARKETS_POLLED: MarketSlug[] = ['cn-a', 'cn-b', 'eu-a', 'usd-1', 'store'];
const HOUR = 3_600_000;

const kafkaSh = (cmd: 'start' | 'stop' | 'status') =>
  spawnSync('bash', ['infra/local/kafka.sh', cmd], {
    env: { ...process.env, KAFKA_NODES: '3' },
    stdio: ['ignore', 'pipe', 'inherit'],
    timeout: 300_000,
  });
/** The pid of node n when it is running and ours (a recycled pid of another program does not count). */
function nodePid(n: number): number | undefined {
  const f = join(RUN_DIR, `kafka-3-${n}.pid`);
  if (!existsSync(f)) return undefined;
  const pid = Number(readFileSync(f, 'utf8').trim());
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`skinprices-kafka-3-${n}`) ? pid : undefined;
  } catch {
    return undefined;
  }
}

const result: Record<string, unknown> = { catalogue_names: CATALOGUE, brokers: CLUSTER, errors: [] as string[] };
const errors = result.errors as string[];
const began = Date.now();
let startedCluster = false;
let stack: TestStack | undefined;
let materializer: ChildProcess | undefined;
let supervising = true;
try {
  // ---- the cluster ------------------------------------------------------------------------------------
  if (kafkaSh('status').status !== 0) {
    console.log('starting the three-node cluster (KAFKA_NODES=3 infra/local/kafka.sh start)');
    startedCluster = true;
    onAbort(() => void kafkaSh('stop'));
    if (kafkaSh('start').status !== 0) throw new Error('the three-node cluster did not start');
  }
  // The cluster answers once a quorum is up; the last node registers a few seconds later.
  const all = await within(
    180_000,
    async () => {
      const { brokers } = await waitForKafka(createKafka({ brokers: CLUSTER, clientId: 'chaos-wait' }), 10_000);
      return brokers === 3 ? true : undefined;
    },
    1_000,
  );
  if (!all) throw new Error(`the cluster at ${CLUSTER} did not have 3 brokers within 180 s`);
  result.cluster_started_here = startedCluster;

  stack = new TestStack();
  const st = stack;
  const sim = await startSimulator(st, CATALOGUE);
  const suffix = await runTopics(st);
  const pollers = new Map<MarketSlug, Poller>();
  const clients: UpstreamClient[] = [];
  for (const m of MARKETS_POLLED) {
    const { poller, client } = await startPoller(st, sim, m, suffix);
    pollers.set(m, poller);
    clients.push(client);
  }
  // A poller learns the upstream's clock from Date headers, so after the simulator's clock jumps
  // it would poll one round behind (a sales window ending an hour early): it re-learns it first.
  const advance = async () => {
    await sim.control('POST', '/_sim/clock', { advanceMs: HOUR });
    await Promise.all(clients.map((c) => c.syncClock()));
  };
  const topics = MATERIALIZED_KINDS.map((k) => `${topicFor(k).name}${suffix}`);
  // The first sales cycle reads back FAST.salesLookbackMs from the first round's time (an hour on).
  const salesFrom = sim.clock.now() + HOUR - FAST.salesLookbackMs;

  // ---- the materializer, supervised --------------------------------------------------------------------
  const victim = await st.schema();
  const group = st.groupId();
  const launch = () =>
    startService(
      'services/materializer/src/main.ts',
      materializerEnv(st, { schema: victim.name, group, suffix, brokers: CLUSTER }),
      undefined,
      // Its errors in this scenario's log: why it died, when it does.
      'inherit',
    );
  materializer = launch();
  let killedAt: number | undefined;
  let restarts = 0;
  const exits: string[] = [];
  void (async () => {
    while (supervising) {
      await sleep(500);
      if (supervising && materializer && (materializer.exitCode !== null || materializer.signalCode !== null)) {
        restarts++;
        exits.push(
          `${materializer.exitCode ?? materializer.signalCode} at ${killedAt === undefined ? 'before the kill' : `${((Date.now() - killedAt) / 1000).toFixed(0)} s after the kill`}`,
        );
        materializer = launch();
      }
    }
  })();

  // ---- rounds, one broker killed mid-round and brought back ------------------------------------------
  const killRound = rng.int(2, 3);
  const victimNode = rng.int(1, 3);
  const killAfterMs = rng.int(50, 800);
  const downForMs = rng.int(8_000, 20_000);
  const admin = st.kafka.admin();
  await admin.connect();
  const meta = await admin.fetchTopicMetadata({ topics });
  await admin.disconnect();
  result.victim_node = victimNode;
  result.victim_led_partitions = meta.topics.flatMap((t) => t.partitions).filter((p) => p.leader === victimNode).length;
  result.partitions = meta.topics.flatMap((t) => t.partitions).length;
  result.down_for_ms_planned = downForMs;

  let backAt: number | undefined;
  let restart: Promise<void> | undefined;
  const rounds: {
    round: number;
    at: number;
    upstream_at: number;
    ms: number;
    during_outage: boolean;
    outcomes: Record<string, number>;
    /** What the markers of cycles that were not COMPLETE said. */
    problems: string[];
  }[] = [];
  let lastMarkers: string[] = [];
  /** Per marketplace and round: the sales its SALES cycle counted as sent (acknowledged by Kafka). */
  const salesEmitted = new Map<string, number>();
  for (let r = 0; r < MAX_ROUNDS; r++) {
    if (r >= MIN_ROUNDS && backAt !== undefined && rounds.filter((x) => x.at > (backAt as number)).length >= 2) break;
    await advance();
    const t0 = Date.now();
    const outcomes: Record<string, number> = {};
    const problems: string[] = [];
    const markers: string[] = [];
    const cycles = Promise.all(
      [...pollers.values()].map((p) =>
        Promise.all(
          p.kinds.map(async (k) => {
            try {
              const { marker } = await p.runOnce(k);
              markers.push(marker.cycle_id);
              outcomes[marker.outcome] = (outcomes[marker.outcome] ?? 0) + 1;
              if (k === 'SALES') salesEmitted.set(`${marker.market} round ${r}`, marker.events_emitted);
              if (marker.outcome !== 'COMPLETE')
                problems.push(`${marker.market} ${k} ${marker.outcome}: ${(marker.error ?? '').slice(0, 200)}`);
            } catch (err) {
              outcomes.crashed = (outcomes.crashed ?? 0) + 1;
              errors.push(`round ${r} ${k}: ${message(err).slice(0, 200)}`);
            }
          }),
        ),
      ),
    );
    if (r === killRound) {
      await sleep(killAfterMs);
      const pid = nodePid(victimNode);
      if (pid === undefined) throw new Error(`node ${victimNode} of the cluster is not running`);
      process.kill(pid, 'SIGKILL');
      killedAt = Date.now();
      console.log(`kill -9 of broker ${victimNode} (pid ${pid}) ${killAfterMs} ms into round ${r}`);
      restart = (async () => {
        await sleep(downForMs);
        // kafka.sh start starts the nodes that are not running: the killed one.
        await new Promise<void>((resolve, reject) => {
          const c = spawn('bash', ['infra/local/kafka.sh', 'start'], {
            env: { ...process.env, KAFKA_NODES: '3' },
            stdio: ['ignore', 'ignore', 'inherit'],
          });
          c.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`kafka.sh start exited ${code}`))));
        });
        backAt = Date.now();
        console.log(`broker ${victimNode} back after ${((backAt - (killedAt as number)) / 1000).toFixed(1)} s`);
      })();
    }
    const timedOut = await Promise.race([cycles.then(() => false), sleep(ROUND_TIMEOUT_MS).then(() => true)]);
    if (timedOut) throw new Error(`round ${r} did not finish within ${ROUND_TIMEOUT_MS / 1000} s`);
    const during = killedAt !== undefined && (backAt === undefined || t0 < backAt);
    rounds.push({
      round: r,
      at: t0,
      upstream_at: sim.clock.now(),
      ms: Date.now() - t0,
      during_outage: during,
      outcomes,
      problems,
    });
    lastMarkers = markers;
    // Keep polling while the broker is away and until it is back.
    if (restart && backAt === undefined && r >= MIN_ROUNDS) await restart;
  }
  await restart;
  result.rounds = rounds.map(({ at: _at, ...x }) => x);
  // The platform should be whole again once the broker is back: cycles that still are not.
  result.not_complete_after_recovery = rounds
    .filter((x) => backAt !== undefined && x.at >= backAt)
    .flatMap((x) => x.problems.map((p) => `round ${x.round}: ${p}`));
  result.down_for_s = killedAt && backAt ? Number(((backAt - killedAt) / 1000).toFixed(1)) : null;
  const tFinal = sim.clock.now();

  // ---- caught up ------------------------------------------------------------------------------------------
  const admin2 = st.kafka.admin();
  await admin2.connect();
  let total = 0;
  for (const t of topics) for (const p of await admin2.fetchTopicOffsets(t)) total += Number(p.high);
  await admin2.disconnect();
  result.records = total;
  const applied = async (pool: Pool): Promise<number> =>
    Number(
      (
        await pool
          .query<{ n: string }>('SELECT coalesce(sum(next_offset), 0)::text AS n FROM consumer_offsets')
          .catch(() => ({ rows: [{ n: '0' }] }))
      ).rows[0]?.n ?? 0,
    );
  if (!(await within(180_000, async () => ((await applied(victim.pool)) >= total ? true : undefined), 500)))
    errors.push(`the materializer applied ${await applied(victim.pool)} of ${total} records within 180 s`);
  for (const id of lastMarkers)
    await untilApplied(victim.pool, id, 60_000).catch((e: unknown) => errors.push(message(e)));
  result.materializer_restarts = restarts;
  result.materializer_exits = exits;

  // ---- an undisturbed reading of the same topics ----------------------------------------------------------
  const reference = await st.schema();
  const ref = new Materializer(
    { groupId: st.groupId(), topicSuffix: suffix, migrationsDir: MIGRATIONS_DIR, outbox: true },
    { kafka: st.kafka, serde: st.serde, pool: reference.pool, logger: createLogger('ref', 'silent') },
  );
  await ref.start();
  st.defer(() => ref.stop());
  if (!(await within(180_000, async () => ((await applied(reference.pool)) >= total ? true : undefined), 500)))
    errors.push(`the reference applied ${await applied(reference.pool)} of ${total} records within 180 s`);
  for (const id of lastMarkers)
    await untilApplied(reference.pool, id, 60_000).catch((e: unknown) => errors.push(message(e)));
  const [a, b] = [await tableChecksums(victim.pool), await tableChecksums(reference.pool)];
  result.tables_different_from_reference = Object.keys(b).filter((t) => JSON.stringify(a[t]) !== JSON.stringify(b[t]));

  // ---- against the simulator's truth ------------------------------------------------------------------------
  let listingsLost = 0;
  let listingsExtra = 0;
  const listingExamples: string[] = [];
  for (const m of MARKETS_POLLED) {
    const truth = (
      (await sim.control('GET', `/_sim/truth?market=${m}&kind=listings&at=${tFinal}`)) as {
        records: { market_hash_name: string; phase: string; price: string | null; count: number }[];
      }
    ).records.filter((x) => x.price !== null);
    const { rows } = await victim.pool.query<{ k: string; v: string }>(
      `SELECT market_hash_name || '|' || phase AS k, price::text || ' x' || count AS v
       FROM listings_current WHERE market = $1 AND price IS NOT NULL`,
      [m],
    );
    const have = new Map(rows.map((x) => [x.k, x.v.replace(/^(\S+)/, (p) => normPrice(p))]));
    const want = new Map(
      truth.map((x) => [`${x.market_hash_name}|${x.phase}`, `${normPrice(x.price as string)} x${x.count}`]),
    );
    for (const [k, v] of want)
      if (have.get(k) !== v) {
        listingsLost++;
        if (listingExamples.length < 10)
          listingExamples.push(`${m} ${k}: truth ${v}, read model ${have.get(k) ?? 'none'}`);
      }
    for (const [k, v] of have)
      if (!want.has(k)) {
        listingsExtra++;
        if (listingExamples.length < 10) listingExamples.push(`${m} ${k}: truth none, read model ${v}`);
      }
  }
  let salesLost = 0;
  let salesTruth = 0;
  // Which round's window each lost sale fell in (round r reads the hour before its upstream time).
  const salesLostByRound: Record<string, number> = {};
  const lostSales: string[] = [];
  for (const m of MARKETS_POLLED.filter((x) => MARKETS.find((y) => y.slug === x)?.capabilities.includes('sales'))) {
    const truth = (
      (await sim.control('GET', `/_sim/truth?market=${m}&kind=sales&at=${tFinal}&from=${salesFrom}`)) as {
        records: { sale_id: string; sold_at: number }[];
      }
    ).records;
    salesTruth += truth.length;
    const { rows } = await victim.pool.query<{ sale_id: string }>('SELECT sale_id FROM sales WHERE market = $1', [m]);
    const have = new Set(rows.map((x) => x.sale_id));
    for (const x of truth.filter((y) => !have.has(y.sale_id))) {
      salesLost++;
      lostSales.push(`${m}|${x.sale_id}`);
      const r = rounds.find((y) => x.sold_at < y.upstream_at)?.round ?? 'after the last';
      salesLostByRound[`${m} round ${r}`] = (salesLostByRound[`${m} round ${r}`] ?? 0) + 1;
    }
  }
  result.truth = {
    listings_lost: listingsLost,
    listings_extra: listingsExtra,
    listing_examples: listingExamples,
    sales: salesTruth,
    sales_lost: salesLost,
    sales_lost_by_round: salesLostByRound,
  };

  // ---- records on the topics more than once -------------------------------------------------------------
  const seen = new Map<string, { n: number; first: string; ts: number }>();
  const dupes: { topic: string; at: string; first: string; ms_from_kill: number | null }[] = [];
  let read = 0;
  // Sales on the topic, to tell a sale never written from one written but not applied.
  const salesTopic = `${topicFor('sale').name}${suffix}`;
  const salesCodec = await st.serde.codec(salesTopic, 'sale');
  const salesOnTopic = new Set<string>();
  const salesOnTopicByRound = new Map<string, number>();
  const consumer = st.kafka.consumer({ groupId: st.groupId() });
  await consumer.connect();
  await consumer.subscribe({ topics, fromBeginning: true });
  await consumer.run({
    eachBatch: async ({ batch }) => {
      for (const m of batch.messages) {
        read++;
        const h = createHash('sha1')
          .update(batch.topic)
          .update('\u0000')
          .update(m.key ?? Buffer.alloc(0))
          .update('\u0000')
          .update(m.value ?? Buffer.alloc(0))
          .digest('hex');
        const where = `${batch.topic}/${batch.partition}@${m.offset}`;
        const prev = seen.get(h);
        if (prev) {
          prev.n++;
          dupes.push({
            topic: batch.topic,
            at: where,
            first: prev.first,
            ms_from_kill: killedAt === undefined ? null : Number(m.timestamp) - killedAt,
          });
        } else seen.set(h, { n: 1, first: where, ts: Number(m.timestamp) });
        if (batch.topic === salesTopic && m.value) {
          const sale = await salesCodec.decode(m.value);
          const id = `${sale.market}|${sale.sale_id}`;
          // Each sale once: a record written twice must not hide one never written.
          if (salesOnTopic.has(id)) continue;
          salesOnTopic.add(id);
          // The round whose cycle wrote it: its observation time falls between that round's
          // upstream time and the next's.
          const r = [...rounds].reverse().find((x) => sale.observed_at >= x.upstream_at)?.round;
          if (r !== undefined) {
            const k = `${sale.market} round ${r}`;
            salesOnTopicByRound.set(k, (salesOnTopicByRound.get(k) ?? 0) + 1);
          }
        }
      }
    },
  });
  await within(120_000, async () => (read >= total ? true : undefined), 200);
  await consumer.disconnect();
  const duplicates = dupes.length;
  result.topic_records_read = read;
  result.topic_duplicates = duplicates;
  result.topic_duplicates_by_topic = Object.fromEntries(
    [...new Set(dupes.map((d) => d.topic))].map((t) => [t, dupes.filter((d) => d.topic === t).length]),
  );
  // When they were written, relative to the kill: duplicates from producer retries cluster there.
  result.topic_duplicate_examples = dupes.slice(0, 10);

  // Sales a cycle counted as sent (its producer's send resolved) that are not on the topic.
  result.sales_acknowledged_not_on_topic = Object.fromEntries(
    [...salesEmitted].map(([k, n]) => [k, n - (salesOnTopicByRound.get(k) ?? 0)] as const).filter(([, d]) => d > 0),
  );
  (result.truth as Record<string, unknown>).sales_lost_never_on_topic = lostSales.filter(
    (x) => !salesOnTopic.has(x),
  ).length;
  result.broker_kill_lost = listingsLost + listingsExtra + salesLost + (read < total ? total - read : 0);
  // Doubled effects: what a record applied twice would leave in the read model — a sale stored
  // twice, a price change recorded twice (the outbox feeds price-changes.v1), or tables that differ
  // from an undisturbed reading. Records on the topics more than once are reported beside: the
  // log is at-least-once across producer sessions, the read model must not be.
  const salesTwice = Number(
    (await victim.pool.query<{ n: string }>('SELECT count(*) - count(DISTINCT (market, sale_id)) AS n FROM sales'))
      .rows[0]?.n ?? 0,
  );
  const changesTwice = Number(
    (
      await victim.pool.query<{ n: string }>(
        `SELECT coalesce(sum(n - 1), 0) AS n FROM (
           SELECT count(*) AS n FROM price_change_outbox
           GROUP BY market, market_hash_name, phase, observed_at, new_price, new_count HAVING count(*) > 1) d`,
      )
    ).rows[0]?.n ?? 0,
  );
  const tablesDiffer = (result.tables_different_from_reference as string[] | undefined)?.length ?? 0;
  result.doubled_effects = { sales_twice: salesTwice, price_changes_twice: changesTwice, tables_differ: tablesDiffer };
  result.broker_kill_doubled = salesTwice + changesTwice + tablesDiffer;
} catch (err) {
  errors.push(message(err));
  console.error(err);
} finally {
  supervising = false;
  if (materializer) await stopProcess(materializer, 10_000).catch(() => undefined);
  await stack?.cleanup().catch((err: unknown) => errors.push(`clean-up: ${message(err)}`));
  if (startedCluster) {
    console.log('stopping the three-node cluster this run started');
    kafkaSh('stop');
  }
  result.seconds = Number(((Date.now() - began) / 1000).toFixed(1));
  await writeScenario(args, result);
}
process.exit(0);

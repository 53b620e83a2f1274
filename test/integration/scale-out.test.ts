/**
 * Growing past one process, on the three-node Kafka cluster: two materializer processes with one
 * group id (a Kafka consumer group per lane: groups.ts) split the partitions of the topics and together build the read model one
 * materializer alone builds from the same topics (every table's checksum equal, each record and
 * each marker applied once between them); two API processes over that schema give the same
 * answers and, through Redis, share every key's limits.
 *
 * Both materializers start at the same moment on one fresh schema, so their migrations run
 * concurrently: the migration runner's advisory lock must serialise them (the second finds
 * everything applied). Both derive paths run too; the derive lock lets one apply a marker.
 *
 * The cluster is started here when it is not running (`KAFKA_NODES=3 infra/local/kafka.sh start`,
 * as reliability/broker-kill.ts does) and stopped again only if this file started it; the schema
 * registry of the single-node stack is used as is (it keeps its schemas in PostgreSQL).
 */
import { spawn } from 'node:child_process';
import { createConnection } from 'node:net';
import { API_MIGRATIONS_DIR, KeyStore, ReadModel } from '@skinprices/api';
import type { MarketSlug } from '@skinprices/domain';
import { createKafka, deleteTopics, ensureTopics, topicDefinitions, topicFor, waitForKafka } from '@skinprices/events';
import type { UpstreamClient } from '@skinprices/marketplaces';
import {
  kafkaGroups,
  Materializer,
  MATERIALIZED_KINDS,
  MIGRATIONS_DIR,
  tableChecksums,
} from '@skinprices/materializer';
import type { Poller } from '@skinprices/poller';
import { createLogger, waitForUrl } from '@skinprices/runtime';
import { loadMigrations, migrate, type Pool } from '@skinprices/store';
import { AssignerProtocol, type Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { materializerEnv, startPoller, startSimulator, type Sim } from '../support/pipeline.js';
import { eventually } from '../support/eventually.js';
import { freePort, startService, type Service } from '../support/services.js';
import { TestStack, uniqueName } from '../support/stack.js';

const CLUSTER = process.env.SCALE_OUT_BROKERS ?? '127.0.0.1:19092,127.0.0.1:29092,127.0.0.1:39092';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const CATALOGUE = 300;
const ROUNDS = 3;
// Listings, buy orders, float-ranged offers, float buy orders, sales and the store's order book.
const MARKETS_POLLED: MarketSlug[] = ['cn-a', 'cn-b', 'eu-a', 'store'];
/** Those of them `GET /v1/prices/{market}` serves. */
const LIST_MARKETS: MarketSlug[] = ['cn-a', 'cn-b', 'eu-a'];
/** The per-minute limit of the key whose limit both APIs share (a per-key override: short to exhaust). */
const PER_MINUTE = 12;
const HOUR = 3_600_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Redis answers PING (the APIs would otherwise answer every request with an error). */
async function redisAnswers(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = createConnection({ host: hostname, port: Number(port || 6379) });
    socket.setTimeout(3_000, () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (d) => {
      socket.end();
      resolve(d.toString().startsWith('+PONG'));
    });
  });
}

/** `KAFKA_NODES=3 infra/local/kafka.sh <cmd>`, asynchronously (the hook's timeout keeps working). */
function kafkaSh(cmd: 'start' | 'stop' | 'status'): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['infra/local/kafka.sh', cmd], {
      env: { ...process.env, KAFKA_NODES: '3' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.once('exit', (code) => resolve({ code, output }));
  });
}

/** Sum of a Prometheus counter over all its series, from a /metrics text. */
function counterSum(metricsText: string, name: string): number {
  let sum = 0;
  for (const line of metricsText.split('\n'))
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `))
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

/** Topic → partitions assigned to each member of `group` (empty while the group rebalances). */
async function groupAssignment(
  admin: Admin,
  group: string,
): Promise<{ state: string; members: { memberId: string; partitions: string[] }[] }> {
  const { groups } = await admin.describeGroups([group]);
  const g = groups[0];
  if (!g) return { state: 'Dead', members: [] };
  return {
    state: g.state,
    members: g.members.map((m) => {
      const decoded = AssignerProtocol.MemberAssignment.decode(m.memberAssignment);
      const partitions = Object.entries(decoded?.assignment ?? {}).flatMap(([topic, ps]) =>
        ps.map((p) => `${topic}/${p}`),
      );
      return { memberId: m.memberId, partitions };
    }),
  };
}

/** The materializer's two lanes' groups (groups.ts) as one view: stable when both are. */
async function lanesAssignment(
  admin: Admin,
  group: string,
): Promise<{
  state: string;
  members: { memberId: string; partitions: string[] }[];
  lanes: { state: string; members: { memberId: string; partitions: string[] }[] }[];
}> {
  const lanes = await Promise.all(kafkaGroups(group).map((g) => groupAssignment(admin, g)));
  return {
    state: lanes.every((l) => l.state === 'Stable') ? 'Stable' : lanes.map((l) => l.state).join(' / '),
    members: lanes.flatMap((l) => l.members),
    lanes,
  };
}

describe('scale-out: two materializers in one group, two APIs with shared limits', () => {
  const previousBrokers = process.env.KAFKA_BROKERS;
  // A TestStack reads KAFKA_BROKERS when it is built: this file's talks to the cluster.
  process.env.KAFKA_BROKERS = CLUSTER;
  const stack = new TestStack();
  let startedCluster = false;
  /**
   * Set by afterAll: a hook that timed out keeps running, and what it made after the clean-up
   * (topics, subjects, processes) would outlive the test. It stops at its next step instead.
   */
  let closed = false;
  const unlessClosed = () => {
    if (closed) throw new Error('the test was closed (a hook timed out) while setting up');
  };
  let suffix = '';
  let sim: Sim;
  const pollers: Poller[] = [];
  const clients: UpstreamClient[] = [];
  let shared: { name: string; pool: Pool };
  const group = stack.groupId();
  const materializers: { service: Service; metricsUrl: string }[] = [];
  /** Every topic-partition the materializers consume. */
  let partitions: string[] = [];
  let firstMembers: string[] = [];
  let admin: Admin;

  beforeAll(async () => {
    if (!(await redisAnswers(REDIS_URL))) throw new Error(`no Redis answers at ${REDIS_URL}`);
    // ---- the cluster ---------------------------------------------------------------------------------
    if ((await kafkaSh('status')).code !== 0) {
      startedCluster = true;
      // On a busy machine the first node can give up waiting for the quorum while the JVMs of the
      // others are still starting (one after another); a second start starts only what is not running.
      let started = await kafkaSh('start');
      if (started.code !== 0) started = await kafkaSh('start');
      if (started.code !== 0) throw new Error(`the three-node cluster did not start:\n${started.output}`);
    }
    unlessClosed();
    // The cluster answers once a quorum is up; the last node registers a few seconds later.
    await eventually(
      `3 brokers at ${CLUSTER}`,
      async () => {
        const { brokers } = await waitForKafka(createKafka({ brokers: CLUSTER, clientId: 'scale-out-wait' }), 10_000);
        return brokers === 3 ? true : undefined;
      },
      180_000,
      1_000,
    );
    // Its own client, quiet: describing a group that is still forming answers NOT_COORDINATOR,
    // which kafkajs logs as an error; the test asks again until the group is stable.
    admin = createKafka({
      brokers: CLUSTER,
      clientId: uniqueName('so_watch'),
      logCreator: () => () => undefined,
    }).admin();
    await admin.connect();
    stack.defer(() => admin.disconnect());

    unlessClosed();
    // ---- topics of this file, replicated three times --------------------------------------------------
    suffix = `.${uniqueName('so')}`;
    const names = topicDefinitions().map((t) => `${t.name}${suffix}`);
    stack.defer(async () => {
      await deleteTopics(stack.kafka, names);
      for (const n of names) await stack.serde.deleteSubject(`${n}-value`).catch(() => undefined);
    });
    // On the cluster, createTopics waiting for leaders now and then fails with
    // UNKNOWN_TOPIC_OR_PARTITION although the topic was created (a broker asked for metadata before
    // it heard of it); ensureTopics skips what exists, so trying again is safe.
    for (const t of topicDefinitions())
      await eventually(
        `topic ${t.name}${suffix}`,
        async () => {
          await ensureTopics(stack.kafka, [{ ...t, name: `${t.name}${suffix}` }]);
          return true;
        },
        60_000,
        1_000,
      );
    // Schemas registered before any service starts, as a deploy (and `make run`) does: two
    // processes registering one new subject at once race on its compatibility rule (Apicurio
    // answers 409, which the serde takes for an incompatible schema, and the process exits).
    for (const t of topicDefinitions()) await stack.serde.codec(`${t.name}${suffix}`, t.event);
    const consumed = MATERIALIZED_KINDS.map((k) => `${topicFor(k).name}${suffix}`);
    // Asked until every partition names three replicas: a broker that has just learned of a topic
    // can answer metadata before it knows every replica (CI saw one partition short of three once),
    // while a topic really created with fewer replicas never reaches three and fails here.
    const meta = await eventually(
      'three replicas for every partition',
      async () => {
        const m = await admin.fetchTopicMetadata({ topics: consumed });
        return m.topics.flatMap((t) => t.partitions).every((p) => p.replicas.length === 3) ? m : undefined;
      },
      60_000,
      1_000,
    );
    partitions = meta.topics.flatMap((t) => t.partitions.map((p) => `${t.name}/${p.partitionId}`)).sort();

    unlessClosed();
    // ---- upstream and pollers (in-process) -------------------------------------------------------------
    sim = await startSimulator(stack, CATALOGUE);
    for (const m of MARKETS_POLLED) {
      const { poller, client } = await startPoller(stack, sim, m, suffix);
      pollers.push(poller);
      clients.push(client);
    }

    // ---- two materializer processes on one fresh schema, started at the same moment -------------------
    shared = await stack.schema();
    unlessClosed();
    for (const n of [1, 2]) {
      const port = await freePort();
      const service = startService(
        `materializer-${n}`,
        'services/materializer/src/main.ts',
        materializerEnv(
          stack,
          { schema: shared.name, group, suffix, brokers: CLUSTER },
          {
            // Nobody is killed here: the deployed session timeout, so a member slowed down by a
            // busy machine is not taken for dead (a rebalance would be reported below).
            CONSUMER_SESSION_TIMEOUT_MS: '30000',
            METRICS_PORT: String(port),
            LOG_LEVEL: 'warn',
          },
        ),
      );
      stack.defer(async () => void (await service.stop()));
      materializers.push({ service, metricsUrl: `http://127.0.0.1:${port}/metrics` });
    }
  }, 600_000);

  afterAll(async () => {
    closed = true;
    try {
      await stack.cleanup();
    } finally {
      if (startedCluster) await kafkaSh('stop');
      if (previousBrokers === undefined) delete process.env.KAFKA_BROKERS;
      else process.env.KAFKA_BROKERS = previousBrokers;
    }
  }, 300_000);

  const deadMaterializers = () =>
    materializers
      .filter((m) => !m.service.alive())
      .map(
        (m) =>
          `${m.service.name} exited ${m.service.child.exitCode ?? m.service.child.signalCode}:\n${m.service.output()}`,
      );

  it('both migrate the same schema at once and split the partitions between them', async () => {
    const view = await eventually(
      'two members sharing every partition',
      async () => {
        const dead = deadMaterializers();
        if (dead.length > 0) throw new Error(dead.join('\n'));
        const g = await lanesAssignment(admin, group);
        const all = g.members.flatMap((m) => m.partitions).sort();
        // Each process is a member of both lanes' groups, and has partitions in each.
        const ok =
          g.state === 'Stable' &&
          g.lanes.every((lane) => lane.members.length === 2 && lane.members.every((m) => m.partitions.length > 0)) &&
          JSON.stringify(all) === JSON.stringify(partitions);
        return ok ? g : undefined;
      },
      120_000,
      500,
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${materializers.map((m) => m.service.output()).join('\n')}`);
    });
    firstMembers = view.members.map((m) => m.memberId).sort();
    console.info(
      `group ${group}: ${partitions.length} partitions, ${view.members.map((m) => m.partitions.length).join(' + ')} per member`,
    );
    // Every migration applied once (its version is the table's key), by whichever got the lock first.
    const { rows } = await shared.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM schema_migrations');
    expect(rows[0]?.n).toBe((await loadMigrations(MIGRATIONS_DIR)).length);
    expect(deadMaterializers()).toEqual([]);
  }, 180_000);

  it('together they build the read model one materializer alone builds from the same topics', async () => {
    // ---- rounds: every kind of every marketplace, the upstream clock an hour on each time ---------------
    const cycleIds: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      await sim.control('POST', '/_sim/clock', { advanceMs: HOUR });
      // A poller learns the upstream's clock from Date headers: it re-learns it after the jump.
      await Promise.all(clients.map((c) => c.syncClock()));
      // A cluster started a minute ago may still be electing the coordinators of its internal
      // topics (InitProducerId answers "loading"): a cycle whose sends failed is FAILED, as in
      // production, and the poller's next cycle of that kind goes through. Each kind must end the
      // round COMPLETE; every marker, failed ones too, is in the read model (freshness).
      const markers = await Promise.all(
        pollers.flatMap((p) =>
          p.kinds.map(async (k) => {
            let m = (await p.runOnce(k)).marker;
            for (let retry = 0; retry < 5 && m.outcome !== 'COMPLETE'; retry++) {
              cycleIds.push(m.cycle_id);
              await sleep(2_000);
              m = (await p.runOnce(k)).marker;
            }
            return m;
          }),
        ),
      );
      for (const m of markers) cycleIds.push(m.cycle_id);
      expect(markers.filter((m) => m.outcome !== 'COMPLETE').map((m) => `${m.market} ${m.kind} ${m.outcome}`)).toEqual(
        [],
      );
    }
    const consumed = MATERIALIZED_KINDS.map((k) => `${topicFor(k).name}${suffix}`);
    let total = 0;
    for (const t of consumed) for (const p of await admin.fetchTopicOffsets(t)) total += Number(p.high);

    const settled = async (pool: Pool): Promise<true | undefined> => {
      const { rows } = await pool.query<{ records: string; applied: number }>(
        `SELECT (SELECT coalesce(sum(next_offset), 0) FROM consumer_offsets)::text AS records,
                (SELECT count(*)::int FROM poll_cycles WHERE cycle_id = ANY($1) AND applied_at IS NOT NULL
                   AND NOT EXISTS (SELECT 1 FROM derive_pending)
                   AND NOT EXISTS (SELECT 1 FROM judge_pending)) AS applied`,
        [cycleIds],
      );
      return Number(rows[0]?.records) >= total && rows[0]?.applied === cycleIds.length ? true : undefined;
    };
    await eventually(
      `the two materializers applied ${total} records and ${cycleIds.length} markers`,
      async () => {
        const dead = deadMaterializers();
        if (dead.length > 0) throw new Error(dead.join('\n'));
        return settled(shared.pool);
      },
      180_000,
    );

    // ---- one materializer alone, in-process, in its own schema and group -----------------------------
    const reference = await stack.schema();
    const alone = new Materializer(
      { groupId: stack.groupId(), topicSuffix: suffix, migrationsDir: MIGRATIONS_DIR },
      { kafka: stack.kafka, serde: stack.serde, pool: reference.pool, logger: createLogger('alone', 'silent') },
    );
    await alone.start();
    stack.defer(() => alone.stop());
    await eventually(`the materializer alone applied ${total} records`, () => settled(reference.pool), 180_000);

    const [two, one] = [await tableChecksums(shared.pool), await tableChecksums(reference.pool)];
    expect(two.listings_current?.rows).toBeGreaterThan(CATALOGUE);
    expect(two.sales?.rows).toBeGreaterThan(0);
    expect(two.order_book_current?.rows).toBeGreaterThan(0);
    expect(two).toEqual(one);

    // ---- each did part of the work, and nothing was done twice --------------------------------------
    const metrics = await Promise.all(materializers.map(async (m) => (await fetch(m.metricsUrl)).text()));
    const records = metrics.map((t) => counterSum(t, 'materializer_records_applied_total'));
    const markers = metrics.map((t) => counterSum(t, 'materializer_markers_applied_total'));
    const failed = metrics.map((t) => counterSum(t, 'materializer_batches_failed_total'));
    const after = await lanesAssignment(admin, group);
    console.info(
      `records applied per process ${records.join(' + ')} of ${total}; markers ${markers.join(' + ')} of ` +
        `${cycleIds.length}; failed batches ${failed.join(', ')}; members ${
          JSON.stringify(after.members.map((m) => m.memberId).sort()) === JSON.stringify(firstMembers)
            ? 'unchanged'
            : 'changed (a member rejoined)'
        }; warnings:\n${materializers.map((m) => `${m.service.name}: ${m.service.output() || '(none)'}`).join('\n')}`,
    );
    expect(records.every((n) => n > 0)).toBe(true);
    // A record applied by both (a batch redelivered to the new owner after a rebalance) would count
    // twice: the second owner drops what lies below the offset the first stored with its rows.
    expect(records[0]! + records[1]!).toBe(total);
    // The derive lock: each marker applied by exactly one of the two derive paths.
    expect(markers[0]! + markers[1]!).toBe(cycleIds.length);
    // Two members in each lane's group: the two processes, neither restarted as a third.
    expect(after.lanes.map((l) => l.members.length)).toEqual([2, 2]);
    expect(deadMaterializers()).toEqual([]);
  }, 480_000);

  describe('two API processes over that schema', () => {
    const apis: string[] = [];
    let keys: { reader: string; limited: string };

    beforeAll(async () => {
      const keysSchema = await stack.schema();
      await migrate(keysSchema.pool, API_MIGRATIONS_DIR);
      const store = new KeyStore(keysSchema.pool);
      keys = {
        reader: (await store.create({ customer: 'reader@scale-out.test', plan: 'basic' })).secret,
        // The per-second window (10 by default) is raised out of the way: only the minute is counted.
        limited: (
          await store.create({
            customer: 'limited@scale-out.test',
            plan: 'basic',
            perMinute: PER_MINUTE,
            perSecond: 1000,
          })
        ).secret,
      };
      const started: Service[] = [];
      for (const n of [1, 2]) {
        const port = await freePort();
        const service = startService(`api-${n}`, 'services/api/src/main.ts', {
          DATABASE_URL: stack.env.databaseUrl,
          DATABASE_SCHEMA: shared.name,
          KEYS_SCHEMA: keysSchema.name,
          API_HOST: '127.0.0.1',
          API_PORT: String(port),
          REDIS_URL,
          LOG_LEVEL: 'warn',
          // API_PROCESSES left at its default: each API a cluster of workers, as deployed, so the
          // limit below is shared by every worker of both through Redis.
        });
        stack.defer(async () => void (await service.stop()));
        started.push(service);
        apis.push(`http://127.0.0.1:${port}`);
      }
      for (const [i, url] of apis.entries())
        await waitForUrl(`${url}/openapi.json`, 120_000, 200).catch((err: unknown) => {
          throw new Error(`${String(err)}\n${started[i]?.output()}`);
        });
    }, 240_000);

    it('answer GET /v1/prices/<market> with the same bytes, those of the read model', async () => {
      const read = new ReadModel(shared.pool);
      for (const market of LIST_MARKETS) {
        // The head of the body as the read model gives it now (the data settled above); each
        // process serves it once its cache has caught up with the last NOTIFY.
        const head = `{"data":${JSON.stringify(await read.marketListings(market))}`;
        expect(head.length).toBeGreaterThan(1_000);
        const bodies = await eventually(
          `both APIs serve the settled ${market} list`,
          async () => {
            const texts = await Promise.all(
              apis.map(async (url) => {
                const res = await fetch(`${url}/v1/prices/${market}`, { headers: { 'x-api-key': keys.reader } });
                if (res.status !== 200) throw new Error(`${url}: HTTP ${res.status} ${await res.text()}`);
                return res.text();
              }),
            );
            return texts.every((t) => t.startsWith(head)) ? texts : undefined;
          },
          30_000,
        );
        // The envelope's timestamp is when each process built its body: the one byte range that may differ.
        const [a, b] = bodies.map((t) => t.replace(/,"timestamp":"[^"]*"\}$/, ',"timestamp":…}'));
        expect(a).toBe(b);
        expect(a!.endsWith(`"requestor":"reader@scale-out.test","plan":"basic","timestamp":…}`)).toBe(true);
      }
    }, 120_000);

    it(`share a key's limit through Redis: ${PER_MINUTE} a minute over both, then 429`, async () => {
      // The limits count in fixed one-minute windows: the burst must fit into one, or the next
      // minute's allowance would add to this one's. Waiting for a fresh window is not an assertion.
      const into = Date.now() % 60_000;
      if (into > 45_000) await sleep(60_000 - into + 100);
      const window = Math.floor(Date.now() / 60_000);
      const answers: { api: number; status: number; code?: string; retryAfter: string | null }[] = [];
      for (let i = 0; i < 3 * PER_MINUTE; i++) {
        // Alternating, one at a time: each API sees half the requests.
        const api = i % 2;
        const res = await fetch(`${apis[api]}/v1/prices/cn-a`, { headers: { 'x-api-key': keys.limited } });
        const body = (await res.json()) as { error?: { code?: string } };
        answers.push({ api, status: res.status, code: body.error?.code, retryAfter: res.headers.get('retry-after') });
      }
      expect(Math.floor(Date.now() / 60_000)).toBe(window);
      const ok = answers.filter((a) => a.status === 200);
      const limited = answers.filter((a) => a.status === 429);
      console.info(
        `limit ${PER_MINUTE}/min: ${ok.length} answered (${ok.filter((a) => a.api === 0).length} by api-1, ` +
          `${ok.filter((a) => a.api === 1).length} by api-2), ${limited.length} refused`,
      );
      // In memory each process would let PER_MINUTE through: 2 × PER_MINUTE in all.
      expect(ok).toHaveLength(PER_MINUTE);
      // Every success comes before every refusal: once the shared count is spent, both refuse.
      expect(answers.slice(0, PER_MINUTE).every((a) => a.status === 200)).toBe(true);
      expect(limited).toHaveLength(2 * PER_MINUTE);
      expect(limited.every((a) => a.code === 'rate_limited' && a.retryAfter !== null)).toBe(true);
      expect(new Set(ok.map((a) => a.api)).size).toBe(2);
      expect(new Set(limited.map((a) => a.api)).size).toBe(2);
    }, 90_000);
  });
});

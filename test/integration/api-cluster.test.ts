/**
 * The API as customers run it on a machine of several cores: API_PROCESSES workers (node:cluster)
 * behind one port, their primary serving the summed /metrics and, without Redis, counting the rate
 * limits for all of them (and, always, each key's open streams). Here with two workers: both serve,
 * the metrics add up over them, a key's limit and its open streams are exact over them, a killed
 * worker is replaced while the other keeps serving (and the counts survive it: the primary holds
 * them), and a SIGTERM to the primary stops everything.
 *
 * Which worker answered a request is read from the kernel: the accepted side of each client
 * connection (/proc/net/tcp) belongs to the socket of one worker's file descriptors.
 */
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { API_MIGRATIONS_DIR, KeyStore } from '@skinprices/api';
import { MIGRATIONS_DIR } from '@skinprices/materializer';
import { waitForUrl } from '@skinprices/runtime';
import { migrate } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/eventually.js';
import { freePort, startService, type Service } from '../support/services.js';
import { TestStack } from '../support/stack.js';
import { descendants } from '../../bench/support/proc.js';

const MAIN = 'services/api/src/main.ts';
const MARKET = 'eu-a';
const ROUTE = '/v1/prices/:market';
const CONNECTIONS = 16;
/** The limited key's allowance: a minute's, and a day's (see its key below). */
const LIMIT = 30;
/** Requests of the limited key in one burst: each worker gets well over LIMIT of them. */
const BURST = 5 * LIMIT;
const STOP_WITHIN_MS = 5_000;
/** Clients sending requests through the kill, and how long each waits for an answer. */
const KILL_CLIENTS = 3;
const CLIENT_TIMEOUT_MS = 3_000;

/** The primary's children that are API workers (not, say, a compiler service), from /proc. */
function workerPids(primary: number): number[] {
  const children = descendants(primary);
  return children
    .filter((pid) => {
      try {
        // Forked with the primary's script, which node has made absolute.
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8')
          .split('\0')
          .some((arg) => arg === MAIN || arg.endsWith(`/${MAIN}`));
      } catch {
        return false;
      }
    })
    .sort((a, b) => a - b);
}

/** Client port → the worker holding the accepted end of that connection to `port`. */
function connectionOwners(port: number, workers: readonly number[]): Map<number, number> {
  const byInode = new Map<string, number>();
  for (const pid of workers)
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
        if (inode) byInode.set(inode, pid);
      } catch {
        // Closed meanwhile.
      }
    }
  const owners = new Map<number, number>();
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    // sl, local address, remote address, state (01: established), …, inode (the tenth).
    if (f.length < 10 || f[3] !== '01' || parseInt(f[1]!.split(':')[1]!, 16) !== port) continue;
    const owner = byInode.get(f[9]!);
    if (owner !== undefined) owners.set(parseInt(f[2]!.split(':')[1]!, 16), owner);
  }
  return owners;
}

/** Sum of a metric's samples whose line contains every one of `labels`, from a /metrics text. */
function sampleSum(text: string, name: string, labels: string[] = []): number {
  let sum = 0;
  for (const line of text.split('\n'))
    if ((line.startsWith(`${name}{`) || line.startsWith(`${name} `)) && labels.every((l) => line.includes(l)))
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

interface Answer {
  status: number | string;
  /** The client's end of the connection it came on. */
  clientPort: number;
}

/** A GET with `key`; a fresh connection unless `agent` (its keep-alive connections). */
function get(port: number, path: string, key: string, agent?: Agent, timeoutMs = 3_000): Promise<Answer> {
  return new Promise((resolve) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        agent: agent ?? false,
        headers: { 'x-api-key': key, ...(agent ? {} : { connection: 'close' }) },
        timeout: timeoutMs,
      },
      (res) => {
        const clientPort = res.socket.localPort ?? 0;
        res.resume();
        res.once('end', () => resolve({ status: res.statusCode ?? 0, clientPort }));
        res.once('error', (err: NodeJS.ErrnoException) => resolve({ status: err.code ?? String(err), clientPort }));
      },
    );
    req.once('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
    req.once('error', (err: NodeJS.ErrnoException) => resolve({ status: err.code ?? String(err), clientPort: 0 }));
    req.end();
  });
}

/** A GET of the change stream over `agent`: its status once the head is in, and `close`. */
function openStream(port: number, key: string, agent: Agent): Promise<Answer & { close: () => void }> {
  return new Promise((resolve) => {
    const req = request(
      { host: '127.0.0.1', port, path: '/v1/prices/stream', agent, headers: { 'x-api-key': key } },
      (res) => {
        res.resume();
        resolve({ status: res.statusCode ?? 0, clientPort: res.socket.localPort ?? 0, close: () => req.destroy() });
      },
    );
    req.once('error', (err: NodeJS.ErrnoException) =>
      resolve({ status: err.code ?? String(err), clientPort: 0, close: () => undefined }),
    );
    req.end();
  });
}

/** `n` GETs at once over the agent's keep-alive connections. */
const burst = (port: number, path: string, key: string, agent: Agent, n: number) =>
  Promise.all(Array.from({ length: n }, () => get(port, path, key, agent)));

/** The workers among `counts`' keys, in order (as `workerPids` gives them). */
const workersIn = (counts: Record<string, number>): number[] =>
  Object.keys(counts)
    .map(Number)
    .sort((a, b) => a - b);

/** Answers counted by the worker that gave them (`other` if none held the connection). */
function byWorker(answers: readonly Answer[], owners: Map<number, number>, pick = (_: Answer) => true) {
  const counts: Record<string, number> = {};
  for (const a of answers.filter(pick)) {
    const w = String(owners.get(a.clientPort) ?? 'other');
    counts[w] = (counts[w] ?? 0) + 1;
  }
  return counts;
}

describe('the API on two processes (node:cluster)', () => {
  const stack = new TestStack();
  let api: Service;
  let primary: number;
  let port: number;
  let metricsUrl: string;
  let keys: { reader: string; limited: string };
  const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const path = `/v1/prices/${MARKET}`;
  const lines = () =>
    api
      .output()
      .split('\n')
      .flatMap((l) => {
        try {
          return [JSON.parse(l) as { msg?: string; pid?: number; time?: number }];
        } catch {
          return [];
        }
      });

  beforeAll(async () => {
    const readModel = await stack.schema();
    await migrate(readModel.pool, MIGRATIONS_DIR);
    await readModel.pool.query(
      `INSERT INTO listings_current (market, market_hash_name, phase, currency, price, count, observed_at, changed_at, cycle_id)
       SELECT $1, 'Cluster ' || lpad(i::text, 3, '0'), '', 'EUR', 10 + i, 1 + i % 7, now(), now(), 'c1'
       FROM generate_series(0, 49) i`,
      [MARKET],
    );
    const keysSchema = await stack.schema();
    await migrate(keysSchema.pool, API_MIGRATIONS_DIR);
    const store = new KeyStore(keysSchema.pool);
    keys = {
      reader: (
        await store.create({ customer: 'reader@cluster.test', plan: 'pro', perSecond: 100_000, perMinute: 1_000_000 })
      ).secret,
      // The second's window out of the way; the day's as small as the minute's, so that the count
      // still refuses after a minute boundary (and one inside the burst changes nothing).
      limited: (
        await store.create({
          customer: 'limited@cluster.test',
          plan: 'basic',
          perSecond: 100_000,
          perMinute: LIMIT,
          perDay: LIMIT,
        })
      ).secret,
    };
    port = await freePort();
    const metricsPort = await freePort();
    metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    api = startService('api', MAIN, {
      DATABASE_URL: stack.env.databaseUrl,
      DATABASE_SCHEMA: readModel.name,
      KEYS_SCHEMA: keysSchema.name,
      API_HOST: '127.0.0.1',
      API_PORT: String(port),
      METRICS_PORT: String(metricsPort),
      API_PROCESSES: '2',
      // Without Redis (even if this environment names one): the primary counts the limits.
      REDIS_URL: undefined,
      LOG_LEVEL: 'info',
    });
    stack.defer(async () => void (await api.stop()));
    stack.defer(async () => agent.destroy());
    primary = api.child.pid as number;
    await waitForUrl(`http://127.0.0.1:${port}/openapi.json`, 120_000, 100).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${api.output()}`);
    });
    // The port answers once the first worker listens: wait for the primary to say both do (and
    // for both to have said so themselves: their lines and the primary's cross in the pipe).
    await eventually(
      'both workers listening',
      async () =>
        (lines().some((l) => l.msg === 'api workers listening') &&
          lines().filter((l) => l.msg === 'api listening').length === 2) ||
        undefined,
      60_000,
      50,
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${api.output()}`);
    });
  }, 180_000);
  afterAll(() => stack.cleanup());

  it('runs two workers under the primary, both serving, their metrics summed', async () => {
    const workers = workerPids(primary);
    expect(workers, api.output()).toHaveLength(2);
    // Each says so, with its own pid; the primary serves no request itself.
    const listening = lines()
      .filter((l) => l.msg === 'api listening')
      .map((l) => l.pid);
    expect(listening.sort((a, b) => (a ?? 0) - (b ?? 0))).toEqual(workers);

    const answers = await burst(port, path, keys.reader, agent, 4 * CONNECTIONS);
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([200]));
    const served = byWorker(answers, connectionOwners(port, workers));
    expect(workersIn(served), JSON.stringify(served)).toEqual(workers);

    const metrics = await (await fetch(metricsUrl)).text();
    // Every answer counted once, whichever worker gave it: the primary adds up their series.
    expect(sampleSum(metrics, 'api_request_duration_seconds_count', [`route="${ROUTE}"`, 'status="200"'])).toBe(
      answers.length,
    );
  });

  it("holds a key's limit exactly over both workers, without Redis", async () => {
    const workers = workerPids(primary);
    const answers = await burst(port, path, keys.limited, agent, BURST);
    const owners = connectionOwners(port, workers);
    const counts = {
      ok: answers.filter((a) => a.status === 200).length,
      limited: answers.filter((a) => a.status === 429).length,
      perWorker: byWorker(answers, owners),
      okPerWorker: byWorker(answers, owners, (a) => a.status === 200),
    };
    const detail = JSON.stringify(counts);
    expect(counts.ok, detail).toBe(LIMIT);
    expect(counts.limited, detail).toBe(BURST - LIMIT);
    // Each worker had more than the limit to answer: counting alone, each would have let LIMIT through.
    expect(workersIn(counts.perWorker), detail).toEqual(workers);
    for (const w of workers) expect(counts.perWorker[w], detail).toBeGreaterThan(LIMIT);
    const metrics = await (await fetch(metricsUrl)).text();
    expect(sampleSum(metrics, 'api_rate_limited_total')).toBe(BURST - LIMIT);
  });

  it("holds a key's open streams exactly over both workers (the plan's 2, not 2 each)", async () => {
    const workers = workerPids(primary);
    // A keep-alive connection each: a refused one stays open, so its worker can be read too. One at
    // a time, until each worker was asked three times (the primary deals connections out unevenly).
    const agents: Agent[] = [];
    const streams: (Answer & { close: () => void })[] = [];
    const perWorker = () => byWorker(streams, connectionOwners(port, workers));
    try {
      while (streams.length < 30 && !workers.every((w) => (perWorker()[w] ?? 0) >= 3)) {
        const agent = new Agent({ keepAlive: true });
        agents.push(agent);
        streams.push(await openStream(port, keys.reader, agent));
      }
      const counts = {
        open: streams.filter((a) => a.status === 200).length,
        refused: streams.filter((a) => a.status === 429).length,
        perWorker: perWorker(),
      };
      const detail = JSON.stringify(counts);
      expect(counts.open, detail).toBe(2);
      expect(counts.refused, detail).toBe(streams.length - 2);
      // Both workers were asked more than twice: counting alone, each would have let two through.
      expect(workersIn(counts.perWorker), detail).toEqual(workers);
      for (const w of workers) expect(counts.perWorker[w], detail).toBeGreaterThan(2);
    } finally {
      for (const s of streams) s.close();
      for (const a of agents) a.destroy();
    }
  });

  it('replaces a killed worker while the other keeps serving, the counts kept', async () => {
    const before = workerPids(primary);
    expect(before).toHaveLength(2);
    const victim = before[0]!;
    // Clients sending one request after another, each on a new connection, through the kill.
    const answers: (Answer & { sentAt: number })[] = [];
    let done = false;
    const clients = Array.from({ length: KILL_CLIENTS }, async () => {
      while (!done) {
        const sentAt = Date.now();
        answers.push({ ...(await get(port, path, keys.reader, undefined, CLIENT_TIMEOUT_MS)), sentAt });
      }
    });
    await sleep(200);
    process.kill(victim, 'SIGKILL');
    const after = await eventually(
      'a new worker listening in place of the killed one',
      async () => {
        const now = workerPids(primary);
        const fresh = now.find((p) => !before.includes(p));
        const listens = lines().some((l) => l.msg === 'api listening' && l.pid === fresh);
        return now.length === 2 && !now.includes(victim) && listens ? now : undefined;
      },
      30_000,
      50,
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${api.output()}`);
    });
    const restarted = Date.now();
    await sleep(200);
    done = true;
    await Promise.all(clients);
    const died = lines().filter((l) => l.msg === 'a worker died: starting another');
    expect(
      died.map((l) => l.pid),
      api.output(),
    ).toEqual([victim]);
    const noticedAt = died[0]!.time!;
    const failed = answers.filter((a) => a.status !== 200);
    const detail = JSON.stringify({ noticedAt, failed, answers: answers.length });
    // Every request sent once the primary knew of the death was answered by the other worker,
    // also while the new one was starting.
    expect(
      failed.filter((a) => a.sentAt >= noticedAt),
      detail,
    ).toEqual([]);
    expect(answers.filter((a) => a.sentAt >= noticedAt && a.sentAt < restarted).length, detail).toBeGreaterThan(5);
    // Before that, only what crossed the death may be lost, at most a request or two per client:
    // one in flight on the killed worker (reset with it), and one the primary handed it just as
    // it died (node:cluster's round-robin then holds that connection unanswered until the client
    // gives up: it waits for the dead worker to acknowledge it).
    expect(failed.length, detail).toBeLessThanOrEqual(2 * KILL_CLIENTS);

    // Both serve again, the new one too; and the limited key stays spent on each (the count is the
    // primary's, not the killed worker's).
    const fresh = new Agent({ keepAlive: true, maxSockets: CONNECTIONS });
    stack.defer(async () => fresh.destroy());
    const ok = await burst(port, path, keys.reader, fresh, 2 * CONNECTIONS);
    expect(new Set(ok.map((a) => a.status))).toEqual(new Set([200]));
    expect(workersIn(byWorker(ok, connectionOwners(port, after)))).toEqual(after);
    const spent = await burst(port, path, keys.limited, fresh, 2 * CONNECTIONS);
    expect(new Set(spent.map((a) => a.status))).toEqual(new Set([429]));
    expect(workersIn(byWorker(spent, connectionOwners(port, after)))).toEqual(after);
    fresh.destroy();
  });

  it('stops on SIGTERM to the primary: exit 0 within seconds, no worker left', async () => {
    const workers = workerPids(primary);
    expect(workers).toHaveLength(2);
    agent.destroy();
    const exited = new Promise<number | null>((r) => api.child.once('exit', (code) => r(code)));
    const t0 = performance.now();
    api.child.kill('SIGTERM');
    const code = await Promise.race([exited, sleep(20_000).then(() => 'still running' as const)]);
    const stopMs = performance.now() - t0;
    const stopped = `exit ${String(code)} ${Math.round(stopMs)} ms after SIGTERM\n${api.output()}`;
    expect(code, stopped).toBe(0);
    expect(stopMs, stopped).toBeLessThan(STOP_WITHIN_MS);
    // The primary waited for its workers (it reaped them): none is left running.
    expect(workers.filter((pid) => existsSync(`/proc/${pid}`))).toEqual([]);
  });
});

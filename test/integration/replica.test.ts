/**
 * The read side on a PostgreSQL streaming replica (`make up-replica`): one primary, one hot
 * standby, one materializer writing to the primary, two API processes on the standby and one on
 * the primary, one Redis. The standby's APIs write nothing (a hot standby refuses every write and
 * LISTEN): they wait for the schemas instead of migrating, follow changes and key edits by polling,
 * and say how far behind their database is.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { KeyStore } from '@skinprices/api';
import { createPool } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  standbyCaughtUp,
  startReplicaPlatform,
  timeChanges,
  type ReplicaApi,
  type ReplicaPlatform,
} from '../support/replica.js';
import { eventually } from '../support/eventually.js';
import { TestStack } from '../support/stack.js';

const PER_MINUTE = 12;
const LISTS = ['cn-a', 'cn-b', 'eu-a'] as const;

describe('the API on a hot standby', () => {
  const stack = new TestStack();
  let p: ReplicaPlatform;
  let item: string;

  beforeAll(async () => {
    p = await startReplicaPlatform(stack, {
      size: 150,
      apis: [
        ['standby-1', 'standby'],
        ['standby-2', 'standby'],
        ['primary-1', 'primary'],
      ],
      perMinute: PER_MINUTE,
    });
    const { rows } = await p.primary.query<{ market_hash_name: string }>(
      `SELECT c.market_hash_name FROM listings_current c JOIN listings_current b USING (market_hash_name, phase)
       WHERE c.market = 'cn-a' AND b.market = 'eu-a' AND c.price IS NOT NULL AND c.phase = '' ORDER BY 1 LIMIT 1`,
    );
    item = rows[0]!.market_hash_name;
  }, 300_000);
  afterAll(() => stack.cleanup());

  const get = async (api: ReplicaApi, path: string, key = p.keys.reader, init: RequestInit = {}) => {
    const res = await fetch(`${api.url}${path}`, {
      ...init,
      headers: { 'x-api-key': key, ...(init.headers as Record<string, string> | undefined) },
    });
    return { status: res.status, etag: res.headers.get('etag'), body: Buffer.from(await res.arrayBuffer()) };
  };

  /** One request per endpoint (the status and the stream are checked on their own). */
  const requests = (): [string, RequestInit?][] => {
    const q = encodeURIComponent(item);
    return [
      ...LISTS.map((m): [string] => [`/v1/prices/${m}`]),
      ['/v1/prices/cn-a/buyorder'],
      ['/v1/prices/latest'],
      ['/v1/prices/latest?markets=cn-a,eu-a'],
      ['/v1/prices/latest?markets=usd-1'],
      [
        '/v1/prices/latest',
        { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ items: [item] }) },
      ],
      [`/v1/prices/search?market_hash_name=${q}`],
      [`/v1/prices/cn-a/history?market_hash_name=${q}`],
      ['/v1/store'],
      ['/v2/prices/float-ranged?market=cn-a'],
      ['/v1/prices/cn-b/float-buyorder'],
      ['/v1/prices/cn-a/float-buyorder'],
      [`/v1/market-sales/search?market_hash_name=${q}`],
      ['/v1/market-sales/export'],
      ['/v1/indexes/market-cap'],
      ['/v1/prices/changes?since=now'],
    ];
  };
  /** The one part of a JSON answer that may differ between processes: when each built its envelope. */
  const comparable = (b: Buffer) =>
    b[0] === 0x7b ? b.toString().replace(/"timestamp":"[^"]*"/g, '"timestamp":…') : b.toString('base64');

  it('each API knows where it reads: the standby ones report their lag, none listens there', async () => {
    for (const api of p.apis) {
      const status = JSON.parse((await get(api, '/v1/status')).body.toString()) as {
        database: { role: string; replay_lag_seconds: number | null; receiving: boolean | null };
      };
      expect(status.database.role, api.name).toBe(api.on);
      if (api.on === 'standby') {
        expect(status.database.receiving).toBe(true);
        expect(status.database.replay_lag_seconds).toBeLessThan(5);
      } else expect(status.database.replay_lag_seconds).toBeNull();
    }
    const { rows } = await p.standby.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE 'api%' AND query ILIKE 'LISTEN%'`,
    );
    expect(rows[0]?.n).toBe(0);
  });

  it('once the standby caught up, all three serve the same bytes for every endpoint', async () => {
    await standbyCaughtUp(p.primary, p.standby);
    for (const [path, init] of requests()) {
      const answers = await eventually(
        `the three APIs agree on ${init?.method ?? 'GET'} ${path}`,
        async () => {
          const got = await Promise.all(p.apis.map((api) => get(api, path, p.keys.reader, init)));
          for (const g of got)
            if (g.status !== 200) throw new Error(`HTTP ${g.status} ${g.body.toString().slice(0, 200)}`);
          const texts = got.map((g) => comparable(g.body));
          return texts.every((t) => t === texts[0]) ? got : undefined;
        },
        20_000,
      );
      expect(answers[0]!.body.length, path).toBeGreaterThan(20);
      expect(new Set(answers.map((a) => a.etag)).size, `${path}: one ETag`).toBe(1);
    }
  }, 180_000);

  it('a change made upstream reaches the standby APIs within 2 s plus the replay lag', async () => {
    const timed = [
      ...(await timeChanges(p, 'cn-a', 6, 0)),
      ...(await timeChanges(p, 'eu-a', 6, 0)),
      ...(await timeChanges(p, 'cn-a', 6, 1)),
    ];
    const lines = timed.map(
      (c) =>
        `${c.market} ${c.name}: commit ${c.commitMs} ms, visible ${Object.entries(c.visibleMs)
          .map(([a, ms]) => `${a} ${ms}`)
          .join(', ')} ms, lag ${c.lagS} s`,
    );
    console.info(lines.join('\n'));
    for (const c of timed) {
      for (const api of p.apis) expect(c.visibleMs[api.name], `${c.name} on ${api.name}`).toBeDefined();
      for (const api of p.apis.filter((a) => a.on === 'standby'))
        expect(c.visibleMs[api.name]! - c.commitMs).toBeLessThan(2_000 + (c.lagS ?? 0) * 1000);
    }
  }, 180_000);

  it('a key created on the primary works on the standby APIs within a second of its replay', async () => {
    const keysPool = createPool({ databaseUrl: stack.env.databaseUrl, schema: p.keysSchema, max: 1 });
    try {
      const created = await new KeyStore(keysPool).create({ customer: 'new@replica.test', plan: 'basic' });
      await standbyCaughtUp(p.primary, p.standby);
      const t0 = Date.now();
      for (const api of p.apis.filter((a) => a.on === 'standby'))
        await eventually(
          `${api.name} accepts the new key`,
          async () => ((await get(api, '/v1/prices/eu-a', created.secret)).status === 200 ? true : undefined),
          5_000,
        );
      expect(Date.now() - t0).toBeLessThan(1_500);
      await keysPool.query(`UPDATE api_keys SET disabled = true WHERE customer = 'new@replica.test'`);
      await standbyCaughtUp(p.primary, p.standby);
      for (const api of p.apis.filter((a) => a.on === 'standby'))
        await eventually(
          `${api.name} refuses the disabled key`,
          async () => ((await get(api, '/v1/prices/eu-a', created.secret)).status === 401 ? true : undefined),
          5_000,
        );
    } finally {
      await keysPool.end();
    }
  }, 60_000);

  it(`shares one key's limit over all three: ${PER_MINUTE} a minute, then 429`, async () => {
    // Fixed one-minute windows: the burst must fit into one.
    const into = Date.now() % 60_000;
    if (into > 45_000) await sleep(60_000 - into + 100);
    const statuses: { api: number; status: number }[] = [];
    for (let i = 0; i < 3 * PER_MINUTE; i++) {
      const api = i % 3;
      statuses.push({ api, status: (await get(p.apis[api]!, '/v1/prices/eu-a', p.keys.limited)).status });
    }
    const ok = statuses.filter((s) => s.status === 200);
    expect(ok).toHaveLength(PER_MINUTE);
    expect(statuses.slice(0, PER_MINUTE).every((s) => s.status === 200)).toBe(true);
    expect(statuses.filter((s) => s.status === 429)).toHaveLength(2 * PER_MINUTE);
    expect(new Set(ok.map((s) => s.api)).size).toBe(3);
  }, 90_000);

  it("killing the standby's APIs loses nothing: the primary's keeps serving, a restarted one agrees", async () => {
    const [s1, s2, primaryApi] = p.apis as [ReplicaApi, ReplicaApi, ReplicaApi];
    // Load on every process while both standby processes die.
    let failedOnPrimary = 0;
    let stop = false;
    const load = (async () => {
      while (!stop) if ((await get(primaryApi, '/v1/prices/cn-a')).status !== 200) failedOnPrimary++;
    })();
    s1.service.child.kill('SIGKILL');
    s2.service.child.kill('SIGKILL');
    await Promise.all([s1.service.stop(), s2.service.stop()]);
    const after = await timeChanges({ ...p, apis: [primaryApi] }, 'cn-b', 4, 0);
    stop = true;
    await load;
    expect(failedOnPrimary).toBe(0);
    expect(after.every((c) => c.visibleMs[primaryApi.name] !== undefined)).toBe(true);
    const restarted = await p.startApi('standby-3', 'standby');
    await standbyCaughtUp(p.primary, p.standby);
    for (const path of ['/v1/prices/cn-b', '/v1/prices/cn-a', '/v1/market-sales/export'])
      await eventually(
        `the restarted standby API agrees with the primary's on ${path}`,
        async () => {
          const [a, b] = await Promise.all([get(restarted, path), get(primaryApi, path)]);
          return a.status === 200 && comparable(a.body) === comparable(b.body) ? true : undefined;
        },
        20_000,
      );
  }, 180_000);
});

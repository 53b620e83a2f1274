/**
 * usd-4 served in the Steam Community Market's format (search/render pages, formatted prices, no
 * phases, a bare 429 after 20 requests a minute), the whole way: simulator → poller (format
 * steam-market) → Kafka → materializer → the read API, asked over HTTP as a customer asks it
 * (GET /v1/prices/latest, the combined catalogue usd-4 is part of). Prices and counts must equal
 * the simulator's truth as Steam shows it: phase rows merged by name, lowest price, counts summed.
 */
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import { API_MIGRATIONS_DIR, buildApp, KeyStore, MemoryRateLimiter, ReadModel } from '@skinprices/api';
import { Dec, getMarket } from '@skinprices/domain';
import { EventProducer } from '@skinprices/events';
import { adapterFor, UpstreamClient, type Adapter } from '@skinprices/marketplaces';
import { Poller, PollerMetrics } from '@skinprices/poller';
import { createLogger } from '@skinprices/runtime';
import { migrate, type Pool } from '@skinprices/store';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAST, projectTopics, startMaterializer, startSimulator, untilApplied, type Sim } from '../support/pipeline.js';
import { TestStack } from '../support/stack.js';

const MARKET = 'usd-4';
/** 180 names: about 115 on usd-4, so two pages of 100. */
const SIZE = 180;
const START = Date.UTC(2026, 10, 20, 12);
const SEARCH = '/market/search/render/';
/** Steam's documented budget, which the simulator enforces: the 21st request in a minute is refused. */
const BUDGET = 20;
const MINUTE = 60_000;
/** The wait after a bare 429, shortened from the adapter's five minutes so the test stays short. */
const BAN_WAIT_MS = 1_500;

interface Answer {
  path: string;
  status: number | 'error';
  at: number;
}

interface Truth {
  market_hash_name: string;
  phase: string;
  price: string | null;
  count: number;
}

describe('usd-4 in the steam-market format, end to end', () => {
  const stack = new TestStack();
  let sim: Sim;
  let pool: Pool;
  let app: FastifyInstance;
  let api: string;
  let key: string;
  let poller: Poller;
  /** Every answer the poller's client got, in order. */
  const answers: Answer[] = [];
  const onAnswer = new Set<(a: Answer) => void>();
  /** Bumped after each applied cycle: the API rebuilds its catalogue on a new version. */
  let version = 0;

  beforeAll(async () => {
    sim = await startSimulator(stack, SIZE, START, { [MARKET]: 'steam-market' });
    const suffix = await projectTopics(stack);
    ({ pool } = await stack.schema());
    await startMaterializer(stack, suffix, pool);

    // The poller as startPoller builds it, but with the adapter's ban wait shortened.
    const steam = adapterFor('steam-market');
    expect(steam.limits?.bare429BackoffMs).toBeGreaterThan(MINUTE);
    const adapter: Adapter = { ...steam, limits: { ...steam.limits!, bare429BackoffMs: BAN_WAIT_MS } };
    const client = new UpstreamClient({
      baseUrl: sim.running.marketUrls[MARKET],
      market: MARKET,
      deadlineMs: 10_000,
      headersTimeoutMs: 5_000,
      headers: adapter.requestHeaders?.({}),
      onResponse: ({ path, status }) => {
        const a = { path, status, at: Date.now() };
        answers.push(a);
        for (const l of onAnswer) l(a);
      },
    });
    const producer = new EventProducer(stack.kafka);
    await producer.connect();
    const admin = stack.kafka.admin();
    await admin.connect();
    poller = new Poller(
      {
        ...FAST,
        market: { ...getMarket(MARKET), upstreamFormat: 'steam-market' },
        intervals: { LISTINGS: 3_600_000 },
        topicSuffix: suffix,
      },
      {
        client,
        producer,
        serde: stack.serde,
        admin,
        logger: createLogger('poller-usd-4', 'silent'),
        metrics: new PollerMetrics(),
        adapter,
      },
    );
    stack.defer(async () => {
      await poller.stop();
      await producer.disconnect();
      await admin.disconnect();
      await client.close();
    });

    const keys = await stack.schema();
    await migrate(keys.pool, API_MIGRATIONS_DIR);
    const store = new KeyStore(keys.pool);
    key = (await store.create({ customer: 'steam@example.com', plan: 'basic' })).secret;
    app = buildApp({
      keys: store,
      limiter: new MemoryRateLimiter(),
      read: new ReadModel(pool),
      version: () => version,
      logger: createLogger('api', 'silent'),
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    api = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await stack.cleanup();
  });

  /** The truth as Steam shows it: one row per name, the lowest price of its phases, counts summed. */
  async function steamTruth(): Promise<Map<string, { price: string | null; count: number }>> {
    const { records } = (await sim.control('GET', `/_sim/truth?market=${MARKET}&kind=listings`)) as {
      records: Truth[];
    };
    const out = new Map<string, { price: string | null; count: number }>();
    for (const r of records) {
      const cur = out.get(r.market_hash_name);
      if (!cur) out.set(r.market_hash_name, { price: r.price, count: r.count });
      else {
        cur.count += r.count;
        if (r.price !== null && (cur.price === null || new Dec(r.price).lessThan(cur.price))) cur.price = r.price;
      }
    }
    return out;
  }

  /** GET /v1/prices/latest over HTTP, as a customer: usd-4's price and count per catalogue key. */
  async function catalogue(): Promise<Map<string, { price: string; count: number; phase: string }>> {
    const res = await fetch(`${api}/v1/prices/latest?markets=${MARKET}`, { headers: { 'x-api-key': key } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      items: Record<string, Record<string, { price: string; count: number; phase: string }>>;
    };
    const out = new Map<string, { price: string; count: number; phase: string }>();
    for (const [name, byMarket] of Object.entries(body.items)) {
      const e = byMarket[MARKET];
      if (e) out.set(name, { price: e.price, count: e.count, phase: e.phase });
    }
    return out;
  }

  async function expectApiEqualsTruth(): Promise<number> {
    const truth = await steamTruth();
    const priced = [...truth].filter(([, t]) => t.price !== null);
    const want = new Map(priced.map(([n, t]) => [n, { price: t.price, count: t.count }]));
    const seen = (c: Awaited<ReturnType<typeof catalogue>>) =>
      new Map([...c].map(([n, e]) => [n, { price: e.price, count: e.count }]));
    // The API serves the previous body while it rebuilds after a change: ask until it is current.
    let served = await catalogue();
    for (let i = 0; i < 50 && !isDeepStrictEqual(seen(served), want); i++) {
      await sleep(100);
      served = await catalogue();
    }
    // Every priced name once, under its plain name (no phase), with the truth's price and count.
    expect(seen(served)).toEqual(want);
    expect([...served.values()].every((e) => e.phase === '')).toBe(true);
    // A name listed with no offer is stored as such (null, 0) and left out of the catalogue.
    const { rows } = await pool.query<{ market_hash_name: string; price: string | null; count: number }>(
      `SELECT market_hash_name, price, count FROM listings_current WHERE market = $1 AND price IS NULL`,
      [MARKET],
    );
    expect(new Map(rows.map((r) => [r.market_hash_name, r.count]))).toEqual(
      new Map([...truth].filter(([, t]) => t.price === null).map(([n]) => [n, 0])),
    );
    return truth.size;
  }

  /** Requests straight to the simulator's search page (another client sharing the budget). */
  async function knock(): Promise<{ status: number; retryAfter: string | null; body: string }> {
    const res = await fetch(`${sim.running.marketUrls[MARKET]}${SEARCH}?appid=730&norender=1&start=0&count=100`);
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.text() };
  }

  it('the API shows usd-4 as Steam does: every priced name at the truth’s lowest price and summed count', async () => {
    const result = await poller.runOnce('LISTINGS');
    expect(result.marker).toMatchObject({ outcome: 'COMPLETE', error: null });
    expect(result.rejected).toBe(0);
    await untilApplied(pool, result.marker.cycle_id);
    version++;
    const names = await expectApiEqualsTruth();
    expect(result.marker.items_seen).toBe(names);
    // Two pages of 100: the phase rows of the model became one Steam item each.
    const searches = answers.filter((a) => a.path === SEARCH);
    expect(searches.map((a) => a.status)).toEqual([200, 200]);
    expect(names).toBeGreaterThan(100);
    expect(names).toBeLessThanOrEqual(200);
    const { records } = (await sim.control('GET', `/_sim/truth?market=${MARKET}&kind=listings`)) as {
      records: Truth[];
    };
    expect(records.length).toBeGreaterThan(names);
  });

  it('a bare 429 in the middle of a cycle is waited out and the cycle still completes with every price', async () => {
    // The simulator's window holds this minute's requests: the poller's two pages so far. Fill it:
    // the first refusal comes exactly at the 21st request, and it carries no Retry-After.
    const used = answers.filter((a) => a.path === SEARCH).length;
    for (let i = used; i < BUDGET; i++) expect((await knock()).status).toBe(200);
    const refused = await knock();
    expect(refused.status).toBe(429);
    expect(refused.retryAfter).toBeNull();
    expect(refused.body).toBe('null');

    // A quiet minute later the window is empty again (12:01, still the same 10-minute price bucket).
    await sim.control('POST', '/_sim/clock', { advanceMs: MINUTE });
    // A price on the last page moves, so the page that will be refused carries a change.
    const truth = await steamTruth();
    const { records } = (await sim.control('GET', `/_sim/truth?market=${MARKET}&kind=listings`)) as {
      records: Truth[];
    };
    const plain = new Set(records.filter((r) => r.phase === '').map((r) => r.market_hash_name));
    const sorted = [...truth.keys()].sort();
    const last = sorted.filter((n) => plain.has(n)).at(-1)!;
    expect(sorted.indexOf(last)).toBeGreaterThanOrEqual(100);
    await sim.control('POST', '/_sim/override', {
      market: MARKET,
      market_hash_name: last,
      phase: '',
      price: '1234.56',
      count: 7,
    });
    // Leave the poller one request of the budget: page 1 passes, page 2 is refused.
    for (let i = 0; i < BUDGET - 1; i++) expect((await knock()).status).toBe(200);

    // When the refusal reaches the poller, a minute passes upstream and the ban is over; the poller
    // must not ask before its ban wait is up, and must ask the same page again.
    const before = answers.length;
    let banned: Answer | undefined;
    onAnswer.add((a) => {
      if (a.status === 429 && !banned) {
        banned = a;
        void sim.control('POST', '/_sim/clock', { advanceMs: MINUTE });
      }
    });
    const result = await poller.runOnce('LISTINGS');
    const mine = answers.slice(before).filter((a) => a.path === SEARCH);
    expect(mine.map((a) => a.status)).toEqual([200, 429, 200]);
    expect(mine[2]!.at - mine[1]!.at).toBeGreaterThanOrEqual(BAN_WAIT_MS);
    expect(result.marker).toMatchObject({ outcome: 'COMPLETE', error: null });
    expect(result.rejected).toBe(0);
    expect(result.marker.items_seen).toBe(truth.size);
    await untilApplied(pool, result.marker.cycle_id);
    version++;

    await expectApiEqualsTruth();
    expect((await catalogue()).get(last)).toEqual({ price: '1234.56', count: 7, phase: '' });
  });
});

/**
 * Candles in the history (issue 15, item 5): every hourly and daily bucket carries open, high, low
 * and close, and the close's listing count, computed from the observations whatever their order,
 * batch split or redelivery:
 * - through the real pipeline (Kafka → materializer → PostgreSQL → API): waves of events that
 *   arrive out of order (the closes first, the opens and lows last), then all of them again;
 *   the table and GET /v1/prices/{market}/history answer the exact candles, a redelivery and a
 *   replay leave the tables byte-equal;
 * - straight through applyBatch: many random orders and batch splits, with duplicates, give the
 *   same rows;
 * - buckets written before migration 0005 keep unknown (NULL) open/high/low while the close
 *   still moves; the history-only marketplace's closes never get an invented open/high/low.
 */
import { cp, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { API_MIGRATIONS_DIR, buildApp, KeyStore, MemoryRateLimiter, ReadModel } from '@skinprices/api';
import { getMarket } from '@skinprices/domain';
import {
  EventProducer,
  topicFor,
  type ConsumedBatch,
  type DecodedMessage,
  type EventKind,
  type EventMap,
} from '@skinprices/events';
import {
  applyBatch,
  eachKeyOnce,
  MIGRATIONS_DIR,
  replay,
  tableChecksums,
  type Materializer,
  type MaterializedKind,
} from '@skinprices/materializer';
import { createLogger } from '@skinprices/runtime';
import { createPool, migrate, type Pool } from '@skinprices/store';
import type { FastifyInstance } from 'fastify';
import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectTopics, startMaterializer } from '../support/pipeline.js';
import { TestStack } from '../support/stack.js';

type Listing = EventMap['listing'];
type HistoryPoint = EventMap['historyPoint'];
type HistoryHours = EventMap['historyHours'];

const MARKET = 'cn-c';
const A = 'Candle Test | Alpha (Field-Tested)';
const B = 'Candle Test | Beta (Minimal Wear)';
const H = 'Candle Test | Imported (Battle-Scarred)';
const D1 = '2026-11-20';
const D2 = '2026-11-21';
const at = (day: string, hhmm: string) => Date.parse(`${day}T${hhmm}:00.000Z`);

const listing = (name: string, day: string, hhmm: string, price: string | null, count: number): Listing => ({
  market: MARKET,
  market_hash_name: name,
  phase: '',
  currency: getMarket(MARKET).currency,
  price,
  count,
  exterior: name.slice(name.lastIndexOf('(') + 1, -1),
  stattrak: false,
  souvenir: false,
  template_id: null,
  item_page_url: null,
  observed_at: at(day, hhmm),
  cycle_id: `${MARKET}:LISTINGS:candles`,
});

/** The observations. The candles below are worked out by hand from them. */
const E = {
  a1: listing(A, D1, '10:05', '100.00', 5), // open of 10h and of the day
  a2: listing(A, D1, '10:15', '120.50', 4), // high of 10h
  a3: listing(A, D1, '10:25', '95.10', 7), // low of 10h and of the day
  a4: listing(A, D1, '10:40', null, 0), // gone for a while: no effect on the candle
  a5: listing(A, D1, '10:50', '101.00', 3), // close of 10h
  a6: listing(A, D1, '11:10', '99.00', 6), // open and low of 11h
  a7: listing(A, D1, '11:20', '130.00', 2), // high of 11h and of the day; the day's close (last priced)
  a8: listing(A, D1, '11:55', null, 0), // close of 11h: no listing
  a9: listing(A, D1, '12:10', null, 0), // 12h: never priced
  a10: listing(A, D1, '12:30', null, 0),
  a11: listing(A, D2, '00:30', '140.00', 1), // the next day: open and high
  a12: listing(A, D2, '09:00', '135.25', 2), // its close and low
  b1: listing(B, D1, '10:30', '50.00', 9),
  b2: listing(B, D1, '10:31', '49.99', 8),
};
const ALL: Listing[] = Object.values(E);

/**
 * Out of order on purpose: the closes arrive first, then events that are older than the stored
 * close but raise the high, lower the low or move the open earlier. The last wave moves only
 * the open of 10h (100.00 lies inside the high and low already stored).
 */
const WAVES: Listing[][] = [
  [E.a5, E.a7, E.a8, E.b2, E.a12],
  [E.a2, E.a10, E.a11, E.a4],
  [E.a3, E.a6, E.a9, E.b1],
  [E.a1],
];

interface Candle {
  name: string;
  bucket: string;
  open: string | null;
  high: string | null;
  low: string | null;
  close: string | null;
  count: number | null;
  observed_at: string;
  open_at: string | null;
}
const iso = (day: string, hhmm: string) => new Date(at(day, hhmm)).toISOString();
const c = (
  name: string,
  bucket: string,
  [open, high, low, close]: (string | null)[],
  count: number | null,
  observed: [string, string],
  openAt: [string, string] | null,
): Candle => ({
  name,
  bucket,
  open: open ?? null,
  high: high ?? null,
  low: low ?? null,
  close: close ?? null,
  count,
  observed_at: iso(...observed),
  open_at: openAt && iso(...openAt),
});

const HOURLY: Candle[] = [
  c(A, iso(D1, '10:00'), ['100.00', '120.50', '95.10', '101.00'], 3, [D1, '10:50'], [D1, '10:05']),
  c(A, iso(D1, '11:00'), ['99.00', '130.00', '99.00', null], 0, [D1, '11:55'], [D1, '11:10']),
  c(A, iso(D1, '12:00'), [null, null, null, null], 0, [D1, '12:30'], null),
  c(A, iso(D2, '00:00'), ['140.00', '140.00', '140.00', '140.00'], 1, [D2, '00:30'], [D2, '00:30']),
  c(A, iso(D2, '09:00'), ['135.25', '135.25', '135.25', '135.25'], 2, [D2, '09:00'], [D2, '09:00']),
  c(B, iso(D1, '10:00'), ['50.00', '50.00', '49.99', '49.99'], 8, [D1, '10:31'], [D1, '10:30']),
];
const DAILY: Candle[] = [
  c(A, D1, ['100.00', '130.00', '95.10', '130.00'], 2, [D1, '11:20'], [D1, '10:05']),
  c(A, D2, ['140.00', '140.00', '135.25', '135.25'], 2, [D2, '09:00'], [D2, '00:30']),
  c(B, D1, ['50.00', '50.00', '49.99', '49.99'], 8, [D1, '10:31'], [D1, '10:30']),
];

/** The history-only marketplace: a close, its correction later, and another day. */
const day = (d: string) => Date.parse(d) / 86_400_000;
const point = (d: string, price: string, count: number | null, observed: number): HistoryPoint => ({
  market: 'hist-a',
  market_hash_name: H,
  phase: '',
  currency: getMarket('hist-a').currency,
  day: day(d),
  price,
  count,
  observed_at: observed,
});
const POINTS: HistoryPoint[] = [
  point(D1, '3.20', null, at(D2, '01:00')),
  point(D1, '3.40', 12, at(D2, '02:00')),
  point(D2, '3.10', 7, at(D2, '02:00')),
];

/** A time column as a string: an ISO instant, or '-infinity'/'infinity' (pg-types gives ±Infinity). */
const time = (v: unknown): string | null =>
  v === null ? null : v instanceof Date ? v.toISOString() : String(v).toLowerCase();

async function candles(pool: Pool, resolution: 'hourly' | 'daily', market = MARKET): Promise<Candle[]> {
  const [table, bucket, close] =
    resolution === 'hourly' ? ['listing_hourly', 'hour', 'price'] : ['listing_daily', 'day::text', 'close'];
  const { rows } = await pool.query<Record<string, unknown>>(
    `SELECT market_hash_name AS name, ${bucket} AS bucket, open, high, low, ${close} AS close, count, observed_at, open_at
     FROM ${table} WHERE market = $1 ORDER BY market_hash_name, ${bucket}`,
    [market],
  );
  return rows.map((r) => ({
    name: r.name as string,
    bucket: time(r.bucket) as string,
    open: r.open as string | null,
    high: r.high as string | null,
    low: r.low as string | null,
    close: r.close as string | null,
    count: r.count as number | null,
    observed_at: time(r.observed_at) as string,
    open_at: time(r.open_at),
  }));
}

/** A seeded shuffle: every run tries the same orders, and a failure can be reproduced. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}
function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

describe('history candles', () => {
  const stack = new TestStack();
  const groupId = stack.groupId();
  const logger = createLogger('candles', 'silent');
  let suffix: string;
  let schema: string;
  let pool: Pool;
  let admin: Admin;
  let producer: EventProducer;
  let app: FastifyInstance;
  let key: string;
  let version = 0;
  let live: Materializer;

  /** Sends events in this order and waits until the materializer has applied all of them. */
  async function deliver<K extends EventKind>(kind: K, events: readonly EventMap[K][]): Promise<void> {
    const topic = `${topicFor(kind).name}${suffix}`;
    const { rejected } = await producer.send(await stack.serde.codec(topic, kind), events);
    expect(rejected).toEqual([]);
    const ends = (await admin.fetchTopicOffsets(topic)).filter((p) => Number(p.high) > 0);
    const deadline = Date.now() + 30_000;
    for (;;) {
      const { rows } = await pool.query<{ partition: number; next_offset: string }>(
        'SELECT partition, next_offset FROM consumer_offsets WHERE group_id = $1 AND topic = $2',
        [groupId, topic],
      );
      const next = new Map(rows.map((r) => [r.partition, r.next_offset]));
      if (ends.every((p) => next.get(p.partition) === p.high)) break;
      if (Date.now() > deadline) throw new Error(`${topic} not applied up to ${JSON.stringify(ends)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    version++;
  }

  async function api(market: string, name: string, resolution: string) {
    const res = await app.inject({
      url: `/v1/prices/${market}/history?market_hash_name=${encodeURIComponent(name)}&resolution=${resolution}`,
      headers: { 'x-api-key': key },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as { points: Record<string, unknown>[] };
  }

  beforeAll(async () => {
    suffix = await projectTopics(stack);
    ({ name: schema, pool } = await stack.schema());
    stack.defer(async () => {
      const a = createPool({ databaseUrl: stack.env.databaseUrl, max: 1 });
      await a.query(`DROP SCHEMA IF EXISTS ${schema}_rb CASCADE`);
      await a.end();
    });
    producer = new EventProducer(stack.kafka);
    await producer.connect();
    admin = stack.kafka.admin();
    await admin.connect();
    stack.defer(async () => {
      await producer.disconnect();
      await admin.disconnect();
    });
    live = await startMaterializer(stack, suffix, pool, { groupId });

    const k = await stack.schema();
    await migrate(k.pool, API_MIGRATIONS_DIR);
    const keys = new KeyStore(k.pool);
    key = (await keys.create({ customer: 'candles@example.com', plan: 'basic' })).secret;
    app = buildApp({
      keys,
      limiter: new MemoryRateLimiter(),
      read: new ReadModel(pool),
      version: () => version,
      logger: createLogger('api', 'silent'),
    });
    stack.defer(() => app.close());

    const random = rng(15);
    for (const wave of WAVES) await deliver('listing', shuffled(wave, random));
    await deliver('historyPoint', POINTS);
  }, 120_000);
  afterAll(() => stack.cleanup());

  it('the tables hold exact candles, whatever order the observations came in', async () => {
    // The waves cover every event once.
    expect(WAVES.flat().length).toBe(ALL.length);
    expect(new Set(WAVES.flat()).size).toBe(ALL.length);
    expect(await candles(pool, 'hourly')).toEqual(HOURLY);
    expect(await candles(pool, 'daily')).toEqual(DAILY);
  });

  it('the API answers the candles beside the fields it had', async () => {
    const hourly = await api(MARKET, A, 'hourly');
    expect(hourly.points).toEqual(
      HOURLY.filter((p) => p.name === A).map((p) => ({
        time: p.bucket,
        price: p.close,
        count: p.count,
        open: p.open,
        high: p.high,
        low: p.low,
        close: p.close,
      })),
    );
    const daily = await api(MARKET, A, 'daily');
    expect(daily.points).toEqual(
      DAILY.filter((p) => p.name === A).map((p) => ({
        date: p.bucket,
        price: p.close,
        count: p.count,
        open: p.open,
        high: p.high,
        low: p.low,
        close: p.close,
      })),
    );
    expect((await api(MARKET, B, 'daily')).points).toEqual([
      { date: D1, price: '49.99', count: 8, open: '50.00', high: '50.00', low: '49.99', close: '49.99' },
    ]);
  });

  it('the history-only marketplace keeps closes without an invented open, high or low', async () => {
    expect(await candles(pool, 'daily', 'hist-a')).toEqual([
      {
        name: H,
        bucket: D1,
        open: null,
        high: null,
        low: null,
        close: '3.40',
        count: 12,
        observed_at: iso(D2, '02:00'),
        open_at: null,
      },
      {
        name: H,
        bucket: D2,
        open: null,
        high: null,
        low: null,
        close: '3.10',
        count: 7,
        observed_at: iso(D2, '02:00'),
        open_at: null,
      },
    ]);
    expect((await api('hist-a', H, 'daily')).points).toEqual([
      { date: D1, price: '3.40', count: 12, open: null, high: null, low: null, close: '3.40' },
      { date: D2, price: '3.10', count: 7, open: null, high: null, low: null, close: '3.10' },
    ]);
  });

  it('a redelivery of every event, and a replay from the topics, leave the tables byte-equal', async () => {
    const before = await tableChecksums(pool);
    expect(before.listing_hourly?.rows).toBe(HOURLY.length);
    await deliver('listing', shuffled(ALL, rng(16)).reverse());
    await deliver('historyPoint', [...POINTS].reverse());
    const after = await tableChecksums(pool);
    expect(after.listing_hourly).toEqual(before.listing_hourly);
    expect(after.listing_daily).toEqual(before.listing_daily);
    expect(await candles(pool, 'hourly')).toEqual(HOURLY);

    // A replay reads the same topics in batches of its own (the waves and the redelivery together);
    // the live materializer must be stopped first (it holds the schema's lock).
    await live.stop();
    const result = await replay(
      {
        databaseUrl: stack.env.databaseUrl,
        schema,
        groupId,
        topicSuffix: suffix,
        migrationsDir: MIGRATIONS_DIR,
        hourlyRetentionDays: 100,
        swap: false,
        target: `${schema}_rb`,
      },
      { kafka: stack.kafka, serde: stack.serde, logger },
    );
    expect(result.checksums.listing_hourly).toEqual(after.listing_hourly);
    expect(result.checksums.listing_daily).toEqual(after.listing_daily);
  });
});

/** A hand-built batch of one partition, offsets from `first` on (arrival order, as Kafka gives). */
function batchOf(events: readonly Listing[], first: number): ConsumedBatch<MaterializedKind> {
  const topic = 'listings.direct';
  const messages: DecodedMessage<MaterializedKind>[] = events.map((value, i) => ({
    topic,
    partition: 0,
    offset: String(first + i),
    key: null,
    value,
  }));
  return { topic, partition: 0, messages };
}

/** Applies the events in this order, cut into batches at `cuts` (indexes), as the materializer would. */
async function applyInBatches(pool: Pool, events: readonly Listing[], cuts: readonly number[], first = 0) {
  const bounds = [0, ...cuts, events.length];
  const client = await pool.connect();
  try {
    for (let i = 0; i + 1 < bounds.length; i++) {
      const part = events.slice(bounds[i], bounds[i + 1]);
      if (part.length > 0)
        await applyBatch(client, 'listing', batchOf(part, first + (bounds[i] as number)), { groupId: 'direct' });
    }
  } finally {
    client.release();
  }
}

type Checksums = Awaited<ReturnType<typeof tableChecksums>>;

/**
 * 30 trials: every event, some twice (a producer retry, an upstream repeat), in a random order,
 * applied in the batches `cutsOf` cuts them into, must give the exact candles and the same table
 * checksums each time; `then` checks more on the trial's tables.
 */
async function randomTrials(
  pool: Pool,
  seed: number,
  cutsOf: (arrivals: readonly Listing[], random: () => number) => number[],
  then?: (sums: Checksums, random: () => number, where: string) => Promise<void>,
): Promise<void> {
  const random = rng(seed);
  let reference: Checksums | undefined;
  for (let trial = 0; trial < 30; trial++) {
    await pool.query(
      'TRUNCATE listing_hourly, listing_daily, listings_current, item_markets, consumer_offsets, price_change_outbox',
    );
    const arrivals = shuffled([...ALL, ...ALL.filter(() => random() < 0.3)], random);
    const cuts = cutsOf(arrivals, random);
    await applyInBatches(pool, arrivals, cuts);
    const where = `trial ${trial}: ${arrivals.map((e) => `${e.market_hash_name.slice(14, 15)}${new Date(e.observed_at).toISOString().slice(8, 16)}`).join(' ')} cut at ${cuts.join(',')}`;
    expect(await candles(pool, 'hourly'), where).toEqual(HOURLY);
    expect(await candles(pool, 'daily'), where).toEqual(DAILY);
    const sums = await tableChecksums(pool);
    reference ??= sums;
    expect(sums.listing_hourly, where).toEqual(reference.listing_hourly);
    expect(sums.listing_daily, where).toEqual(reference.listing_daily);
    await then?.(sums, random, where);
  }
}

describe('history candles: any order, any batch split', () => {
  const stack = new TestStack();
  let pool: Pool;

  beforeAll(async () => {
    ({ pool } = await stack.schema());
    await migrate(pool, MIGRATIONS_DIR);
  });
  afterAll(() => stack.cleanup());

  it('30 random orders and splits, with duplicates, give the same rows; applying it all again changes nothing', async () => {
    await randomTrials(
      pool,
      5,
      (arrivals, random) =>
        [
          ...new Set(Array.from({ length: Math.floor(random() * 5) }, () => Math.floor(random() * arrivals.length))),
        ].sort((x, y) => x - y),
      async (sums, random, where) => {
        // A replay over the existing tables (stored offsets forgotten): every event again, another order.
        await pool.query('DELETE FROM consumer_offsets');
        await applyInBatches(pool, shuffled(ALL, random), [Math.floor(random() * ALL.length)], 1_000);
        const again = await tableChecksums(pool);
        expect(again.listing_hourly, where).toEqual(sums.listing_hourly);
        expect(again.listing_daily, where).toEqual(sums.listing_daily);
      },
    );
  });

  // Such a batch (a FULL cycle's pages, a cold start's, a burst's) takes the candle upserts
  // without the aggregate (listings.ts HOURLY_ONCE, DAILY_ONCE): the same rows in any order,
  // with the late, early and repeated observations landing in later batches.
  it('30 random orders, cut before every repeated item, give the same rows as the aggregate', async () => {
    await randomTrials(pool, 11, (arrivals) => {
      const cuts: number[] = [];
      let seen = new Set<string>();
      arrivals.forEach((e, i) => {
        if (seen.has(e.market_hash_name)) {
          cuts.push(i);
          seen = new Set();
        }
        seen.add(e.market_hash_name);
      });
      const bounds = [0, ...cuts, arrivals.length];
      for (let i = 0; i + 1 < bounds.length; i++)
        expect(eachKeyOnce(arrivals.slice(bounds[i], bounds[i + 1]))).toBe(true);
      return cuts;
    });
    // Whether a batch holds an item twice is told by its key, not by the time of its events.
    expect(eachKeyOnce([ALL[0] as Listing, { ...(ALL[0] as Listing), observed_at: 0 }])).toBe(false);
  });
});

describe('history candles: buckets stored before migration 0005', () => {
  const stack = new TestStack();
  let pool: Pool;
  let dir: string;

  beforeAll(async () => {
    ({ pool } = await stack.schema());
    // The schema as it was before candles: migrations up to 0004.
    dir = await mkdtemp(join(tmpdir(), 'candles-'));
    for (const f of await readdir(MIGRATIONS_DIR))
      if (/^000[1-4]_.*\.sql$/.test(f)) await cp(join(MIGRATIONS_DIR, f), join(dir, f));
    await migrate(pool, dir);
    await pool.query(
      `CREATE TABLE listing_hourly_20261120 PARTITION OF listing_hourly
         FOR VALUES FROM ('2026-11-20T00:00:00Z') TO ('2026-11-21T00:00:00Z');
       INSERT INTO listing_hourly (market, market_hash_name, phase, hour, price, count, observed_at)
         VALUES ('${MARKET}', '${A}', '', '2026-11-20T10:00:00Z', 101.00, 3, '2026-11-20T10:50:00Z');
       INSERT INTO listing_daily (market, market_hash_name, phase, day, close, count, observed_at)
         VALUES ('${MARKET}', '${A}', '', '2026-11-20', 101.00, 3, '2026-11-20T10:50:00Z')`,
    );
    await migrate(pool, MIGRATIONS_DIR);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
    await stack.cleanup();
  });

  it('keeps their open, high and low unknown (NULL) while the close still moves; new buckets get candles', async () => {
    await applyInBatches(pool, shuffled(ALL, rng(7)), [5]);
    const legacy = { open: null, high: null, low: null, open_at: '-infinity' };
    const hourly = await candles(pool, 'hourly');
    expect(hourly[0]).toEqual({ ...HOURLY[0], ...legacy });
    expect(hourly.slice(1)).toEqual(HOURLY.slice(1));
    const daily = await candles(pool, 'daily');
    // The day's close moved on to 11:20 (130.00), but the day's low (95.10) and open are not
    // known from what was stored before: no candle is grown from part of the day.
    expect(daily[0]).toEqual({ ...DAILY[0], ...legacy });
    expect(daily.slice(1)).toEqual(DAILY.slice(1));
  });
});

describe('history candles: imported hours (history-hours.v1; history.v1 `hours` of version 2) merged with the observations', () => {
  const stack = new TestStack();
  let pool: Pool;
  const hourAt = (d: string, hh: string) => at(d, `${hh}:00`);
  const candle = (d: string, hh: string, open: string, high: string, low: string, close: string, count: number) => ({
    hour: hourAt(d, hh),
    open,
    high,
    low,
    close,
    count,
  });
  const imported = (name: string, price: string | null, hours: HistoryPoint['hours']): HistoryPoint => ({
    market: MARKET,
    market_hash_name: name,
    phase: '',
    currency: getMarket(MARKET).currency,
    day: Date.parse(D1) / 86_400_000,
    price,
    count: price === null ? null : 8,
    observed_at: at(D2, '12:00'),
    hours,
  });
  // Hours only (the poller's second pass): A's 09h (no observation) and 10h; then 10h again with
  // a higher high (another import of the day); B's close with its 10h.
  const IMPORTS: HistoryPoint[] = [
    imported(A, null, [
      candle(D1, '09', '98.00', '99.00', '97.00', '98.50', 4),
      candle(D1, '10', '100.00', '125.00', '95.00', '101.00', 3),
    ]),
    imported(A, null, [candle(D1, '10', '100.00', '126.00', '95.00', '101.00', 3)]),
    imported(B, '49.99', [candle(D1, '10', '50.00', '50.10', '49.90', '49.99', 8)]),
  ];
  /** The same imports as the poller sends them now: hours on history-hours.v1, closes on history.v1. */
  const SPLIT: (HistoryPoint | HistoryHours)[] = IMPORTS.flatMap((p) => {
    const { hours, ...point } = p;
    const out: (HistoryPoint | HistoryHours)[] = [{ ...point, hours: hours ?? [] } as HistoryHours];
    if (p.price !== null) out.push(point);
    return out;
  });
  const hourEnd = (hh: string) => `${D1}T${hh}:59:59.999Z`;
  const WANT_HOURLY: Candle[] = [
    {
      ...c(A, iso(D1, '09:00'), ['98.00', '99.00', '97.00', '98.50'], 4, [D1, '09:00'], [D1, '09:00']),
      observed_at: hourEnd('09'),
    },
    // The imported open (at 10:00) and close (at 10:59:59.999) are the hour's ends; high and low the extremes of all.
    {
      ...c(A, iso(D1, '10:00'), ['100.00', '126.00', '95.00', '101.00'], 3, [D1, '10:00'], [D1, '10:00']),
      observed_at: hourEnd('10'),
    },
    ...HOURLY.filter((h) => h.name === A && h.bucket !== iso(D1, '10:00')),
    {
      ...c(B, iso(D1, '10:00'), ['50.00', '50.10', '49.90', '49.99'], 8, [D1, '10:00'], [D1, '10:00']),
      observed_at: hourEnd('10'),
    },
  ];
  const WANT_DAILY: Candle[] = [
    // Observed close (11:20) is later than any imported hour's; the open moves to 09:00, the low to 95.00.
    c(A, D1, ['98.00', '130.00', '95.00', '130.00'], 2, [D1, '11:20'], [D1, '09:00']),
    DAILY[1]!,
    // B's imported close is the day's (observed the next day).
    c(B, D1, ['50.00', '50.10', '49.90', '49.99'], 8, [D2, '12:00'], [D1, '10:00']),
  ];

  beforeAll(async () => {
    ({ pool } = await stack.schema());
    await migrate(pool, MIGRATIONS_DIR);
  });
  afterAll(() => stack.cleanup());

  /**
   * Applies the arrivals in runs of one kind, cut at `cuts`, as the materializer's batches would be;
   * each event's offset is its place in the arrivals (increasing per topic, as Kafka's are).
   */
  async function applyMixed(arrivals: readonly (Listing | HistoryPoint | HistoryHours)[], cuts: readonly number[]) {
    const kindOf = (e: Listing | HistoryPoint | HistoryHours): MaterializedKind =>
      'cycle_id' in e ? 'listing' : 'price' in e ? 'historyPoint' : 'historyHours';
    const starts = new Set([0, ...cuts]);
    const client = await pool.connect();
    try {
      let run: { value: Listing | HistoryPoint | HistoryHours; offset: number }[] = [];
      const flush = async () => {
        if (run.length === 0) return;
        const kind = kindOf(run[0]!.value);
        const topic = `${kind}.direct`;
        const messages = run.map((m) => ({ topic, partition: 0, offset: String(m.offset), key: null, value: m.value }));
        await applyBatch(client, kind, { topic, partition: 0, messages } as ConsumedBatch<MaterializedKind>, {
          groupId: 'direct',
        });
        run = [];
      };
      for (const [i, value] of arrivals.entries()) {
        if (starts.has(i) || (run.length > 0 && kindOf(run[0]!.value) !== kindOf(value))) await flush();
        run.push({ value, offset: i });
      }
      await flush();
    } finally {
      client.release();
    }
  }

  it.each([
    ['history-hours.v1 and history.v1 apart', SPLIT],
    ["history.v1 version 2's points with hours", IMPORTS],
  ] as const)('give exact candles in any order and batch split, with a repeated hour (%s)', async (_, imports) => {
    const random = rng(11);
    let reference: Awaited<ReturnType<typeof tableChecksums>> | undefined;
    for (let trial = 0; trial < 20; trial++) {
      await pool.query(
        'TRUNCATE listing_hourly, listing_daily, listings_current, item_markets, consumer_offsets, price_change_outbox',
      );
      const arrivals = shuffled([...ALL, ...imports, ...imports.filter(() => random() < 0.3)], random);
      const cuts = Array.from({ length: Math.floor(random() * 4) }, () => Math.floor(random() * arrivals.length));
      await applyMixed(arrivals, cuts);
      const where = `trial ${trial}`;
      const hourly = await candles(pool, 'hourly');
      expect(
        hourly.filter((h) => h.bucket.startsWith(D1) || h.name === A),
        where,
      ).toEqual(WANT_HOURLY);
      expect(await candles(pool, 'daily'), where).toEqual(WANT_DAILY);
      const sums = await tableChecksums(pool);
      reference ??= sums;
      expect(sums.listing_hourly, where).toEqual(reference.listing_hourly);
      expect(sums.listing_daily, where).toEqual(reference.listing_daily);
    }
  });
});

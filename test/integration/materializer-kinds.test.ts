/**
 * Every data kind besides listings, through the real pipeline into PostgreSQL: buy orders,
 * float-ranged buckets, float buy orders, the store's book, sales and imported history equal the
 * simulator's truth, FULL and DELTA cycles alike (a removal deletes its row); liquidity and the
 * market cap follow their documented formulas, checked against an independent computation.
 */
import { Decimal } from 'decimal.js';
import type { MarketSlug } from '@skinprices/domain';
import type { Kind } from '@skinprices/marketplaces';
import type { Poller } from '@skinprices/poller';
import type { Pool } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  projectTopics,
  startMaterializer,
  startPoller,
  startSimulator,
  untilApplied,
  type Sim,
} from '../support/pipeline.js';
import { TestStack } from '../support/stack.js';

type Row = Record<string, unknown>;

/** JSON with sorted object keys and numbers-as-written decimals: "0.10" and "0.1" compare equal. */
function canon(v: unknown): string {
  const norm = (x: unknown): unknown => {
    if (x instanceof Date) return x.getTime();
    if (Array.isArray(x)) return x.map(norm);
    if (x && typeof x === 'object')
      return Object.fromEntries(
        Object.keys(x)
          .sort()
          .map((k) => [k, norm((x as Row)[k])]),
      );
    if (typeof x === 'string' && /^-?\d+\.\d+$/.test(x)) return new Decimal(x).toString();
    return x ?? null;
  };
  return JSON.stringify(norm(v));
}

const pick = (r: Row, keys: readonly string[]) => canon(keys.map((k) => r[k] ?? null));

describe('materializer: every data kind', () => {
  const stack = new TestStack();
  let sim: Sim;
  let pool: Pool;
  const pollers = new Map<MarketSlug, Poller>();

  beforeAll(async () => {
    sim = await startSimulator(stack, 150);
    const suffix = await projectTopics(stack);
    ({ pool } = await stack.schema());
    await startMaterializer(stack, suffix, pool);
    for (const m of ['cn-a', 'cn-b', 'store', 'hist-a', 'usd-1'] as const)
      pollers.set(m, (await startPoller(stack, sim, m, suffix)).poller);
  }, 60_000);
  afterAll(() => stack.cleanup());

  /** Every item CN-B listed in any of our CN-B listings cycles (the catalogue's second market). */
  const seenOnB = new Set<string>();
  const id = (r: Row) => `${String(r.market_hash_name)}\u001f${String(r.phase)}`;

  async function cycle(market: MarketSlug, kind: Kind) {
    const { marker } = await (pollers.get(market) as Poller).runOnce(kind);
    await untilApplied(pool, marker.cycle_id);
    if (market === 'cn-b' && kind === 'LISTINGS')
      for (const r of await truth('cn-b', 'listings')) if (r.price !== null) seenOnB.add(id(r));
    return marker;
  }

  async function truth(market: MarketSlug, kind: string, from = 0, at = sim.clock.now()): Promise<Row[]> {
    const q = new URLSearchParams({ market, kind, at: String(at), from: String(from) });
    return ((await sim.control('GET', `/_sim/truth?${q}`)) as { records: Row[] }).records;
  }

  async function table(sql: string, params: unknown[] = []): Promise<Row[]> {
    return (await pool.query(sql, params)).rows as Row[];
  }

  const same = (got: Row[], want: Row[], keys: readonly string[]) =>
    expect(got.map((r) => pick(r, keys)).sort()).toEqual(want.map((r) => pick(r, keys)).sort());

  const BUY = ['market_hash_name', 'phase', 'tier', 'price', 'blue_price', 'count'];
  const RANGED = ['market_hash_name', 'phase', 'float_min', 'float_max', 'first_price', 'fifth_price', 'count'];
  const FLOAT_BUY = [
    'market_hash_name',
    'phase',
    'order_id',
    'price',
    'quantity',
    'float_min',
    'float_max',
    'condition',
  ];
  const BOOK = ['market_hash_name', 'phase', 'asks', 'bids'];

  it('buy orders of CN-A and CN-B equal the truth, phase and tier rows included', async () => {
    for (const m of ['cn-a', 'cn-b'] as const) {
      await cycle(m, 'BUYORDERS');
      const got = await table(
        `SELECT * FROM buyorders_current WHERE market = $1 AND (price IS NOT NULL OR blue_price IS NOT NULL)`,
        [m],
      );
      const want = (await truth(m, 'buyorders')).filter((r) => r.price !== null || r.blue_price !== null);
      same(
        got.map((r) => ({ ...r, tier: r.tier === '' ? null : r.tier })),
        want,
        BUY,
      );
      expect(got.length).toBeGreaterThan(50);
    }
    const tiers = await table(`SELECT count(*)::int AS n FROM buyorders_current WHERE market = 'cn-b' AND tier <> ''`);
    expect(tiers[0]?.n).toBeGreaterThan(0);
  });

  it('float-ranged buckets and float buy orders are deltas: removals delete, each cycle leaves the truth', async () => {
    const orders = async () =>
      new Set((await table('SELECT market, order_id FROM float_buyorders_current')).map((r) => canon(r)));
    let before = new Set<string>();
    for (let round = 0; round < 2; round++) {
      if (round === 1) {
        before = await orders();
        await sim.control('POST', '/_sim/clock', { advanceMs: 6 * 3_600_000 });
      }
      for (const m of ['cn-a', 'cn-b'] as const) {
        const markers = [await cycle(m, 'FLOAT_RANGED'), await cycle(m, 'FLOAT_BUYORDERS')];
        expect(markers.map((x) => x.mode)).toEqual(round === 0 ? ['FULL', 'FULL'] : ['DELTA', 'DELTA']);
        // A DELTA sends what changed: fewer records than the buckets it saw.
        if (round === 1) expect(markers[0]?.events_emitted).toBeLessThan(markers[0]?.items_seen as number);
        same(
          await table('SELECT * FROM float_ranged_current WHERE market = $1', [m]),
          await truth(m, 'float-ranged'),
          RANGED,
        );
        same(
          await table('SELECT * FROM float_buyorders_current WHERE market = $1', [m]),
          await truth(m, 'float-buyorders'),
          FLOAT_BUY,
        );
      }
    }
    // Orders that went were deleted by their removal records (the DELTA round's markers remove nothing).
    const after = await orders();
    expect([...before].filter((o) => !after.has(o)).length).toBeGreaterThan(0);
  });

  it("the store's order book equals the truth, FULL and DELTA", async () => {
    const first = await cycle('store', 'ORDER_BOOK');
    const got = await table(`SELECT * FROM order_book_current WHERE market = 'store'`);
    expect(got.length).toBeGreaterThan(20);
    same(got, await truth('store', 'order-book'), BOOK);
    await sim.control('POST', '/_sim/clock', { advanceMs: 5 * 60_000 });
    const next = await cycle('store', 'ORDER_BOOK');
    expect([first.mode, next.mode]).toEqual(['FULL', 'DELTA']);
    expect(next.events_emitted).toBeLessThan(first.events_emitted);
    same(
      await table(`SELECT * FROM order_book_current WHERE market = 'store'`),
      await truth('store', 'order-book'),
      BOOK,
    );
  });

  it('sales are stored once each, with stickers and charms, equal to the truth of their window', async () => {
    for (const m of ['cn-a', 'cn-b', 'usd-1'] as const) {
      const marker = await cycle(m, 'SALES');
      // The poller's first window reaches back its look-back (3 h in tests) from the cycle start;
      // the upstreams take whole seconds.
      const to = Math.floor(marker.started_at / 1000) * 1000;
      const want = await truth(m, 'sales', to - 3 * 3_600_000, to);
      const got = await table(`SELECT * FROM sales WHERE market = $1`, [m]);
      expect(got.length).toBeGreaterThan(0);
      same(got, want, [
        'sale_id',
        'market_hash_name',
        'phase',
        'price',
        'sold_at',
        'float_value',
        'paint_index',
        'paint_seed',
        'stickers',
        'charms',
      ]);
      // The next window overlaps nothing already stored: a re-delivered sale changes nothing.
      await cycle(m, 'SALES');
      const again = await table(
        `SELECT count(*)::int AS n, count(DISTINCT sale_id)::int AS d FROM sales WHERE market = $1`,
        [m],
      );
      expect(again[0]?.n).toBe(again[0]?.d);
    }
  });

  it('history of the history-only marketplace lands in the daily closes', async () => {
    await cycle('hist-a', 'HISTORY');
    await cycle('hist-a', 'HISTORY');
    const got = await table(
      `SELECT market_hash_name, phase, (day - DATE '1970-01-01') AS day, close AS price, count FROM listing_daily WHERE market = 'hist-a'`,
    );
    const at = sim.clock.now();
    const want = [
      ...(await truth('hist-a', 'history', 0, at)),
      ...(await truth('hist-a', 'history', 0, at - 86_400_000)),
    ];
    expect(got.length).toBeGreaterThan(100);
    same(got, want, ['market_hash_name', 'phase', 'day', 'price', 'count']);
  });

  it("liquidity follows its documented formula from the day before's closes, and stays put within the day", async () => {
    // A day of listings and bids, then the next day's first cycles: the clock's day is the next.
    for (const m of ['cn-a', 'cn-b'] as const) await cycle(m, 'LISTINGS');
    await cycle('cn-a', 'BUYORDERS');
    const nextDay = Math.floor(sim.clock.now() / 86_400_000 + 1) * 86_400_000;
    await sim.control('POST', '/_sim/clock', { advanceMs: nextDay + 1_800_000 - sim.clock.now() });
    for (const m of ['cn-a', 'cn-b'] as const) await cycle(m, 'LISTINGS');
    await cycle('cn-a', 'BUYORDERS');
    const rows = await table(`SELECT * FROM item_liquidity`);
    expect(rows.length).toBeGreaterThan(50);
    const clock = (await table('SELECT now FROM read_model_clock'))[0]?.now as Date;
    const dayStart = Math.floor(clock.getTime() / 86_400_000) * 86_400_000;
    expect(dayStart).toBe(nextDay);
    // Each listing marketplace's close of the day before (listing_daily), by the listing rows'
    // currency; sales of the 7 and 30 days before the day began; the CNY bid held when it began.
    const closes = await table(
      `SELECT c.market_hash_name, c.phase, c.currency, d.close, d.count
       FROM listings_current c JOIN listing_daily d USING (market, market_hash_name, phase)
       WHERE d.day = $1::date`,
      [new Date(dayStart - 86_400_000).toISOString().slice(0, 10)],
    );
    const sales = await table(`SELECT market_hash_name, phase, sold_at FROM sales`);
    const bids = await table(
      `SELECT market_hash_name, phase, price, observed_at, prior_price, prior_at FROM buyorders_current
       WHERE tier = '' AND currency = 'CNY'`,
    );
    const key = id;
    let scored = 0;
    let withSpread = 0;
    for (const r of rows) {
      const k = key(r);
      const mine = closes.filter((l) => key(l) === k);
      const n = mine.reduce((s, l) => s + Number(l.count), 0);
      const asks = mine.filter((l) => l.currency === 'CNY').map((l) => new Decimal(l.close as string));
      const ask = asks.length ? Decimal.min(...asks) : null;
      const mySales = sales.filter((s) => key(s) === k).map((s) => (s.sold_at as Date).getTime());
      const recent = mySales.filter((t) => t >= dayStart - 30 * 86_400_000 && t < dayStart);
      const s7 = recent.filter((t) => t >= dayStart - 7 * 86_400_000).length;
      const held = bids
        .filter((b) => key(b) === k)
        .map((b) =>
          (b.observed_at as Date).getTime() < dayStart
            ? b.price
            : b.prior_at !== null && (b.prior_at as Date).getTime() < dayStart
              ? b.prior_price
              : null,
        )
        .filter((p): p is string => p !== null)
        .map((p) => new Decimal(p));
      const bid = held.length ? Decimal.max(...held) : null;
      const parts = [new Decimal(n).div(n + 20)];
      if (recent.length > 0) parts.push(new Decimal(s7).div(s7 + 10));
      if (bid && ask) {
        parts.push(Decimal.min(1, bid.div(ask)));
        withSpread++;
      }
      const want =
        parts.length === 1
          ? null
          : parts
              .reduce((a, b) => a.plus(b))
              .times(100)
              .div(parts.length)
              .toDecimalPlaces(2, Decimal.ROUND_HALF_UP)
              .toFixed(2);
      expect(r.score, k).toBe(want);
      expect(r.listings).toBe(n);
      if (want !== null) scored++;
    }
    expect(scored).toBeGreaterThan(20);
    expect(withSpread).toBeGreaterThan(20);
    // The shown score (migration 0013) is the same, item for item.
    const shown = await table(`SELECT market_hash_name, phase, score FROM item_liquidity_score ORDER BY 1, 2`);
    const inputs = await table(`SELECT market_hash_name, phase, score FROM item_liquidity ORDER BY 1, 2`);
    expect(shown).toEqual(inputs);
    // Later the same day the bids are drawn again and prices move: no score row is written (their
    // row versions are what the API's list patches read).
    const versions = async () =>
      new Map(
        (await table(`SELECT market_hash_name, phase, xmin::text AS v FROM item_liquidity_score`)).map((r) => [
          key(r),
          r.v,
        ]),
      );
    const before = await versions();
    const bidsBefore = await table(`SELECT market_hash_name, phase, price FROM buyorders_current ORDER BY 1, 2`);
    await sim.control('POST', '/_sim/clock', { advanceMs: 3_600_000 });
    await cycle('cn-b', 'LISTINGS');
    await cycle('cn-a', 'BUYORDERS');
    expect(await table(`SELECT market_hash_name, phase, price FROM buyorders_current ORDER BY 1, 2`)).not.toEqual(
      bidsBefore,
    );
    expect(await versions()).toEqual(before);
  });

  it('market cap = sum(price x count) over the cleaned CN-A catalogue, computed independently', async () => {
    // Two CN-A items that both marketplaces list: one priced at the 1,000,000 bound (excluded),
    // one with a single listing (excluded); a third at 999,999.99 x 2 passes those bounds but is
    // far from CN-B's price for it, so the outlier guard (migrations/0007) leaves it out.
    const cnA = (await truth('cn-a', 'listings')).filter((r) => r.price !== null);
    const both = cnA.filter((r) => seenOnB.has(id(r)));
    const [a, b, c] = both as [Row, Row, Row];
    await sim.control('POST', '/_sim/clock', { advanceMs: 3_600_000 });
    const set = (r: Row, price: string, count: number) =>
      sim.control('POST', '/_sim/override', {
        market: 'cn-a',
        market_hash_name: r.market_hash_name,
        phase: r.phase,
        price,
        count,
      });
    await set(a, '1000000.00', 5);
    await set(b, '12.00', 1);
    await set(c, '999999.99', 2);
    await cycle('cn-b', 'LISTINGS');
    const marker = await cycle('cn-a', 'LISTINGS');

    const listedA = (await truth('cn-a', 'listings')).filter((r) => r.price !== null);
    // The guard's references: no own one yet (fewer than 3 daily closes before today), and CN-B's
    // current price as the only peer of the same currency polled here.
    const { rows: closes } = await pool.query<{ days: number }>(
      `SELECT count(DISTINCT day)::int AS days FROM listing_daily
       WHERE market = 'cn-a' AND day < ($1::timestamptz AT TIME ZONE 'UTC')::date`,
      [new Date(marker.finished_at)],
    );
    expect(closes[0]?.days).toBeLessThan(3);
    const peerOf = new Map(
      (await truth('cn-b', 'listings'))
        .filter((r) => r.price !== null)
        .map((r) => [id(r), new Decimal(r.price as string)]),
    );
    let expected = new Decimal(0);
    let items = 0;
    let guarded = 0;
    for (const r of listedA) {
      const p = new Decimal(r.price as string);
      if (p.lte(0) || p.gte(1_000_000) || Number(r.count) < 2) continue;
      if (!seenOnB.has(id(r))) continue;
      const peer = peerOf.get(id(r));
      if (peer && (p.gt(peer.times(5)) || p.times(5).lt(peer))) {
        guarded++;
        continue;
      }
      expected = expected.plus(p.times(r.count as number));
      items++;
    }
    const hour = new Date(Math.floor(marker.finished_at / 3_600_000) * 3_600_000);
    expect(guarded).toBeGreaterThanOrEqual(1); // the planted 999,999.99
    const point = (await table('SELECT market_cap, items, cleaned FROM market_cap_hourly WHERE hour = $1', [hour]))[0];
    expect(point).toEqual({ market_cap: expected.toFixed(2), items, cleaned: true });
    const day = (
      await table(
        `SELECT market_cap, cleaned FROM market_cap_daily WHERE day = ($1::timestamptz AT TIME ZONE 'UTC')::date`,
        [hour],
      )
    )[0];
    expect(day).toEqual({ market_cap: expected.toFixed(2), cleaned: true });
    await sim.control('DELETE', '/_sim/override');
  });
});

/**
 * The DMarket format end to end: the simulator serves marketplace usd-2 as DMarket's public market
 * items API (individual offers, cursor-paged at most 100 a page, cent strings under price.USD, the
 * phase in extra, 2 anonymous requests a second), a poller speaks it, and the events go through
 * the real Kafka and materializer to the read API. What a customer gets from
 * GET /v1/prices/latest for usd-2 must equal the simulator's truth as the format sees it: every
 * (name, phase) with an offer, its lowest price and its number of offers (DMarket keeps phases
 * apart, so nothing is aggregated; a truth row without an offer does not exist on DMarket).
 */
import { catalogueKey, type PhaseOrNone } from '@skinprices/domain';
import type { Pool } from '@skinprices/store';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  projectTopics,
  startMaterializer,
  startPoller,
  startSimulator,
  untilApplied,
  type Sim,
} from '../support/pipeline.js';
import { startApi } from '../support/api.js';
import { TestStack } from '../support/stack.js';

interface TruthRow {
  market_hash_name: string;
  phase: string;
  price: string | null;
  count: number;
}
type Catalogue = Record<string, Record<string, { price: string | null; count: number; phase: string }>>;
interface MarketItems {
  objects: { itemId: string }[];
  total: { offers: number };
  cursor: string;
}

const PATH = '/exchange/v1/market/items';
const PAGE = 100;

describe('dmarket format: simulator → poller → Kafka → materializer → API', () => {
  const stack = new TestStack();
  let sim: Sim;
  let suffix: string;
  let pool: Pool;
  let key: string;
  let app: FastifyInstance;

  beforeAll(async () => {
    sim = await startSimulator(stack, 60, undefined, { 'usd-2': 'dmarket' });
    suffix = await projectTopics(stack);
    ({ pool } = await stack.schema());
    await startMaterializer(stack, suffix, pool);
    const api = await startApi(stack, pool, { customer: 'dmarket.example' });
    app = api.app;
    key = api.keys.basic;
  }, 120_000);
  afterAll(() => stack.cleanup());

  it('every item with an offer arrives with the lowest price and the offer count of the truth, in paced pages', async () => {
    const { poller, client } = await startPoller(stack, sim, 'usd-2', suffix, { format: 'dmarket' });
    // Every answer, a 429 included, carries the rate-limit headers: one call per request.
    const answers: { remaining: string | undefined; at: number }[] = [];
    client.onHeaders((h) =>
      answers.push({ remaining: h['ratelimit-remaining'] as string | undefined, at: Date.now() }),
    );
    const { marker, rejected, duplicates } = await poller.runOnce('LISTINGS');
    expect(marker).toMatchObject({ market: 'usd-2', outcome: 'COMPLETE', error: null, mode: 'FULL' });
    expect([rejected, duplicates]).toEqual([0, 0]);
    await untilApplied(pool, marker.cycle_id);

    const { records } = (await sim.control('GET', `/_sim/truth?market=usd-2&kind=listings&at=${sim.clock.now()}`)) as {
      records: TruthRow[];
    };
    // DMarket lists offers, not items: a truth row with no offer has nothing to show there.
    const listed = records.filter((r) => r.count > 0);
    expect(listed.length).toBeGreaterThan(30);
    expect(records.length).toBeGreaterThan(listed.length);
    const want = listed
      .map(
        (r) =>
          `${catalogueKey({ marketHashName: r.market_hash_name, phase: r.phase as PhaseOrNone })}|${r.phase}|${r.price}|${r.count}`,
      )
      .sort();

    // As a customer asks: the combined catalogue, usd-2's part.
    const res = await app.inject({
      method: 'GET',
      url: '/v1/prices/latest?markets=usd-2',
      headers: { 'x-api-key': key },
    });
    expect(res.statusCode, res.body).toBe(200);
    const items = (res.json() as { items: Catalogue }).items;
    const got = Object.entries(items)
      .map(([k, v]) => `${k}|${v['usd-2']!.phase}|${v['usd-2']!.price}|${v['usd-2']!.count}`)
      .sort();
    expect(got).toEqual(want);
    expect(marker.items_seen).toBe(listed.length);
    // The Doppler phase came through extra.phase: a phase row is its own catalogue entry.
    expect(got.some((g) => /\((Phase \d|Ruby|Sapphire|Black Pearl|Emerald)\)\|/.test(g))).toBe(true);

    // The walk took one request a page and no more: the documented 2 a second kept the
    // simulator's per-second window from ever answering 429 (a retried page would add one).
    const offers = listed.reduce((n, r) => n + r.count, 0);
    expect(answers).toHaveLength(Math.ceil(offers / PAGE));
    expect(answers.length).toBeGreaterThanOrEqual(3);
    for (let i = 2; i < answers.length; i++) expect(answers[i]!.at - answers[i - 2]!.at).toBeGreaterThanOrEqual(900);
  }, 60_000);

  it('a cursor walk of several pages reaches every offer exactly once and ends on the empty cursor', async () => {
    const base = `${sim.running.marketUrls['usd-2']}${PATH}?gameId=a8db&currency=USD&orderBy=price&orderDir=asc&limit=${PAGE}`;
    const ids: string[] = [];
    const cursors: string[] = [];
    let total: number | undefined;
    let cursor = '';
    // Not do…while: a 429 `continue` there would test the condition, and on the first page
    // (cursor '') end the walk before it began.
    for (;;) {
      const res = await fetch(cursor ? `${base}&cursor=${encodeURIComponent(cursor)}` : base);
      if (res.status === 429) {
        await res.body?.cancel();
        await new Promise((r) => setTimeout(r, 1000));
        continue;
      }
      expect(res.status).toBe(200);
      const body = (await res.json()) as MarketItems;
      total ??= body.total.offers;
      ids.push(...body.objects.map((o) => o.itemId));
      cursors.push(body.cursor);
      cursor = body.cursor;
      // Honour the headers as the poller does: nothing left in this second, wait for the next.
      if (res.headers.get('ratelimit-remaining') === '0') await new Promise((r) => setTimeout(r, 1000));
      if (cursor === '') break;
    }
    const { records } = (await sim.control('GET', `/_sim/truth?market=usd-2&kind=listings&at=${sim.clock.now()}`)) as {
      records: TruthRow[];
    };
    const offers = records.reduce((n, r) => n + r.count, 0);
    expect(cursors.length).toBeGreaterThanOrEqual(3);
    expect(cursors.at(-1)).toBe('');
    expect(new Set(cursors.slice(0, -1)).size).toBe(cursors.length - 1);
    expect(ids).toHaveLength(offers);
    expect(new Set(ids).size).toBe(offers);
    expect(total).toBe(offers);

    // What the customer sees counts the same offers: the API's counts sum to the walk's.
    const res = await app.inject({
      method: 'GET',
      url: '/v1/prices/latest?markets=usd-2',
      headers: { 'x-api-key': key },
    });
    const items = (res.json() as { items: Catalogue }).items;
    expect(Object.values(items).reduce((n, v) => n + v['usd-2']!.count, 0)).toBe(ids.length);
  }, 30_000);
});

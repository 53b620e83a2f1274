/**
 * A new marketplace of an existing format is one descriptor entry (SKINPRICES_EXTRA_MARKETS) plus
 * the simulator's data, and no code: here "eu-c", an EUR marketplace of the raw-listings format,
 * is served by the simulator, polled by a poller, materialised, and served by the API on every
 * endpoint its entry qualifies it for (its own list, the catalogue, search, history, status, the
 * document), with prices equal to the simulator's truth.
 */
import { vi } from 'vitest';

// Before any module of the platform loads: the descriptor is read once, at start, by every process.
const ENTRY = vi.hoisted(() => {
  const entry = {
    slug: 'eu-c',
    upstreamFormat: 'raw-listings',
    label: 'EU-C',
    currency: 'EUR',
    priceField: 'price',
    kind: 'listing',
    perMarketEndpoint: true,
    inCatalogue: true,
    capabilities: ['listings'],
    refresh: { listingsMs: 300_000 },
    itemPageUrlTemplate: 'https://eu-c.example/item/{market_hash_name}',
  };
  process.env.SKINPRICES_EXTRA_MARKETS = JSON.stringify([entry]);
  return entry;
});

import { getMarket, MARKETS, type MarketSlug } from '@skinprices/domain';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type TestApi } from '../support/api.js';
import {
  projectTopics,
  startMaterializer,
  startPoller,
  startSimulator,
  untilApplied,
  type Sim,
} from '../support/pipeline.js';
import { TestStack } from '../support/stack.js';

const SLUG = ENTRY.slug as MarketSlug;
type Row = { market_hash_name: string; phase: string; price: string; count: number };

describe('a new marketplace from one descriptor entry', () => {
  const stack = new TestStack();
  let sim: Sim;
  let api: TestApi;
  const get = async (url: string) =>
    (await api.app.inject({ url, headers: { 'x-api-key': api.keys.basic } })) as {
      statusCode: number;
      json: () => Record<string, unknown>;
    };

  beforeAll(async () => {
    sim = await startSimulator(stack, 60);
    const suffix = await projectTopics(stack);
    const { pool } = await stack.schema();
    await startMaterializer(stack, suffix, pool);
    const { poller } = await startPoller(stack, sim, SLUG, suffix);
    const { marker } = await poller.runOnce('LISTINGS');
    expect(marker.outcome).toBe('COMPLETE');
    await untilApplied(pool, marker.cycle_id);
    api = await startApi(stack, pool, { plans: ['basic', 'pro'] });
  });
  afterAll(() => stack.cleanup());

  it('joins the descriptor after the built-in marketplaces, unchanged by anything else', () => {
    expect(MARKETS.at(-1)?.slug).toBe('eu-c');
    expect(getMarket('eu-c').upstreamFormat).toBe('raw-listings');
    expect(sim.running.marketUrls[SLUG]).toMatch(/^http:/);
  });

  it('is polled, materialised and served: its list equals the simulator truth', async () => {
    const res = await get('/v1/prices/eu-c');
    expect(res.statusCode).toBe(200);
    const body = res.json() as { data: Row[]; source: string };
    expect(body.source).toBe('EU-C');
    const { records } = (await sim.control('GET', `/_sim/truth?market=${SLUG}&kind=listings`)) as {
      records: (Omit<Row, 'price'> & { price: string | null })[];
    };
    const truth = new Map(
      records.filter((r) => r.price !== null).map((r) => [`${r.market_hash_name}|${r.phase}`, `${r.price} ${r.count}`]),
    );
    expect(truth.size).toBeGreaterThan(10);
    expect(new Map(body.data.map((r) => [`${r.market_hash_name}|${r.phase}`, `${r.price} ${r.count}`]))).toEqual(truth);
  });

  it('appears on the catalogue, the search, history, status and in the document', async () => {
    const first = ((await get('/v1/prices/eu-c')).json() as { data: Row[] }).data[0] as Row;
    const latest = (await get('/v1/prices/latest?markets=eu-c')).json() as { items: Record<string, object> };
    expect(Object.values(latest.items).length).toBeGreaterThan(10);
    const search = (
      await get(`/v1/prices/search?market_hash_name=${encodeURIComponent(first.market_hash_name)}`)
    ).json() as {
      data: { market: string }[];
    };
    expect(search.data.map((r) => r.market)).toContain('eu-c');
    const history = await get(
      `/v1/prices/eu-c/history?market_hash_name=${encodeURIComponent(first.market_hash_name)}&phase=${encodeURIComponent(first.phase)}&resolution=hourly`,
    );
    expect(history.statusCode).toBe(200);
    expect((history.json() as { currency: string }).currency).toBe('EUR');
    const status = (await get('/v1/status')).json() as { markets: { market: string; kind: string }[] };
    expect(status.markets).toContainEqual(expect.objectContaining({ market: 'eu-c', kind: 'LISTINGS' }));
    const doc = (await api.app.inject({ url: '/openapi.json' })).json() as {
      paths: Record<string, { get: { parameters: { name: string; schema: { enum?: string[] } }[] } }>;
    };
    const market = doc.paths['/v1/prices/{market}']?.get.parameters.find((p) => p.name === 'market');
    expect(market?.schema.enum).toContain('eu-c');
    // Not on the endpoints of capabilities it lacks (buy orders), even for a plan that has them.
    const buyorders = await api.app.inject({ url: '/v1/prices/eu-c/buyorder', headers: { 'x-api-key': api.keys.pro } });
    expect(buyorders.statusCode).toBe(404);
  });
});

/**
 * Marketplace eu-a served in Skinport's documented format (issue 16), through the whole
 * pipeline: simulator → poller (format 'skinport', Brotli, Skinport's limits) → real Kafka →
 * materializer → PostgreSQL → the read API as a customer calls it. The customer's rows must be
 * the simulator's truth as Skinport shows it: /v1/items has no phases, so the truth's phase rows
 * are aggregated by name (lowest price, counts summed).
 */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { brotliDecompressSync } from 'node:zlib';
import { Dec } from '@skinprices/domain';
import type { PollCycleEvent } from '@skinprices/events';
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

/** Skinport's view of the truth: one entry per name, the lowest price of its phase rows, counts summed. */
function byName(rows: readonly TruthRow[]): Map<string, { price: string | null; count: number }> {
  const out = new Map<string, { price: string | null; count: number }>();
  for (const r of rows) {
    const cur = out.get(r.market_hash_name) ?? { price: null, count: 0 };
    if (r.price !== null && (cur.price === null || new Dec(r.price).lessThan(cur.price))) cur.price = r.price;
    cur.count += r.count;
    out.set(r.market_hash_name, cur);
  }
  return out;
}

/** A GET with exactly these headers (fetch would add its own Accept-Encoding). */
function rawGet(url: string, headers: Record<string, string>) {
  return new Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
    const req = httpRequest(url, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('eu-a in the Skinport format, simulator to customer', () => {
  const stack = new TestStack();
  let sim: Sim;
  let pool: Pool;
  let app: FastifyInstance;
  let key: string;
  let marker: PollCycleEvent;
  const encodings: unknown[] = [];

  beforeAll(async () => {
    sim = await startSimulator(stack, 60, undefined, { 'eu-a': 'skinport' });
    const suffix = await projectTopics(stack);
    ({ pool } = await stack.schema());
    await startMaterializer(stack, suffix, pool);
    const { poller, client } = await startPoller(stack, sim, 'eu-a', suffix, { format: 'skinport' });
    client.onHeaders((h) => encodings.push(h['content-encoding']));
    marker = (await poller.runOnce('LISTINGS')).marker;
    await untilApplied(pool, marker.cycle_id);

    const api = await startApi(stack, pool, { customer: 'skinport.example' });
    app = api.app;
    key = api.keys.basic;
  }, 120_000);
  afterAll(async () => {
    await stack.cleanup();
  });

  async function truth(): Promise<TruthRow[]> {
    const at = sim.clock.now();
    return ((await sim.control('GET', `/_sim/truth?market=eu-a&kind=listings&at=${at}`)) as { records: TruthRow[] })
      .records;
  }

  it('the poller fetched the whole catalogue in one Brotli answer and completed its cycle', () => {
    expect(marker).toMatchObject({ market: 'eu-a', kind: 'LISTINGS', outcome: 'COMPLETE', error: null });
    expect(encodings).toEqual(['br']);
  });

  it('GET /v1/prices/eu-a: prices and counts are the truth aggregated by name, links are Skinport item pages', async () => {
    const want = byName(await truth());
    // Phase rows were aggregated, so the comparison says something about that rule.
    expect(want.size).toBeLessThan((await truth()).length);
    expect(marker.items_seen).toBe(want.size);

    const res = await app.inject({ method: 'GET', url: '/v1/prices/eu-a', headers: { 'x-api-key': key } });
    expect(res.statusCode, res.body).toBe(200);
    const rows = res.json().data as Record<string, unknown>[];
    const got = rows.map(
      (r) => `${String(r.market_hash_name)}|${String(r.phase)}|${String(r.price)}|${String(r.count)}`,
    );
    // The API lists priced rows; an unlisted name (null, 0) is in the truth but not in the answer.
    const priced = [...want].filter(([, v]) => v.price !== null);
    expect(priced.length).toBeGreaterThan(20);
    expect(got.sort()).toEqual(priced.map(([name, v]) => `${name}||${v.price}|${v.count}`).sort());
    for (const r of rows) {
      expect(r.item_page_url).toMatch(/^https:\/\/skinport\.com\/item\/[a-z0-9-]+$/);
      expect(r.price).toMatch(/^\d+\.\d{2}$/);
    }
  });

  it('the simulator refuses a request without br as Skinport does (406), and answers Brotli with it', async () => {
    const url = `${sim.running.marketUrls['eu-a']}/v1/items?app_id=730&currency=EUR&tradable=0`;
    const refused = await rawGet(url, { accept: 'application/json' });
    expect(refused.status).toBe(406);
    const gzipOnly = await rawGet(url, { accept: 'application/json', 'accept-encoding': 'gzip, deflate' });
    expect(gzipOnly.status).toBe(406);
    const ok = await rawGet(url, { accept: 'application/json', 'accept-encoding': 'br' });
    expect(ok.status).toBe(200);
    expect(ok.headers['content-encoding']).toBe('br');
    const items = JSON.parse(brotliDecompressSync(ok.body).toString('utf8')) as { min_price: unknown }[];
    expect(items).toHaveLength(marker.items_seen);
    expect(items.some((i) => typeof i.min_price === 'number')).toBe(true);
  });
});

import type { IncomingHttpHeaders } from 'node:http';
import { describe, expect, it } from 'vitest';
import { generateCatalogue } from '../catalogue.js';
import { SimClock } from '../clock.js';
import { Extras } from '../extras.js';
import { formatMinor, MarketModel } from '../model.js';
import { truth } from '../truth.js';
import { acceptsBrotli, itemSlug, SKINPORT_CACHE_MS, skinportRoutes } from './skinport.js';
import type { SimContext, UpstreamResponse } from './types.js';

const SEED = 7;
/** On a 5-minute boundary, as the cached answers are. */
const START = Date.UTC(2026, 10, 20, 12);
const model = new MarketModel(generateCatalogue({ seed: SEED, size: 200 }), SEED);
const extras = new Extras(model);
/** 90 days of sales cost about 20 ms per catalogue row to generate: sales history uses a small one. */
const small = new MarketModel(generateCatalogue({ seed: SEED, size: 60 }), SEED);
const smallExtras = new Extras(small);
const BR = { 'accept-encoding': 'gzip, deflate, br' };

function call(
  path: '/v1/items' | '/v1/sales/history',
  query: Record<string, string> = {},
  headers: IncomingHttpHeaders = BR,
  at = START,
): UpstreamResponse {
  const sales = path === '/v1/sales/history';
  const ctx: SimContext = {
    model: sales ? small : model,
    extras: sales ? smallExtras : extras,
    clock: new SimClock(at, 0),
    market: 'eu-a',
  };
  const q = new URLSearchParams({ app_id: '730', currency: 'EUR', ...query });
  return skinportRoutes[path]!(ctx, q, { headers });
}

type Item = Record<string, unknown> & { market_hash_name: string; min_price: number | null; quantity: number };
const itemsAt = (at = START) => call('/v1/items', { tradable: '0' }, BR, at).body as Item[];

/** The truth's listing rows aggregated by name, as Skinport shows them: lowest price, counts summed. */
function truthByName(at: number): Map<string, { price: string | null; count: number }> {
  const out = new Map<string, { price: string | null; count: number; minor: number | null }>();
  for (const r of truth({ model, extras }, 'eu-a', 'listings', at, at) as {
    market_hash_name: string;
    price: string | null;
    count: number;
  }[]) {
    const minor = r.price === null ? null : Number(r.price.replace('.', ''));
    const cur = out.get(r.market_hash_name) ?? { price: null, count: 0, minor: null };
    if (minor !== null && (cur.minor === null || minor < cur.minor)) Object.assign(cur, { minor, price: r.price });
    cur.count += r.count;
    out.set(r.market_hash_name, cur);
  }
  return new Map([...out].map(([k, v]) => [k, { price: v.price, count: v.count }]));
}

/** A JSON number price back to our decimal string (the adapter's rule: String, then fixed 2). */
const dec = (n: number | null) => (n === null ? null : formatMinor(Number(String(n.toFixed(2)).replace('.', ''))));

describe('skinport format: Brotli only', () => {
  it.each([
    [{ 'accept-encoding': 'br' }, true],
    [{ 'accept-encoding': 'gzip, deflate, br' }, true],
    [{ 'accept-encoding': 'gzip;q=1.0, br;q=0.5' }, true],
    [{ 'accept-encoding': 'br;q=0' }, false],
    [{ 'accept-encoding': 'gzip, deflate' }, false],
    [{ 'accept-encoding': 'brotli' }, false],
    [{}, false],
  ])('%j accepts Brotli: %s', (headers, yes) => {
    expect(acceptsBrotli(headers)).toBe(yes);
  });

  it('answers 406 Not Acceptable without br, on both endpoints; with br the answer is to be Brotli-encoded', () => {
    for (const path of ['/v1/items', '/v1/sales/history'] as const) {
      expect(call(path, {}, { 'accept-encoding': 'gzip, deflate' }).status).toBe(406);
      expect(call(path, {}, {}).status).toBe(406);
      const ok = call(path);
      expect(ok).toMatchObject({ status: 200, encoding: 'br' });
      expect(Array.isArray(ok.body)).toBe(true);
    }
  });
});

describe('skinport format: GET /v1/items', () => {
  it('is the truth aggregated by name: lowest price of the phase rows, counts summed, none as null + 0', () => {
    const got = new Map(itemsAt().map((i) => [i.market_hash_name, { price: dec(i.min_price), count: i.quantity }]));
    const want = truthByName(START);
    expect(got.size).toBeGreaterThan(50);
    expect(got).toEqual(want);
    // The sample has Doppler names (several phase rows) and unlisted names, so both rules were used.
    const phases = truth({ model, extras }, 'eu-a', 'listings', START, START) as {
      market_hash_name: string;
      phase: string;
    }[];
    expect(phases.some((r) => r.phase !== '')).toBe(true);
    expect([...got.values()].some((v) => v.price === null && v.count === 0)).toBe(true);
  });

  it('has every documented field, prices as JSON numbers with at most 2 decimals, ordered min ≤ median, mean ≤ max', () => {
    const all = itemsAt();
    for (const i of all) {
      expect(Object.keys(i).sort()).toEqual(
        [
          'created_at',
          'currency',
          'item_page',
          'market_hash_name',
          'market_page',
          'max_price',
          'mean_price',
          'median_price',
          'min_price',
          'quantity',
          'suggested_price',
          'updated_at',
        ].sort(),
      );
      expect(i.currency).toBe('EUR');
      expect(i.item_page).toBe(`https://skinport.com/item/${itemSlug(i.market_hash_name)}`);
      expect(i.updated_at).toBe(START / 1000);
      expect(Number.isInteger(i.created_at)).toBe(true);
      for (const k of ['suggested_price', 'min_price', 'max_price', 'mean_price', 'median_price']) {
        const v = i[k];
        if (v === null) continue;
        expect(typeof v, k).toBe('number');
        expect(String(v), k).toMatch(/^\d+(\.\d{1,2})?$/);
      }
      if (i.quantity === 0) {
        expect([i.min_price, i.max_price, i.mean_price, i.median_price]).toEqual([null, null, null, null]);
      } else {
        const [min, max, mean, median] = [i.min_price, i.max_price, i.mean_price, i.median_price] as number[];
        expect(min).toBeLessThanOrEqual(median!);
        expect(min).toBeLessThanOrEqual(mean!);
        expect(median).toBeLessThanOrEqual(max!);
        expect(mean).toBeLessThanOrEqual(max!);
      }
    }
    // A JSON number on the wire: 12.5, never "12.50".
    const text = JSON.stringify(all);
    expect(text).not.toMatch(/"min_price":"/);
  });

  it('is cached for 5 minutes: a price change shows at the next 5-minute boundary, not before', () => {
    const target = itemsAt().find((i) => i.quantity > 0)!;
    const row = model.catalogue.find((c) => c.marketHashName === target.market_hash_name)!;
    try {
      model.setOverride('eu-a', row, { priceMinor: 1, count: 1, from: START + 60_000 });
      const later = START + SKINPORT_CACHE_MS - 1;
      expect(itemsAt(later).find((i) => i.market_hash_name === target.market_hash_name)?.min_price).toBe(
        target.min_price,
      );
      const next = itemsAt(START + SKINPORT_CACHE_MS).find((i) => i.market_hash_name === target.market_hash_name);
      expect(next?.min_price).toBe(0.01);
      expect(next?.updated_at).toBe((START + SKINPORT_CACHE_MS) / 1000);
    } finally {
      model.clearOverrides();
    }
  });

  it('refuses what it cannot serve: other currencies, unknown apps, a non-boolean tradable; other games are empty', () => {
    expect(call('/v1/items', { currency: 'USD' }).status).toBe(400);
    expect(call('/v1/items', { currency: 'XYZ' }).status).toBe(400);
    expect(call('/v1/items', { app_id: '12345' }).status).toBe(400);
    expect(call('/v1/items', { tradable: 'maybe' }).status).toBe(400);
    expect(call('/v1/items', { app_id: '570' })).toMatchObject({ status: 200, body: [] });
    // Without trade locks, tradable=1 filters nothing.
    expect(call('/v1/items', { tradable: '1' }).body).toEqual(itemsAt());
  });
});

describe('skinport format: GET /v1/sales/history', () => {
  type Window = { min: number | null; max: number | null; avg: number | null; median: number | null; volume: number };
  type Entry = Record<string, unknown> & { market_hash_name: string; version: string | null; last_90_days: Window };
  const history = (names?: string) =>
    call('/v1/sales/history', names === undefined ? {} : { market_hash_name: names }).body as Entry[];

  it('counts the sales of each window from the same sales the truth has, null prices where none sold', () => {
    const all = history();
    const sales = smallExtras.sales('eu-a', START - 90 * 86_400_000, START);
    expect(sales.length).toBeGreaterThan(0);
    for (const e of all) {
      const mine = sales.filter(
        (s) => s.item.marketHashName === e.market_hash_name && (s.item.phase || null) === e.version,
      );
      const w = e.last_90_days;
      expect(w.volume, e.market_hash_name).toBe(mine.length);
      if (mine.length === 0) expect(w).toEqual({ min: null, max: null, avg: null, median: null, volume: 0 });
      else {
        expect(dec(w.min)).toBe(formatMinor(Math.min(...mine.map((s) => s.priceMinor))));
        expect(dec(w.max)).toBe(formatMinor(Math.max(...mine.map((s) => s.priceMinor))));
      }
      const volumes = ['last_24_hours', 'last_7_days', 'last_30_days', 'last_90_days'].map(
        (k) => (e[k] as Window).volume,
      );
      expect(volumes).toEqual([...volumes].sort((a, b) => a - b));
    }
    expect(all.some((e) => e.last_90_days.volume > 0)).toBe(true);
    expect(all.some((e) => e.version !== null)).toBe(true);
  }, 30_000);

  it('answers only the names asked for (comma-delimited), one entry per phase with its version', () => {
    const doppler = small.catalogue.find((c) => c.phase !== '' && small.listed(c, 'eu-a'))!;
    const plain = small.catalogue.find((c) => c.phase === '' && small.listed(c, 'eu-a'))!;
    const got = history(`${doppler.marketHashName},${plain.marketHashName}`);
    const phases = small.catalogue
      .filter((c) => c.marketHashName === doppler.marketHashName && small.listed(c, 'eu-a'))
      .map((c) => c.phase);
    expect(phases.length).toBeGreaterThan(1);
    const pairs = (l: unknown[][]) => l.map((p) => JSON.stringify(p)).sort();
    expect(pairs(got.map((e) => [e.market_hash_name, e.version]))).toEqual(
      pairs([...phases.map((p) => [doppler.marketHashName, p]), [plain.marketHashName, null]]),
    );
    expect(history('No Such Item')).toEqual([]);
  }, 30_000);
});

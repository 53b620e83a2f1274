/**
 * The 24 h sales export from the real pipeline: the ZIP opens, holds sales.csv, stickers.csv and
 * keychains.csv with their headers, and sales.csv holds exactly the sales of the last 24 hours
 * (compared with the simulator's truth); the cache serves the same bytes until they are too old.
 */
import { unzipSync, strFromU8 } from 'fflate';
import type { MarketSlug } from '@skinprices/domain';
import { EXPORT_FILES, SalesExportCache, WINDOW_MS } from '@skinprices/exports';
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

const MARKETS: MarketSlug[] = ['cn-a', 'cn-b', 'usd-1'];

/** RFC 4180 CSV: quoted fields may hold commas, quotes ("") and newlines. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  const endField = () => {
    row.push(field);
    field = '';
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') endField();
    else if (c === '\n') {
      endField();
      rows.push(row);
      row = [];
    } else field += c;
  }
  if (field !== '' || row.length > 0) {
    endField();
    rows.push(row);
  }
  return rows;
}

interface SaleTruth {
  sale_id: string;
  price: string;
  sold_at: number;
  stickers: unknown[];
  charms: unknown[];
}

describe('sales export', () => {
  const stack = new TestStack();
  let sim: Sim;
  let pool: Pool;
  const lastStart = new Map<MarketSlug, number>();
  /** Where our first sales windows began (the 3 h look-back before the first cycle). */
  let firstFrom = Infinity;

  beforeAll(async () => {
    sim = await startSimulator(stack, 150);
    const suffix = await projectTopics(stack);
    ({ pool } = await stack.schema());
    await startMaterializer(stack, suffix, pool);
    const pollers = new Map<MarketSlug, Poller>();
    for (const m of MARKETS) pollers.set(m, (await startPoller(stack, sim, m, suffix)).poller);
    // 15 sales cycles two hours apart: with the first window's 3 h look-back, 31 h of sales.
    for (let i = 0; i < 15; i++) {
      for (const m of MARKETS) {
        const { marker } = await (pollers.get(m) as Poller).runOnce('SALES');
        expect(marker.outcome).toBe('COMPLETE');
        await untilApplied(pool, marker.cycle_id);
        lastStart.set(m, marker.started_at);
        if (i === 0) firstFrom = Math.min(firstFrom, Math.floor(marker.started_at / 1000) * 1000 - 3 * 3_600_000);
      }
      await sim.control('POST', '/_sim/clock', { advanceMs: 2 * 3_600_000 });
    }
  }, 180_000);
  afterAll(() => stack.cleanup());

  async function truth(from: number, to: number): Promise<SaleTruth[]> {
    const out: SaleTruth[] = [];
    for (const market of MARKETS) {
      const q = new URLSearchParams({ market, kind: 'sales', from: String(from), at: String(to) });
      out.push(...((await sim.control('GET', `/_sim/truth?${q}`)) as { records: SaleTruth[] }).records);
    }
    return out;
  }

  it('a ZIP of three CSVs; sales.csv holds exactly the last 24 hours of complete data', async () => {
    const cache = new SalesExportCache(pool, { maxAgeMs: 0 });
    const built = await cache.current();
    expect(built).not.toBeNull();
    const end = Math.floor(Math.min(...lastStart.values()) / 1000) * 1000;
    expect(built!.windowEnd.getTime()).toBe(end);
    expect(built!.windowStart.getTime()).toBe(end - WINDOW_MS);

    const files = unzipSync(new Uint8Array(built!.bytes));
    expect(Object.keys(files).sort()).toEqual([...EXPORT_FILES].sort());
    const [salesHead, ...sales] = parseCsv(strFromU8(files['sales.csv']!));
    expect(salesHead).toEqual([
      'market',
      'sale_id',
      'market_hash_name',
      'phase',
      'currency',
      'price',
      'sold_at',
      'float_value',
      'paint_index',
      'paint_seed',
      'sticker_count',
      'keychain_count',
    ]);
    const [stickerHead, ...stickers] = parseCsv(strFromU8(files['stickers.csv']!));
    expect(stickerHead).toEqual(['market', 'sale_id', 'slot', 'sticker_name', 'wear']);
    const [keychainHead, ...keychains] = parseCsv(strFromU8(files['keychains.csv']!));
    expect(keychainHead).toEqual(['market', 'sale_id', 'slot', 'keychain_name', 'pattern']);

    const want = await truth(end - WINDOW_MS, end);
    expect(want.length).toBeGreaterThan(500);
    expect(sales).toHaveLength(built!.sales);
    expect(sales.map((r) => `${r[1]} ${r[5]} ${r[6]}`).sort()).toEqual(
      want.map((s) => `${s.sale_id} ${s.price} ${new Date(s.sold_at).toISOString()}`).sort(),
    );
    // Every row is inside the window, and the window misses nothing just outside it by accident.
    for (const r of sales) {
      const t = Date.parse(r[6]!);
      expect(t >= end - WINDOW_MS && t < end).toBe(true);
    }
    expect(stickers).toHaveLength(want.reduce((n, s) => n + s.stickers.length, 0));
    expect(keychains).toHaveLength(want.reduce((n, s) => n + s.charms.length, 0));
    expect(keychains.length).toBeGreaterThan(0);
  });

  it('serves the cached export while it is fresh enough, and builds the daily one once', async () => {
    const cache = new SalesExportCache(pool, { maxAgeMs: 3_600_000 });
    const a = await cache.current();
    const b = await cache.current();
    expect(b!.builtAt).toEqual(a!.builtAt);
    const daily = await cache.ensureDaily();
    expect(daily!.windowEnd.getTime() % 86_400_000).toBe(0);
    const again = await cache.ensureDaily();
    expect(again!.builtAt).toEqual(daily!.builtAt);
    const files = unzipSync(new Uint8Array(daily!.bytes));
    const rows = parseCsv(strFromU8(files['sales.csv']!)).slice(1);
    // The platform's first day is covered only from the first sales window on.
    const from = Math.max(daily!.windowStart.getTime(), firstFrom);
    expect(rows).toHaveLength((await truth(from, daily!.windowEnd.getTime())).length);
  });
});

/**
 * What a list body's patch costs by how many rows it carries (list-segments.ts), on one marketplace's
 * full-size list of the simulator's rows: wall and CPU milliseconds (CPU includes libuv's
 * compression threads), medians of 7 patches of randomly chosen rows, and the body's size. The
 * figures behind the burst level of list-segments.ts (bench/bottlenecks.md, Freshness).
 *
 *   node --import tsx bench/list-patch.ts [--size 35000]
 */
import { parseArgs } from 'node:util';
import { generateCatalogue, formatMinor, MarketModel } from '@skinprices/simulator';
import { ROWS_PER_SEGMENT, SegmentedList, type ListRow, type RowChange } from '@skinprices/api';

const { values } = parseArgs({ options: { size: { type: 'string', default: '35000' } } });
const AT = Date.UTC(2026, 10, 20, 12);
const model = new MarketModel(generateCatalogue({ seed: 7, size: Number(values.size) }), 7);
const listed = model.listings('cn-a', AT).filter((l) => l.priceMinor !== null);
const decimal = (max: number) => (Math.random() * max).toFixed(2);

/** A row shaped as the API's list rows (readmodel.ts listingRow), with statistics that vary. */
function rowJson(i: number, at: number): string {
  const l = listed[i] as (typeof listed)[number];
  return JSON.stringify({
    id: l.item.index,
    market_hash_name: l.item.marketHashName,
    stattrak: 0,
    souvenir: 0,
    price: formatMinor((l.priceMinor as number) + Math.floor(Math.random() * 100)),
    avg_7d: decimal(100),
    avg_30d: decimal(100),
    avg_90d: decimal(100),
    change_24h: decimal(10),
    change_7d: decimal(10),
    change_30d: decimal(10),
    change_90d: null,
    count: l.count,
    phase: l.item.phase,
    updated_at: new Date(at).toISOString(),
    liquidity: decimal(100),
    templateId: l.item.index,
    is_outlier: false,
    confidence: '0.93',
  });
}

const rows: ListRow[] = listed.map((l, i) => ({
  key: `${l.item.marketHashName}|${l.item.phase}`,
  json: rowJson(i, AT),
}));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] as number;

/** Wall and CPU milliseconds of `f`. */
async function timed(f: () => Promise<unknown>): Promise<[number, number]> {
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  await f();
  const used = process.cpuUsage(cpu);
  return [performance.now() - t0, (used.user + used.system) / 1000];
}

const [buildWall, buildCpu] = await timed(() => SegmentedList.build(rows));
const list = await SegmentedList.build(rows);
console.log(
  `${rows.length} rows, build ${buildWall.toFixed(0)} ms wall, ${buildCpu.toFixed(0)} ms CPU, ${list.body.headGzip.length} bytes gzip`,
);
/** Medians of 7 patches, each made anew by `make` (its input is not timed): wall and CPU ms. */
async function patches(make: () => Parameters<SegmentedList['patch']>): Promise<string> {
  const wall: number[] = [];
  const cpu: number[] = [];
  for (let rep = 0; rep < 7; rep++) {
    const args = make();
    const [w, c] = await timed(async () => {
      if (!(await list.patch(...args))) throw new Error('patch refused');
    });
    wall.push(w);
    cpu.push(c);
  }
  return `${median(wall).toFixed(0)} ms wall, ${median(cpu).toFixed(0)} ms CPU`;
}
for (const n of [10, 100, 900, 3_600]) {
  const took = await patches(() => [
    Array.from({ length: n }, (): RowChange => {
      const i = Math.floor(Math.random() * rows.length);
      return { key: (rows[i] as ListRow).key, json: rowJson(i, Date.now()) };
    }),
  ]);
  console.log(`patch of ${n} rows: ${took}, body ${list.body.headGzip.length} bytes gzip`);
}
// A slice of liquidity scores (list-cache.ts FIELD_SEGMENTS): every row of `segments` segments
// gets a new score, as after a derive round that moved the whole catalogue's.
for (const segments of [4, 12, 24]) {
  const took = await patches(() => [
    [],
    rows.slice(0, segments * ROWS_PER_SEGMENT).map((r) => ({ key: r.key, fields: { liquidity: decimal(100) } })),
  ]);
  console.log(`scores of ${segments} segments: ${took}`);
}

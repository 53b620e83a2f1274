import { crc32, gunzipSync, inflateRawSync } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { inflateHead, tailOf } from './bodies.js';
import { SegmentedList, type ListRow, type RowChange } from './list-segments.js';

const TAIL = ',"requestor":"acme","plan":"pro","timestamp":"2026-01-01T00:00:00.000Z"}';

/** The body as a client decodes it: one gzip member, with its CRC and length checked by zlib. */
function served(list: SegmentedList): string {
  const text = gunzipSync(Buffer.concat([list.body.headGzip, tailOf(list.body, TAIL).gzip])).toString();
  expect(text.endsWith(TAIL)).toBe(true);
  return text.slice(0, -TAIL.length);
}

const expected = (rows: readonly ListRow[]) => `{"data":[${rows.map((r) => r.json).join(',')}]`;

const row = (i: number, price = `${i}.25`): ListRow => ({
  key: `item ${String(i).padStart(6, '0')}`,
  json: JSON.stringify({ market_hash_name: `item ${i} ★ Ünïcode`, price }),
});

describe('SegmentedList: a list body patched by segments', () => {
  it('builds the same JSON a whole serialisation gives, empty and across segment borders', async () => {
    for (const n of [0, 1, 2, 255, 256, 257, 1_000]) {
      const rows = Array.from({ length: n }, (_, i) => row(i));
      const list = await SegmentedList.build(rows);
      expect(served(list)).toBe(expected(rows));
      expect(list.body.headLength).toBe(Buffer.byteLength(expected(rows)));
      expect(list.body.headCrc).toBe(crc32(expected(rows)) >>> 0);
      // The head alone, inflated for clients without gzip.
      const plain: Buffer[] = [];
      for await (const p of inflateHead(list.body)) plain.push(p as Buffer);
      expect(Buffer.concat(plain).toString()).toBe(expected(rows));
    }
  });

  it('a patch gives the body a fresh build of the patched rows gives: changes, removals, new rows', async () => {
    let inserted = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 700 }),
        // [row number (even: held, odd: new), remove, cents]
        fc.array(fc.tuple(fc.nat({ max: 1_401 }), fc.boolean(), fc.nat({ max: 99 })), { maxLength: 40 }),
        fc.integer({ min: 2, max: 64 }),
        async (n, edits, perSegment) => {
          // The list holds the even rows 0, 2, …; keys sort as the numbers do (zero-padded).
          const held = Array.from({ length: n }, (_, i) => row(2 * i));
          const list = await SegmentedList.build(held, perSegment);
          const state = new Map(held.map((r) => [r.key, r.json]));
          const last = new Map<string, string | null>();
          for (const [at, remove, cents] of edits) {
            const i = at % (2 * n + 2);
            last.set(row(i).key, remove ? null : row(i, `${at}.${cents}`).json);
          }
          for (const [k, json] of last)
            if (json === null) state.delete(k);
            else state.set(k, json);
          const after = [...state].sort(([a], [b]) => (a < b ? -1 : 1)).map(([key, json]) => ({ key, json }));
          // Each listed change names its predecessor in the final order, as the read does.
          const changes: RowChange[] = [...last].map(([key, json]) => {
            if (json === null) return { key, json };
            const at = after.findIndex((r) => r.key === key);
            return { key, json, after: at === 0 ? null : (after[at - 1] as ListRow).key };
          });
          const ok = await list.patch(changes);
          if (!ok) {
            // Refused only when a segment would be left empty (or there was none to insert
            // into); then nothing changed.
            expect(served(list)).toBe(expected(held));
            return;
          }
          expect(served(list)).toBe(expected(after));
          if (changes.some((c) => c.json !== null && !held.some((h) => h.key === c.key))) inserted++;
          expect(list.size).toBe(after.length);
          expect(list.body.headCrc).toBe(crc32(expected(after)) >>> 0);
          // The content hash (the ETag's base) is the fresh build's, however the rows are split.
          expect(list.body.hash).toBe((await SegmentedList.build(after)).body.hash);
        },
      ),
      { numRuns: 200 },
    );
    // Most runs add rows and must place them, not refuse.
    expect(inserted).toBeGreaterThan(100);
    // 200 runs of builds and patches: ~4 s on an idle machine, more beside CI's other suites.
  }, 30_000);

  it('refuses a new row without a predecessor it holds (its place is the database’s order), changing nothing', async () => {
    const rows = Array.from({ length: 10 }, (_, i) => row(i));
    const list = await SegmentedList.build(rows, 4);
    const before = list.body;
    expect(await list.patch([{ key: rows[2]!.key, json: row(2, '1.00').json }, row(99)])).toBe(false);
    expect(await list.patch([{ ...row(99), after: 'not held' }])).toBe(false);
    expect(list.body).toBe(before);
    expect(served(list)).toBe(expected(rows));
    expect(await list.patch([{ ...row(99), after: rows[9]!.key }])).toBe(true);
    expect(served(list)).toBe(expected([...rows, row(99)]));
    // Removing what is not listed is already done.
    expect(await list.patch([{ key: 'absent', json: null }])).toBe(true);
  });

  it('changes the content hash (the ETag base) with the content, and recompresses only touched segments', async () => {
    const rows = Array.from({ length: 2_000 }, (_, i) => row(i));
    const list = await SegmentedList.build(rows);
    const before = list.body;
    expect(await list.patch([{ key: rows[1_500]!.key, json: row(1_500, '7.77').json }])).toBe(true);
    expect(list.body.hash).not.toBe(before.hash);
    // The compressed bytes before the touched segment are the same bytes.
    const same = before.headGzip.subarray(0, 2_000);
    expect(list.body.headGzip.subarray(0, 2_000).equals(same)).toBe(true);
    expect(inflateRawSync(list.body.headGzip.subarray(10), { finishFlush: 2 }).toString()).toContain('"7.77"');
  });

  it('recompresses a burst (a patch of many segments) faster, to the same content and content hash as a rebuild', async () => {
    const rows = Array.from({ length: 64 * 40 }, (_, i) => row(i));
    const list = await SegmentedList.build(rows, 64);
    // One row in each of the 40 segments: a burst.
    const changed = rows.map((r, i) => (i % 64 === 5 ? row(i, '9.99') : r));
    expect(await list.patch(changed.filter((_, i) => i % 64 === 5).map((r) => ({ key: r.key, json: r.json })))).toBe(
      true,
    );
    const rebuilt = await SegmentedList.build(changed, 64);
    expect(served(list)).toBe(expected(changed));
    // Same content, same ETag base, whichever way the body was made ...
    expect(list.body.hash).toBe(rebuilt.body.hash);
    expect(list.body.headLength).toBe(rebuilt.body.headLength);
    // ... but not the same bytes: the burst's segments were compressed at the burst's level.
    expect(list.body.headGzip.equals(rebuilt.body.headGzip)).toBe(false);
    // A patch of a few segments compresses as a build does: byte for byte the same body.
    const few = changed.map((r, i) => (i === 70 ? row(70, '1.11') : r));
    const again = await SegmentedList.build(changed, 64);
    expect(await again.patch([{ key: few[70]!.key, json: few[70]!.json }])).toBe(true);
    expect(again.body.headGzip.equals((await SegmentedList.build(few, 64)).body.headGzip)).toBe(true);
  });

  it('skips rows written again with the same content, and still applies the ones that changed', async () => {
    const rows = Array.from({ length: 2_000 }, (_, i) => row(i));
    const list = await SegmentedList.build(rows);
    const before = list.body;
    // Every row named, none changed (a liquidity row rewritten for what the list does not show):
    // the body is the same object, nothing recompressed.
    expect(await list.patch(rows.map((r) => ({ key: r.key, json: r.json })))).toBe(true);
    expect(list.body).toBe(before);
    expect(list.lastUnchanged).toBe(2_000);
    // Unchanged rows everywhere and one change: only its segment is new.
    const changed = rows.map((r, i) => (i === 1_500 ? row(1_500, '7.77') : r));
    expect(await list.patch(changed.map((r) => ({ key: r.key, json: r.json })))).toBe(true);
    expect(list.lastUnchanged).toBe(1_999);
    const text = inflateRawSync(list.body.headGzip.subarray(10), { finishFlush: 2 }).toString();
    expect(text).toBe(expected(changed));
    expect(list.body.headGzip.subarray(0, 2_000).equals(before.headGzip.subarray(0, 2_000))).toBe(true);
    // The digest follows the change: writing the old content back is a change again.
    expect(await list.patch([{ key: rows[1_500]!.key, json: rows[1_500]!.json }])).toBe(true);
    expect(inflateRawSync(list.body.headGzip.subarray(10), { finishFlush: 2 }).toString()).toBe(expected(rows));
    expect(list.body.hash).toBe(before.hash);
  });

  it('applies field changes after row changes: the bytes of rows read anew, whatever the mix', async () => {
    const scored = (i: number, price: string, liquidity: string | null): ListRow => ({
      key: row(i).key,
      json: JSON.stringify({ market_hash_name: `item ${i} ★ Ünïcode`, price, liquidity, count: i }),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 400 }),
        // Row edits: [row, remove, cents]; field edits: [row (beyond n: not held), score or null].
        fc.array(fc.tuple(fc.nat({ max: 399 }), fc.boolean(), fc.nat({ max: 99 })), { maxLength: 20 }),
        fc.array(fc.tuple(fc.nat({ max: 450 }), fc.option(fc.nat({ max: 9_999 }))), { maxLength: 60 }),
        async (n, edits, scores) => {
          const state = new Map<number, { price: string; liquidity: string | null } | null>();
          for (let i = 0; i < n; i++) state.set(i, { price: `${i}.25`, liquidity: i % 3 === 0 ? null : '1.00' });
          const held = [...state].map(([i, v]) => scored(i, v!.price, v!.liquidity));
          const list = await SegmentedList.build(held, 16);
          const changes: RowChange[] = [];
          for (const [at, remove, cents] of edits) {
            const i = at % n;
            const was = state.get(i);
            if (was === undefined || was === null) continue;
            state.set(i, remove ? null : { ...was, price: `${at}.${cents}` });
          }
          for (const [i, v] of state)
            if (v !== undefined) changes.push({ key: row(i).key, json: v && scored(i, v.price, v.liquidity).json });
          const fields = scores.map(([i, score]) => {
            const liquidity = score === null ? null : (score / 100).toFixed(2);
            const v = state.get(i);
            if (v) state.set(i, { ...v, liquidity });
            return { key: row(i).key, fields: { liquidity } };
          });
          const after = [...state]
            .filter((e): e is [number, { price: string; liquidity: string | null }] => e[1] !== null)
            .map(([i, v]) => scored(i, v.price, v.liquidity));
          // Refused only where a removal empties a segment (as for rows alone): then nothing changed.
          if (!(await list.patch(changes, fields))) {
            expect(served(list)).toBe(expected(held));
            return;
          }
          expect(served(list)).toBe(expected(after));
          expect(list.body.headCrc).toBe(crc32(expected(after)) >>> 0);
        },
      ),
      { numRuns: 150 },
    );
  }, 30_000);

  it('skips field changes that change nothing, recompressing nothing, and refuses a field the row lacks', async () => {
    const rows = Array.from({ length: 1_000 }, (_, i) => ({
      key: row(i).key,
      json: JSON.stringify({ price: `${i}.25`, liquidity: '5.00' }),
    }));
    const list = await SegmentedList.build(rows);
    const before = list.body;
    expect(
      await list.patch(
        [],
        rows.map((r) => ({ key: r.key, fields: { liquidity: '5.00' } })),
      ),
    ).toBe(true);
    expect(list.body).toBe(before);
    expect(list.lastUnchanged).toBe(1_000);
    // A field the rows do not have would be placed out of the shape's order: the caller rebuilds.
    expect(await list.patch([], [{ key: rows[3]!.key, fields: { volume: '1' } }])).toBe(false);
    expect(list.body).toBe(before);
    // One changed score: only its segment is recompressed.
    expect(await list.patch([], [{ key: rows[900]!.key, fields: { liquidity: '6.50' } }])).toBe(true);
    // (Short rows: the first three segments' compressed bytes are a few hundred.)
    expect(list.body.headGzip.subarray(0, 200).equals(before.headGzip.subarray(0, 200))).toBe(true);
    expect(list.body.headGzip.equals(before.headGzip)).toBe(false);
    expect(served(list)).toContain('{"price":"900.25","liquidity":"6.50"}');
  });
});

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CatalogueShard, combine, itemsJson } from './catalogue.js';

/** The reference: the same answer built as objects and serialised by JSON.stringify. */
function reference(shards: { market: string; entries: [string, unknown][] }[], only?: string[]) {
  // Maps, then Object.fromEntries: names such as "valueOf" or "__proto__" become own properties,
  // as JSON.parse makes them.
  const items = new Map<string, [string, unknown][]>();
  const maps = shards.map((s) => ({ market: s.market, map: new Map(s.entries) }));
  const keys = only ?? [...new Set(maps.flatMap((m) => [...m.map.keys()]))];
  for (const k of keys)
    for (const { market, map } of maps) if (map.has(k)) items.set(k, [...(items.get(k) ?? []), [market, map.get(k)]]);
  return Object.fromEntries([...items].map(([k, v]) => [k, Object.fromEntries(v)]));
}

describe('CatalogueShard, combine and itemsJson', () => {
  it('equals the object-built answer for any names (unicode, quotes), overlaps and selections', () => {
    const name = fc.string({ minLength: 1, maxLength: 12, unit: 'binary' });
    const entry = fc.record({ price: fc.constantFrom('0.01', '12.50', '★ 9999.99'), count: fc.nat() });
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.tuple(name, entry), { maxLength: 8 }), { minLength: 1, maxLength: 4 }),
        fc.option(fc.array(name, { maxLength: 6 }), { nil: undefined }),
        (perMarket, onlyRaw) => {
          const shards = perMarket.map((entries, i) => ({ market: `m-${i}`, entries }));
          const built = shards.map((s) => ({
            market: s.market,
            shard: CatalogueShard.from(s.entries.map(([k, v]) => [k, JSON.stringify(v)] as const)),
          }));
          const only = onlyRaw ? [...new Set(onlyRaw)] : undefined;
          const want = reference(shards, only);
          // Combined for every key and then picked, or combined for the selection only.
          expect(JSON.parse(itemsJson(combine(built), only).toString('utf8'))).toEqual(want);
          expect(JSON.parse(itemsJson(combine(built, only)).toString('utf8'))).toEqual(want);
        },
      ),
    );
  });

  it('hands out views of its bytes, not copies, and knows its size', () => {
    const shard = CatalogueShard.from([
      ['a', '{"price":"1.00"}'],
      ['Sticker | 北京 2025', '{"price":"2.00"}'],
    ]);
    expect(shard.size).toBe(2);
    expect(shard.get('Sticker | 北京 2025')?.toString()).toBe('{"price":"2.00"}');
    expect(shard.get('missing')).toBeUndefined();
    expect(shard.byteSize()).toBeGreaterThan(32);
  });
});

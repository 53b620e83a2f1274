import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Catalogue, CatalogueShard, itemsJson } from './catalogue.js';

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

/** A catalogue of `shards` in order, each spliced in as it would be when its marketplace changed. */
function catalogueOf(markets: string[], shards: { market: string; entries: [string, unknown][] }[]): Catalogue {
  let c = Catalogue.empty(markets);
  for (const s of shards)
    c = c.with(s.market, CatalogueShard.from(s.entries.map(([k, v]) => [k, JSON.stringify(v)] as const)));
  return c;
}

describe('Catalogue, CatalogueShard and itemsJson', () => {
  const name = fc.string({ minLength: 1, maxLength: 12, unit: 'binary' });
  const entry = fc.record({ price: fc.constantFrom('0.01', '12.50', '★ 9999.99'), count: fc.nat() });
  const perMarket = fc.array(fc.array(fc.tuple(name, entry), { maxLength: 8 }), { minLength: 1, maxLength: 4 });

  it('equals the object-built answer for any names (unicode, quotes), overlaps and selections', () => {
    fc.assert(
      fc.property(
        perMarket,
        fc.option(fc.array(name, { maxLength: 6 }), { nil: undefined }),
        fc.array(fc.nat(3), { maxLength: 4 }),
        (perMarketEntries, onlyRaw, pickRaw) => {
          const shards = perMarketEntries.map((entries, i) => ({ market: `m-${i}`, entries }));
          const markets = shards.map((s) => s.market);
          const catalogue = catalogueOf(markets, shards);
          const only = onlyRaw ? [...new Set(onlyRaw)] : undefined;
          expect(JSON.parse(itemsJson(catalogue, only).toString('utf8'))).toEqual(reference(shards, only));
          // A selection of marketplaces, in the order asked.
          const pick = [...new Set(pickRaw.filter((m) => m < markets.length))];
          const picked = pick.map((m) => shards[m] as (typeof shards)[number]);
          const text = itemsJson(catalogue, only, undefined, undefined, pick).toString('utf8');
          expect(JSON.parse(text)).toEqual(reference(picked, only));
          for (const member of Object.values(JSON.parse(text) as Record<string, object>))
            expect(Object.keys(member)).toEqual(pick.map((m) => markets[m]).filter((m) => m! in member));
        },
      ),
    );
  });

  it('splices one marketplace in: the same bytes as a catalogue built from scratch', () => {
    fc.assert(
      fc.property(perMarket, perMarket, fc.nat(3), (before, after, which) => {
        const markets = before.map((_, i) => `m-${i}`);
        const m = which % markets.length;
        const old = before.map((entries, i) => ({ market: `m-${i}`, entries }));
        const now = old.map((s, i) => (i === m ? { market: s.market, entries: after[0] ?? [] } : s));
        const spliced = catalogueOf(markets, old).with(
          `m-${m}`,
          CatalogueShard.from((after[0] ?? []).map(([k, v]) => [k, JSON.stringify(v)] as const)),
        );
        const scratch = catalogueOf(markets, now);
        expect(itemsJson(spliced).equals(itemsJson(scratch))).toBe(true);
        expect(JSON.parse(itemsJson(spliced).toString('utf8'))).toEqual(reference(now));
        // An item no marketplace lists any more is gone, not an empty member.
        expect(spliced.size).toBe(Object.keys(reference(now)).length);
      }),
    );
  });

  it('any sequence of splices holds what the last data of each marketplace says', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat(3), fc.array(fc.tuple(name, entry), { maxLength: 8 })), { maxLength: 12 }),
        (steps) => {
          const markets = ['m-0', 'm-1', 'm-2', 'm-3'];
          const now = markets.map((market) => ({ market, entries: [] as [string, unknown][] }));
          let c = Catalogue.empty(markets);
          for (const [m, entries] of steps) {
            now[m] = { market: `m-${m}`, entries };
            c = c.with(`m-${m}`, CatalogueShard.from(entries.map(([k, v]) => [k, JSON.stringify(v)] as const)));
            expect(itemsJson(c).equals(itemsJson(catalogueOf(markets, now)))).toBe(true);
            expect(
              itemsJson(c, undefined, undefined, undefined, [2, 0]).equals(
                itemsJson(catalogueOf(markets, now), undefined, undefined, undefined, [2, 0]),
              ),
            ).toBe(true);
          }
        },
      ),
    );
  });

  it('a marketplace spliced again with some values changed or dropped: the same bytes as from scratch', () => {
    fc.assert(
      fc.property(perMarket, fc.nat(3), fc.array(fc.constantFrom('keep', 'change', 'drop')), (before, which, edits) => {
        const markets = before.map((_, i) => `m-${i}`);
        const m = which % markets.length;
        const old = before.map((entries, i) => ({ market: `m-${i}`, entries }));
        const mine = [...new Map(old[m]?.entries ?? []).entries()];
        const next: [string, unknown][] = [];
        mine.forEach(([k, v], j) => {
          const edit = edits[j % Math.max(edits.length, 1)] ?? 'keep';
          if (edit === 'keep') next.push([k, v]);
          if (edit === 'change') next.push([k, { price: '77.77', was: v }]);
        });
        const now = old.map((s, i) => (i === m ? { market: s.market, entries: next } : s));
        const spliced = catalogueOf(markets, old).with(
          `m-${m}`,
          CatalogueShard.from(next.map(([k, v]) => [k, JSON.stringify(v)] as const)),
        );
        const scratch = catalogueOf(markets, now);
        expect(itemsJson(spliced).equals(itemsJson(scratch))).toBe(true);
        const pick = [m, (m + 1) % markets.length];
        expect(
          itemsJson(spliced, undefined, undefined, undefined, pick).equals(
            itemsJson(scratch, undefined, undefined, undefined, pick),
          ),
        ).toBe(true);
      }),
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

import { describe, expect, it } from 'vitest';
import { CatalogueShard, itemsJson } from './catalogue.js';
import { CatalogueCache } from './catalogue-cache.js';

const MARKETS = ['a', 'b', 'c'];

/** Three marketplaces whose data and versions a test moves; `reads` lists what was read, in order. */
function fixture(o: { minAgeMs?: number; derivedLagMs?: number } = {}) {
  const versions: Record<string, number> = { a: 1, b: 1, c: 1 };
  const prices: Record<string, string> = { a: '1.00', b: '2.00', c: '3.00' };
  let derived = 0;
  const reads: string[] = [];
  const gates: Record<string, Promise<void> | undefined> = {};
  const cache = new CatalogueCache(
    MARKETS,
    (ms) => ms.reduce((n, m) => n + (versions[m] as number), 0),
    async (m) => {
      reads.push(m);
      const price = prices[m] as string;
      await gates[m];
      return CatalogueShard.from([['item', JSON.stringify({ price })]]);
    },
    o.derivedLagMs === undefined ? undefined : { version: () => derived, maxLagMs: o.derivedLagMs },
    o.minAgeMs ?? 0,
  );
  const change = (m: string, price: string) => {
    prices[m] = price;
    versions[m] = (versions[m] as number) + 1;
  };
  const items = async (fresh: boolean, only?: number[]) =>
    JSON.parse(itemsJson(await cache.get(fresh, only)).toString()) as Record<string, Record<string, unknown>>;
  return { cache, reads, gates, change, items, moveDerived: () => derived++ };
}

describe('CatalogueCache', () => {
  it('reads each marketplace once, then again only the one whose version moved', async () => {
    const f = fixture();
    expect((await f.items(false)).item).toEqual({ a: { price: '1.00' }, b: { price: '2.00' }, c: { price: '3.00' } });
    expect(f.reads.sort()).toEqual(['a', 'b', 'c']);
    await f.cache.get(true);
    expect(f.reads).toHaveLength(3);
    f.change('b', '2.50');
    expect((await f.items(true, [0])).item?.b).toEqual({ price: '2.00' });
    expect(f.reads).toHaveLength(3);
    expect((await f.items(true, [1])).item?.b).toEqual({ price: '2.50' });
    expect(f.reads.slice(3)).toEqual(['b']);
  });

  it('a selection waits for its own marketplaces, not for a slow read of another', async () => {
    const f = fixture();
    await f.cache.get(true);
    let open!: () => void;
    f.gates.a = new Promise<void>((r) => (open = r));
    f.change('a', '1.10');
    f.change('c', '3.30');
    const all = f.cache.get(true);
    expect((await f.items(true, [2])).item?.c).toEqual({ price: '3.30' });
    open();
    expect(JSON.parse(itemsJson(await all).toString()).item.a).toEqual({ price: '1.10' });
  });

  it('fresh: a joined read that began before the version seen is followed by another', async () => {
    const f = fixture();
    await f.cache.get(true);
    f.change('a', '2.00');
    let open!: () => void;
    f.gates.a = new Promise<void>((r) => (open = r));
    await f.cache.get(false); // starts reading a at its second version, in the background
    f.change('a', '3.00');
    const fresh = f.items(true, [0]);
    f.gates.a = undefined;
    open();
    expect((await fresh).item?.a).toEqual({ price: '3.00' });
  });

  it('not fresh: serves what it holds while it reads again; fresh waits', async () => {
    const f = fixture({ minAgeMs: 60_000 });
    await f.cache.get(false);
    f.change('a', '9.00');
    expect((await f.items(false)).item?.a).toEqual({ price: '1.00' });
    expect(f.reads).toHaveLength(3);
    expect((await f.items(true)).item?.a).toEqual({ price: '9.00' });
  });

  it('derived values: every marketplace is read again once they moved past the allowed lag', async () => {
    const kept = fixture({ derivedLagMs: 60_000 });
    await kept.cache.get(true);
    kept.moveDerived();
    await kept.cache.get(true);
    expect(kept.reads).toHaveLength(3);
    const lagging = fixture({ derivedLagMs: 0 });
    await lagging.cache.get(true);
    lagging.moveDerived();
    await lagging.cache.get(true);
    expect(lagging.reads).toHaveLength(6);
  });

  it('a failed read fails the lookup that waits for it and is retried by the next', async () => {
    const f = fixture();
    f.gates.b = Promise.reject(new Error('database away'));
    await expect(f.cache.get(true)).rejects.toThrow('database away');
    f.gates.b = undefined;
    expect((await f.items(true)).item?.b).toEqual({ price: '2.00' });
  });
});

import { inflateRawSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { ListBodyCache, type PatchDetail } from './list-cache.js';
import { SharedFieldReads, type FieldRead, type ListSource } from './list-reads.js';
import type { ListRow, RowChange } from './list-segments.js';

/** A cached head as a client without gzip gets it (the gzip header skipped, the deflate data inflated). */
const text = (b: { headGzip: Buffer }) => inflateRawSync(b.headGzip.subarray(10), { finishFlush: 2 }).toString();

const expected = (rows: readonly ListRow[]) => `{"data":[${rows.map((r) => r.json).join(',')}]`;

const row = (i: number, price = `${i}.25`): ListRow => ({
  key: `item ${String(i).padStart(6, '0')}`,
  json: JSON.stringify({ market_hash_name: `item ${i} ★ Ünïcode`, price }),
});

describe('ListBodyCache: patch when the tags moved, rebuild when it must', () => {
  function fixture(minAgeMs = 0) {
    let rows = Array.from({ length: 600 }, (_, i) => row(i));
    let version = 0;
    let global = 0;
    let derived = 0;
    let snapshots = 0;
    const log: string[] = [];
    const observed: string[] = [];
    let pending: RowChange[] = [];
    /** Positions below this are no longer in the journal: a patch from one is answered undefined. */
    let prunedThrough = 0;
    const source: ListSource = {
      full: async () => {
        log.push('full');
        pending = [];
        return { position: String(++snapshots), rows };
      },
      since: async (s: string) => {
        log.push(`since ${s}`);
        if (Number(s) < prunedThrough) return undefined;
        const changes = pending;
        pending = [];
        return { position: String(++snapshots), changes };
      },
    };
    // As app.ts wires it: the derived values' version is part of every list's.
    const cache = new ListBodyCache(
      () => version + derived,
      () => global,
      minAgeMs,
      (name, how, seconds, n) => {
        expect(seconds).toBeGreaterThanOrEqual(0);
        observed.push(`${name} ${how} ${n}`);
      },
    );
    return {
      cache,
      source,
      log,
      observed,
      change(i: number, price: string | null) {
        const r = row(i, price ?? undefined);
        rows = price === null ? rows.filter((x) => x.key !== r.key) : rows.map((x) => (x.key === r.key ? r : x));
        pending.push({ key: r.key, json: price === null ? null : r.json });
        version++;
      },
      add(i: number) {
        rows = [...rows, row(i)];
        pending.push(row(i));
        version++;
      },
      bumpGlobal: () => global++,
      bumpDerived: () => derived++,
      /** Retention removed the journal up to the current position (or a replay started another). */
      prune: () => (prunedThrough = snapshots + 1),
      rows: () => rows,
    };
  }

  it('reads the list whole when the journal no longer reaches back to its position', async () => {
    const f = fixture();
    const get = () => f.cache.get('prices:x', f.source, true);
    await get();
    f.change(3, '9.99');
    expect(text(await get())).toBe(expected(f.rows()));
    f.prune();
    f.change(4, '8.88');
    expect(text(await get())).toBe(expected(f.rows()));
    f.change(5, '7.77');
    expect(text(await get())).toBe(expected(f.rows()));
    expect(f.log).toEqual(['full', 'since 1', 'since 2', 'full', 'since 3']);
    expect(f.observed).toEqual(['prices:x first 600', 'prices:x patch 1', 'prices:x behind 600', 'prices:x patch 1']);
    f.cache.stop();
  });

  it('serves, patches (derived values too), and rebuilds on a new row or an untagged change', async () => {
    const f = fixture();
    const get = () => f.cache.get('prices:x', f.source, true);
    expect(text(await get())).toBe(expected(f.rows()));
    f.change(3, '9.99');
    f.change(400, null);
    expect(text(await get())).toBe(expected(f.rows()));
    f.add(9_999);
    expect(text(await get())).toBe(expected(f.rows()));
    f.bumpGlobal();
    f.change(5, '1.11');
    expect(text(await get())).toBe(expected(f.rows()));
    f.bumpDerived();
    expect(text(await get())).toBe(expected(f.rows()));
    expect(text(await get())).toBe(expected(f.rows()));
    expect(f.log).toEqual(['full', 'since 1', 'since 2', 'full', 'full', 'since 5']);
    expect(f.cache.stats).toMatchObject({ hits: 1, patches: 2, rebuilds: 3 });
    // The row new to the list has no predecessor named (after undefined): that patch is refused.
    expect(f.observed).toEqual([
      'prices:x first 600',
      'prices:x patch 2',
      'prices:x refused 600',
      'prices:x reset 600',
      'prices:x patch 0',
    ]);
  });

  /**
   * A list of `size` rows whose prices and liquidity scores move apart: a price (with the row's
   * score as it is then) is read by the next patch; a score alone only by a read of the fields
   * changed since a position before it.
   */
  function scoresFixture(size: number, lagMs: number) {
    const prices = Array.from({ length: size }, (_, i) => `${i}.25`);
    const scores = Array.from({ length: size }, () => '1.00');
    const json = (i: number) =>
      JSON.stringify({ market_hash_name: `item ${i} ★ Ünïcode`, price: prices[i], liquidity: scores[i] });
    const rows = (): ListRow[] => prices.map((_, i) => ({ key: row(i).key, json: json(i) }));
    let tags = 0;
    let derived = 0;
    let snapshots = 0;
    const log: string[] = [];
    /** Rows whose price, and rows whose score, was written after each position. */
    const priced: { after: number; i: number }[] = [];
    const scored: { after: number; i: number }[] = [];
    const source: ListSource = {
      full: async () => {
        log.push('full');
        return { position: String(++snapshots), rows: rows() };
      },
      since: async (s) => {
        log.push(`since ${s}`);
        const changes = [...new Set(priced.filter((x) => x.after >= Number(s)).map((x) => x.i))].map((i) => ({
          key: row(i).key,
          json: json(i),
        }));
        return { position: String(++snapshots), changes };
      },
      fields: async (s) => {
        log.push(`fields ${s}`);
        const changes = [...new Set(scored.filter((x) => x.after >= Number(s)).map((x) => x.i))].map((i) => ({
          key: row(i).key,
          fields: { liquidity: scores[i] as string },
        }));
        return { position: String(++snapshots), changes };
      },
    };
    /** What each patch told the observer: where its time went (PatchDetail). */
    const details: PatchDetail[] = [];
    const cache = new ListBodyCache(
      () => tags + derived,
      () => 0,
      0,
      (_name, how, seconds, _rows, detail) => {
        if (how !== 'patch') return;
        expect(detail).toBeDefined();
        const d = detail as PatchDetail;
        // The parts are measured one after another inside the refresh: never more than it took.
        expect(d.readSeconds + d.fieldsSeconds + d.patchSeconds).toBeLessThanOrEqual(seconds + 1e-6);
        details.push(d);
      },
      { version: () => derived, lagMs },
    );
    return {
      cache,
      details,
      log,
      get: () => cache.get('prices:x', source, true),
      rows,
      /** Scores move (one derive transaction). */
      score(is: number[], value: string) {
        for (const i of is) {
          scores[i] = value;
          scored.push({ after: snapshots, i });
        }
        derived++;
      },
      /** A price moves (a tagged commit). */
      price(i: number, value: string) {
        prices[i] = value;
        priced.push({ after: snapshots, i });
        tags++;
      },
      /** Until the cache has made `n` patches (a refresh ahead of requests), at most 5 s. */
      async patches(n: number) {
        const t0 = Date.now();
        while (cache.stats.patches < n && Date.now() - t0 < 5_000) await new Promise((r) => setTimeout(r, 5));
        await new Promise((r) => setTimeout(r, 5)); // the cache stores what the patch returned
      },
    };
  }

  it('leaves liquidity scores for later, and reads them alone from the older position once due', async () => {
    const f = scoresFixture(600, 150);
    await f.get();
    // A score moves: read only once it is due. A price moves meanwhile: patched at once, the
    // score left for later.
    f.score([7], '7.77');
    f.price(9, '9.99');
    const body = text(await f.get());
    expect(body).toContain('"9.99"');
    expect(body).not.toContain('"7.77"');
    expect(f.log).toEqual(['full', 'since 1']);
    // Due 150 ms after the full read: refreshed then with no request and no notification, the
    // scores read on their own from the position they were last read at.
    const t0 = Date.now();
    await f.patches(2);
    expect(f.log).toEqual(['full', 'since 1', 'since 2', 'fields 1']);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(50);
    const now = text(await f.get());
    expect(now).toContain('"7.77"');
    expect(now).toBe(expected(f.rows()));
    // Nothing owed any more: no further refresh.
    await new Promise((r) => setTimeout(r, 250));
    expect(f.log).toHaveLength(4);
    f.cache.stop();
  });

  it('applies a round of scores a slice of segments per refresh; a row read meanwhile keeps its newer score', async () => {
    // 8,000 rows: 32 segments of 256, a round of every score in two slices (FIELD_SEGMENTS 24).
    // Due a second after a read: the next read of the fields falls after the checks below.
    const f = scoresFixture(8_000, 1_000);
    await f.get();
    await new Promise((r) => setTimeout(r, 1_050));
    const all = Array.from({ length: 8_000 }, (_, i) => i);
    f.score(all, '2.00');
    const first = text(await f.get());
    expect(f.log).toEqual(['full', 'since 1', 'fields 1']);
    // The first slice is in: 24 segments of rows carry the new score, the rest not yet.
    expect(first.split('"2.00"').length - 1).toBe(24 * 256);
    expect(f.cache.stats.patches).toBe(1);
    // The observer was told where the time went: the scores were read, then 24 segments patched.
    expect(f.details).toHaveLength(1);
    expect(f.details[0]).toMatchObject({ scoreSegments: 24 });
    expect(f.details[0]?.fieldsSeconds).toBeGreaterThan(0);
    expect(f.details[0]?.patchSeconds).toBeGreaterThan(0);
    // Row 7,000 (second slice) moves, price and score, after the round was read: the row read
    // next shows its newer score, and the round's older one must not be written over it.
    f.score([7_000], '3.00');
    f.price(7_000, '70.70');
    await f.patches(2);
    expect(f.log).toEqual(['full', 'since 1', 'fields 1', 'since 2']);
    const now = text(await f.get());
    expect(now).toContain('"price":"70.70","liquidity":"3.00"');
    expect(now).toBe(expected(f.rows()));
    expect(f.cache.stats).toMatchObject({ patches: 2, rebuilds: 1 });
    f.cache.stop();
  });

  it('a price change is patched at once while a round of scores is in slices, never behind the whole round', async () => {
    const f = scoresFixture(8_000, 0);
    await f.get();
    f.score(
      Array.from({ length: 8_000 }, (_, i) => i),
      '2.00',
    );
    await f.get();
    f.price(100, '55.55');
    // The next refresh carries the price and the second slice: one patch, not a round's worth.
    const body = text(await f.get());
    expect(body).toContain('"55.55"');
    expect(f.cache.stats.patches).toBe(2);
    await f.patches(2);
    expect(text(await f.get())).toBe(expected(f.rows()));
    f.cache.stop();
  });

  it('follows a change ahead of requests, at most every minAgeMs, only lists asked for', async () => {
    const f = fixture(100);
    const get = () => f.cache.get('prices:x', f.source);
    f.cache.changed(); // nothing asked for yet: nothing is built ahead
    await new Promise((r) => setTimeout(r, 20));
    expect(f.log).toEqual([]);
    const first = await get();
    f.change(3, '9.99');
    const t0 = Date.now();
    f.cache.changed();
    // Younger than minAgeMs: the patch waits for it, then runs with no request asking.
    await new Promise((r) => setTimeout(r, 30));
    expect(f.log).toEqual(['full']);
    while (f.cache.stats.patches < 1 && Date.now() - t0 < 5_000) await new Promise((r) => setTimeout(r, 5));
    expect(f.log).toEqual(['full', 'since 1']);
    await new Promise((r) => setTimeout(r, 5)); // the cache stores what the patch returned
    // The next request is answered with the patched body, from the cache.
    const hits = f.cache.stats.hits;
    const now = await get();
    expect(now.hash).not.toBe(first.hash);
    expect(text(now)).toBe(expected(f.rows()));
    expect(f.cache.stats).toMatchObject({ hits: hits + 1, ahead: 1, patches: 1 });
    f.cache.stop();
  });
});

describe('SharedFieldReads: one read of the fields for the lists due at once', () => {
  function reader() {
    const calls: string[] = [];
    let fail = false;
    let n = 0;
    const reads = new SharedFieldReads(async (position): Promise<FieldRead> => {
      calls.push(position);
      await new Promise((r) => setTimeout(r, 5));
      if (fail) throw new Error('read failed');
      n++;
      return { position: `e:${100 + n}`, changes: [{ key: `k${n}`, fields: { liquidity: `${n}.00` } }] };
    });
    return { reads, calls, failNext: (f: boolean) => (fail = f) };
  }

  it('answers every list whose rows were read before the read started, from a position not after theirs', async () => {
    const r = reader();
    const began = performance.now();
    // Six lists due on the same commit, their last reads at the same or a later position.
    const answers = await Promise.all(
      ['e:90', 'e:90', 'e:92', 'e:90', 'e:95', 'e:90'].map((s) => r.reads.since(s, began)),
    );
    expect(r.calls).toEqual(['e:90']);
    expect(new Set(answers).size).toBe(1);
    expect(r.reads.reads).toBe(1);
  });

  it('never answers with a read that started before the list read its rows, from a later position or another journal', async () => {
    const r = reader();
    const first = (await r.reads.since('e:90', performance.now())) as FieldRead;
    // Rows read after the read started: they, and the commits the list was told of, may be newer
    // than the read.
    const later = await r.reads.since(first.position, performance.now());
    expect(later).not.toBe(first);
    // A list whose last read is older than the one in flight (an earlier position), or of another
    // journal (a replay's): a read of its own.
    const began = performance.now();
    const [a, b, c] = await Promise.all([
      r.reads.since('e:200', began),
      r.reads.since('e:150', began),
      r.reads.since('f:300', began),
    ]);
    expect(new Set([a, b, c]).size).toBe(3);
    expect(r.calls).toEqual(['e:90', first.position, 'e:200', 'e:150', 'f:300']);
  });

  it("a list never takes a shared read older than its own rows: the row's newer score stays", async () => {
    // One read model, two lists (caches) sharing the reads; position n is `e:n`, and a write made
    // while the counter is n is seen by the reads from positions up to n.
    let snap = 0;
    const take = () => `e:${++snap}`;
    const xmin = (s: string) => Number(s.split(':')[1]);
    const prices = ['0.25', '1.25', '2.25'];
    const scores = ['1.00', '1.00', '1.00'];
    const priced: { after: number; i: number }[] = [];
    const scored: { after: number; i: number }[] = [];
    const json = (i: number) => JSON.stringify({ name: `item ${i}`, price: prices[i], liquidity: scores[i] });
    const since = (log: { after: number; i: number }[], s: string) => [
      ...new Set(log.filter((x) => x.after >= xmin(s)).map((x) => x.i)),
    ];
    const shared = new SharedFieldReads(async (s) => {
      const position = take();
      const changes = since(scored, s).map((i) => ({ key: row(i).key, fields: { liquidity: scores[i] as string } }));
      await new Promise((r) => setTimeout(r, 20));
      return { position, changes };
    });
    let gate: Promise<void> = Promise.resolve();
    const source = (gated: boolean): ListSource => ({
      full: async () => ({ position: take(), rows: prices.map((_, i) => ({ key: row(i).key, json: json(i) })) }),
      since: async (s) => {
        if (gated) await gate;
        const position = take();
        return { position, changes: since(priced, s).map((i) => ({ key: row(i).key, json: json(i) })) };
      },
      fields: (s, notBefore) => shared.since(s, notBefore),
    });
    let tags = 0;
    let derived = 0;
    const cache = () =>
      new ListBodyCache(
        () => tags + derived,
        () => 0,
        0,
        undefined,
        { version: () => derived, lagMs: 0 },
      );
    const [a, b] = [cache(), cache()];
    const tick = () => new Promise((r) => setTimeout(r, 5));
    await b.get('b', source(false), true);
    await a.get('a', source(true), true);
    // Item 0's score moves; list A starts its refresh and is slow to read its rows.
    scores[0] = '1.50';
    scored.push({ after: snap, i: 0 });
    derived++;
    let open = (): void => undefined;
    gate = new Promise<void>((r) => (open = r));
    const refreshA = a.get('a', source(true), true);
    await tick();
    // List B refreshes meanwhile: its score read (item 0 at 1.50) starts after A's refresh did.
    const refreshB = b.get('b', source(false), true);
    await tick();
    // Item 0's score and price move again before A reads its rows: A's row shows 2.00.
    scores[0] = '2.00';
    prices[0] = '9.99';
    scored.push({ after: snap, i: 0 });
    priced.push({ after: snap, i: 0 });
    derived++;
    tags++;
    open();
    await refreshB;
    expect(text(await refreshA)).toContain('{"name":"item 0","price":"9.99","liquidity":"2.00"}');
    a.stop();
    b.stop();
  });

  it('does not share a failed read: the next list reads again', async () => {
    const r = reader();
    r.failNext(true);
    const began = performance.now();
    const failed = r.reads.since('e:90', began);
    await expect(failed).rejects.toThrow('read failed');
    r.failNext(false);
    await expect(r.reads.since('e:90', began)).resolves.toMatchObject({ position: 'e:101' });
    expect(r.calls).toHaveLength(2);
  });
});

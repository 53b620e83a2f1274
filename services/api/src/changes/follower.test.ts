import { describe, expect, it } from 'vitest';
import { ChangeFollower, type ReadChanges } from './follower.js';
import { continues, formatPosition, parsePosition } from './position.js';

const silent = { warn: () => undefined, info: () => undefined };
const until = async (what: () => boolean, ms = 2_000) => {
  const t0 = Date.now();
  while (!what()) {
    if (Date.now() - t0 > ms) throw new Error('not within the deadline');
    await new Promise((r) => setTimeout(r, 2));
  }
};

describe('change positions', () => {
  it('round-trip as text, and continue only within the journal that still holds them', () => {
    const p = { epoch: 'a1b2', pos: 12_345_678_901_234n };
    expect(parsePosition(formatPosition(p))).toEqual(p);
    const state = { epoch: 'a1b2', prunedThrough: 100n, head: 200n };
    expect(continues({ epoch: 'a1b2', pos: 100n }, state)).toBe(true);
    expect(continues({ epoch: 'a1b2', pos: 99n }, state)).toBe(false);
    expect(continues({ epoch: 'other', pos: 150n }, state)).toBe(false);
  });
});

describe('ChangeFollower', () => {
  /** A journal read as the read model answers it: tags after `since`, by position. */
  function journal() {
    const entries: { pos: number; tag: string }[] = [];
    let epoch = 'e';
    let fail = false;
    const reads: (string | undefined)[] = [];
    const read: ReadChanges = async (since) => {
      reads.push(since);
      if (fail) throw new Error('PostgreSQL away');
      const head = entries.at(-1)?.pos ?? 0;
      const position = `${epoch}:${head}`;
      if (since === undefined || !since.startsWith(`${epoch}:`)) return { position };
      const from = Number(since.split(':')[1]);
      return { position, tags: [...new Set(entries.filter((e) => e.pos > from).map((e) => e.tag))] };
    };
    return {
      read,
      reads,
      commit: (...tags: string[]) => {
        for (const tag of tags) entries.push({ pos: (entries.at(-1)?.pos ?? 0) + 1, tag });
      },
      replay: () => (epoch = 'f'),
      failing: (f: boolean) => (fail = f),
    };
  }

  it('bumps everything once at its first read, then only the tags committed after its position', async () => {
    const j = journal();
    const bumps: (readonly string[] | undefined)[] = [];
    const f = new ChangeFollower(j.read, (tags) => bumps.push(tags), 10, silent);
    j.commit('listing:cn-a');
    f.start();
    await until(() => f.position === 'e:1');
    expect(bumps).toEqual([undefined]);
    j.commit('listing:cn-b', 'scores', 'listing:cn-b');
    await until(() => f.position === 'e:4');
    expect(bumps).toEqual([undefined, ['listing:cn-b', 'scores']]);
    await new Promise((r) => setTimeout(r, 40));
    // Nothing new: read again, nothing bumped.
    expect(bumps).toHaveLength(2);
    expect(j.reads.length).toBeGreaterThan(3);
    // A replay's new journal: everything again.
    j.replay();
    await until(() => f.position?.startsWith('f:') === true);
    expect(bumps.at(-1)).toBeUndefined();
    await f.stop();
    expect(f.state).toBe('stopped');
  });

  it('reads at once when woken, without waiting for its interval', async () => {
    const j = journal();
    const bumps: (readonly string[] | undefined)[] = [];
    const f = new ChangeFollower(j.read, (tags) => bumps.push(tags), 60_000, silent);
    f.start();
    await until(() => f.state === 'waiting');
    j.commit('buyorder:cn-a');
    const t0 = Date.now();
    f.wake();
    await until(() => bumps.length === 2);
    expect(Date.now() - t0).toBeLessThan(1_000);
    expect(bumps[1]).toEqual(['buyorder:cn-a']);
    await f.stop();
  });

  it('backs off while reads fail, keeps its position, and misses nothing committed meanwhile', async () => {
    const j = journal();
    const bumps: (readonly string[] | undefined)[] = [];
    const f = new ChangeFollower(j.read, (tags) => bumps.push(tags), 5, silent);
    f.start();
    await until(() => f.position === 'e:0');
    j.failing(true);
    await until(() => f.state === 'backing off');
    j.commit('listing:eu-a');
    j.failing(false);
    await until(() => f.position === 'e:1', 5_000);
    expect(bumps).toEqual([undefined, ['listing:eu-a']]);
    await f.stop();
  });
});

import { describe, expect, it } from 'vitest';
import { bodyDeps } from './app.js';
import { ReadModelVersion } from './version.js';

describe('read-model versions per marketplace and kind', () => {
  // Root cause guarded: one global version made every commit of any marketplace rebuild every
  // list body (33k rows: query, JSON, gzip) — the freshness bound of issue 12.
  it('a commit of one marketplace moves only the bodies that depend on it', () => {
    const v = new ReadModelVersion();
    const cnA = v.value(bodyDeps('prices:cn-a'));
    const cnB = v.value(bodyDeps('prices:cn-b'));
    const latest = v.value(bodyDeps('latest:cn-a,eu-a'));
    const all = v.value();
    v.bump(['listing:cn-b']);
    expect(v.value(bodyDeps('prices:cn-a'))).toBe(cnA);
    expect(v.value(bodyDeps('latest:cn-a,eu-a'))).toBe(latest);
    expect(v.value(bodyDeps('prices:cn-b'))).not.toBe(cnB);
    expect(v.value()).not.toBe(all);
    v.bump(['listing:eu-a']);
    expect(v.value(bodyDeps('latest:cn-a,eu-a'))).not.toBe(latest);
    v.stop();
  });

  it('untagged notifications and reconnections move everything', () => {
    const v = new ReadModelVersion();
    const names = ['prices:cn-a', 'buyorders:cn-b', 'store', 'float-ranged:*'];
    const before = names.map((n) => v.value(bodyDeps(n)));
    v.bump(undefined);
    const after = names.map((n) => v.value(bodyDeps(n)));
    after.forEach((a, i) => expect(a).not.toBe(before[i]));
    expect(v.resets()).toBe(1);
    v.stop();
  });

  it('the periodic fallback moves everything, but is not a reset (patched lists patch, not rebuild)', async () => {
    const v = new ReadModelVersion(20);
    const before = v.value(bodyDeps('prices:cn-a'));
    await new Promise((r) => setTimeout(r, 60));
    expect(v.value(bodyDeps('prices:cn-a'))).not.toBe(before);
    expect(v.resets()).toBe(0);
    v.stop();
  });

  // Derived values (statistics, liquidity, market cap) move with every applied marker: counted
  // apart, so caches can let them lag, while the rows a marker removed move their lists at once.
  it('derived work moves the derived count, and only the lists whose rows a marker removed', () => {
    const v = new ReadModelVersion();
    const cnA = v.value(bodyDeps('prices:cn-a'));
    const cnB = v.value(bodyDeps('prices:cn-b'));
    const all = v.value();
    const derived = v.derived();
    v.bump(['derived']);
    expect(v.derived()).toBe(derived + 1);
    expect([v.value(bodyDeps('prices:cn-a')), v.value(bodyDeps('prices:cn-b')), v.value()]).toEqual([cnA, cnB, all]);
    v.bump(['derived', 'listing:cn-b']);
    expect(v.derived()).toBe(derived + 2);
    expect(v.value(bodyDeps('prices:cn-a'))).toBe(cnA);
    expect(v.value(bodyDeps('prices:cn-b'))).not.toBe(cnB);
    expect(v.value()).not.toBe(all);
    // The recomputation's `scores` is counted apart too, and moves no tagged part.
    const scores = v.scores();
    const after = [v.value(bodyDeps('prices:cn-a')), v.value()];
    v.bump(['derived']);
    expect(v.scores()).toBe(scores);
    v.bump(['derived', 'scores']);
    expect(v.scores()).toBe(scores + 1);
    expect(v.derived()).toBe(derived + 4);
    expect([v.value(bodyDeps('prices:cn-a')), v.value()]).toEqual(after);
    v.stop();
  });

  it('names what each cached body is built from', () => {
    expect(bodyDeps('buyorders:cn-a')).toEqual(['buyorder:cn-a']);
    expect(bodyDeps('order-book:store')).toEqual(['listing:store', 'orderBook:store']);
    expect(bodyDeps('float-ranged:cn-a')).toEqual(['floatRanged:cn-a']);
    expect(bodyDeps('float-ranged:*')?.length).toBeGreaterThan(0);
    expect(bodyDeps('unknown')).toBeUndefined();
  });
});

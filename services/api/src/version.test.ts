import { describe, expect, it } from 'vitest';
import { bodyDeps } from './app.js';
import { parsePayload, ReadModelVersion } from './version.js';

describe('read-model versions per marketplace and kind', () => {
  it('parses the schema and the tags of a NOTIFY payload (untagged payloads stay valid)', () => {
    expect(parsePayload('readmodel')).toEqual({ schema: 'readmodel' });
    expect(parsePayload('readmodel\tlisting:cn-a,derived')).toEqual({
      schema: 'readmodel',
      tags: ['listing:cn-a', 'derived'],
    });
  });

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

  it('derived work, untagged notifications and reconnections move everything', () => {
    const v = new ReadModelVersion();
    for (const bump of [['derived'], undefined]) {
      const before = ['prices:cn-a', 'buyorders:cn-b', 'store', 'float-ranged:*'].map((n) => v.value(bodyDeps(n)));
      v.bump(bump);
      const after = ['prices:cn-a', 'buyorders:cn-b', 'store', 'float-ranged:*'].map((n) => v.value(bodyDeps(n)));
      after.forEach((a, i) => expect(a).not.toBe(before[i]));
    }
    v.stop();
  });

  it('names what each cached body is built from', () => {
    expect(bodyDeps('buyorders:cn-a')).toEqual(['buyorder:cn-a']);
    expect(bodyDeps('store')).toEqual(['listing:store', 'orderBook:store']);
    expect(bodyDeps('float-ranged:cn-a')).toEqual(['floatRanged:cn-a']);
    expect(bodyDeps('float-ranged:*')?.length).toBeGreaterThan(0);
    expect(bodyDeps('unknown')).toBeUndefined();
  });
});

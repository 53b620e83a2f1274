import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { exceedsDepth, fieldWithNul, MAX_JSON_DEPTH, parserError } from './edge.js';
import { FailedAuthLimiter } from './limits.js';

const nested = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;

describe('edge: request bodies', () => {
  // Root cause guarded: `markets` nested 20,000 arrays deep parsed fine and then overflowed the
  // stack in the handler's String(); depth is now refused before parsing.
  it('refuses nesting deeper than the limit, wherever it is, and nothing shallower', () => {
    expect(exceedsDepth(nested(20_000), MAX_JSON_DEPTH)).toBe(true);
    expect(exceedsDepth(`{"items":["a"],"markets":${nested(MAX_JSON_DEPTH)}}`, MAX_JSON_DEPTH)).toBe(true);
    expect(exceedsDepth(`{"items":["a"],"markets":${nested(MAX_JSON_DEPTH - 1)}}`, MAX_JSON_DEPTH)).toBe(false);
  });

  it('does not count brackets inside strings, escaped quotes included', () => {
    expect(exceedsDepth(JSON.stringify({ a: '['.repeat(100), b: '\\"[[[[' }), 3)).toBe(false);
  });

  it('agrees with the real depth of any JSON value', () => {
    const depth = (v: unknown): number =>
      v !== null && typeof v === 'object' ? 1 + Math.max(0, ...Object.values(v).map(depth)) : 0;
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), fc.integer({ min: 0, max: 8 }), (v, limit) => {
        expect(exceedsDepth(JSON.stringify(v), limit)).toBe(depth(v) > limit);
      }),
      { numRuns: 500 },
    );
  });
});

describe('edge: NUL bytes', () => {
  // Root cause guarded: a %00 in market_hash_name reached PostgreSQL, whose text type cannot hold
  // U+0000, and the answer was a 500.
  it('names the first field holding U+0000 in query, params or body', () => {
    expect(fieldWithNul({ market_hash_name: 'a\u0000b' }, '')).toBe('market_hash_name');
    expect(fieldWithNul({ phase: ['x', 'y\u0000'] }, '')).toBe('phase');
    expect(fieldWithNul({ items: ['ok', 'bad\u0000'], markets: 'cn-a' }, '')).toBe('items');
    expect(fieldWithNul({ a: { b: 'c\u0000' } }, '')).toBe('a.b');
    expect(fieldWithNul({ market_hash_name: 'AK-47 | Redline (Field-Tested)' }, '')).toBeUndefined();
    expect(fieldWithNul(undefined, '')).toBeUndefined();
  });
});

describe('edge: parser errors', () => {
  it('maps Node parser errors to our statuses', () => {
    const err = (code: string) => Object.assign(new Error(code), { code });
    expect(parserError(err('HPE_HEADER_OVERFLOW')).status).toBe(431);
    expect(parserError(err('HPE_INVALID_METHOD')).status).toBe(400);
    expect(parserError(err('ERR_HTTP_REQUEST_TIMEOUT')).status).toBe(408);
  });
});

describe('FailedAuthLimiter', () => {
  it('allows perMinute failures per address, then blocks that address until the minute ends', () => {
    const l = new FailedAuthLimiter(3);
    const t0 = 28_333_334 * 60_000 + 40_000; // 40 s into a minute
    for (let i = 0; i < 3; i++) {
      l.record('10.0.0.1', t0);
      expect(l.blockedFor('10.0.0.1', t0)).toBe(0);
    }
    l.record('10.0.0.1', t0);
    expect(l.blockedFor('10.0.0.1', t0)).toBe(20);
    expect(l.blockedFor('10.0.0.2', t0)).toBe(0);
    expect(l.blockedFor('10.0.0.1', t0 + 20_000)).toBe(0);
  });

  it('stays bounded under a flood of addresses', () => {
    const l = new FailedAuthLimiter(1, 100);
    for (let i = 0; i < 1_000; i++) l.record(`a${i}`, 0);
    expect((l as unknown as { counts: Map<string, unknown> }).counts.size).toBeLessThanOrEqual(100);
  });
});

import { describe, expect, it } from 'vitest';
import { noneMatch } from './send.js';

describe('noneMatch (If-None-Match)', () => {
  const tag = 'W/"abc.def"';

  it('matches the tag as sent, without its weak prefix, in a list, and *', () => {
    expect(noneMatch(tag, tag)).toBe(true);
    expect(noneMatch('"abc.def"', tag)).toBe(true);
    expect(noneMatch('W/"zzz", W/"abc.def"', tag)).toBe(true);
    expect(noneMatch(' * ', tag)).toBe(true);
  });

  it('does not match another tag, a prefix of it, or nothing', () => {
    expect(noneMatch(undefined, tag)).toBe(false);
    expect(noneMatch('W/"abc"', tag)).toBe(false);
    expect(noneMatch('W/"abc.def.x", "q"', tag)).toBe(false);
    expect(noneMatch('', tag)).toBe(false);
  });
});

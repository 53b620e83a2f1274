import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { copyField, copyLine } from './copy.js';

/** PostgreSQL's text-format decoding of one field, for the round-trip property. */
function decodeField(field: string): string | null {
  if (field === '\\N') return null;
  return field.replace(/\\(.)/g, (_, c: string) => ({ t: '\t', n: '\n', r: '\r', '\\': '\\' })[c] ?? c);
}

describe('COPY text format', () => {
  it('escapes the characters that would break a row', () => {
    expect(copyField('a\tb\nc\rd\\e')).toBe('a\\tb\\nc\\rd\\\\e');
    expect(copyField(null)).toBe('\\N');
    expect(copyField('\\N')).toBe('\\\\N');
    expect(copyField(true)).toBe('t');
    expect(copyField(12n)).toBe('12');
    expect(copyField(new Date(Date.UTC(2026, 0, 1)))).toBe('2026-01-01T00:00:00.000Z');
    expect(copyLine(['a', null, 3])).toBe('a\t\\N\t3\n');
  });

  it('refuses non-integer numbers: prices must come as decimal strings', () => {
    expect(() => copyField(1.5)).toThrow(/decimals as strings/);
  });

  it('round-trips any string (property)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => {
        const field = copyField(s);
        expect(field).not.toMatch(/[\t\n\r]/);
        expect(decodeField(field)).toBe(s);
      }),
    );
  });
});

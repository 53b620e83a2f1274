import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatTimestamp, parseTimestamp, startOfUtcDay, startOfUtcHour, utcDate } from './time.js';

describe('timestamps', () => {
  it('formats as YYYY-MM-DDTHH:mm:ss.sssZ', () => {
    expect(formatTimestamp(Date.UTC(2026, 10, 22, 4, 5, 6, 7))).toBe('2026-11-22T04:05:06.007Z');
  });
  it('round-trips any instant in range (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: Date.parse('9999-12-31T23:59:59.999Z') }), (ms) => {
        expect(parseTimestamp(formatTimestamp(ms))).toBe(ms);
      }),
    );
  });
  it.each(['2026-11-22', '2026-11-22T04:05:06Z', '2026-11-22T04:05:06.007+01:00', '2026-02-30T00:00:00.000Z'])(
    'refuses %j',
    (s) => {
      expect(() => parseTimestamp(s)).toThrow();
    },
  );
  it('refuses instants the format cannot show', () => {
    expect(() => formatTimestamp(Date.parse('+010000-01-01T00:00:00Z'))).toThrow();
    expect(() => formatTimestamp(Number.NaN)).toThrow();
  });
  it('truncates to UTC hour and day', () => {
    const t = Date.UTC(2026, 0, 2, 13, 45, 1);
    expect(startOfUtcHour(t)).toBe(Date.UTC(2026, 0, 2, 13));
    expect(startOfUtcDay(t)).toBe(Date.UTC(2026, 0, 2));
    expect(utcDate(t)).toBe('2026-01-02');
  });
});

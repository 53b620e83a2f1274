/**
 * Markers that cannot lie, the consumer's half. Root cause (issue 12): during a broker outage
 * pollers sent COMPLETE markers with empty end_offsets, and the materializer read an empty list
 * as "already consumed": for a FULL cycle it would have nulled every row whose record was still
 * in flight, and published phantom removals.
 */
import { describe, expect, it } from 'vitest';
import { completeRemoves, hourRuns, vouchedOutcome, type MarkerClaims } from './markers.js';

const full: MarkerClaims = {
  kind: 'LISTINGS',
  mode: 'FULL',
  outcome: 'COMPLETE',
  items_seen: 35_012,
  events_emitted: 35_012,
  end_offsets_count: 6,
};

describe('vouchedOutcome', () => {
  it('a complete cycle with its end offsets is applied as COMPLETE', () => {
    expect(vouchedOutcome(full)).toEqual({ outcome: 'COMPLETE' });
  });

  it('a COMPLETE marker without end offsets for a cycle that emitted records is applied as PARTIAL', () => {
    for (const kind of ['LISTINGS', 'BUYORDERS', 'FLOAT_RANGED', 'SALES'])
      expect(vouchedOutcome({ ...full, kind, end_offsets_count: 0 })).toMatchObject({
        outcome: 'PARTIAL',
        reason: expect.stringContaining('no end offsets for a cycle that emitted 35012 records'),
      });
    expect(vouchedOutcome({ ...full, mode: 'DELTA', events_emitted: 3, end_offsets_count: 0 }).outcome).toBe('PARTIAL');
  });

  it('a cycle that emitted nothing needs no end offsets (the outage markers: DELTA, no changes)', () => {
    expect(vouchedOutcome({ ...full, mode: 'DELTA', events_emitted: 0, end_offsets_count: 0 })).toEqual({
      outcome: 'COMPLETE',
    });
  });

  it('a cycle whose COMPLETE removes what it did not see must have seen something', () => {
    const empty = { ...full, items_seen: 0, events_emitted: 0 };
    for (const kind of ['LISTINGS', 'BUYORDERS', 'FLOAT_RANGED', 'FLOAT_BUYORDERS', 'ORDER_BOOK'])
      expect(vouchedOutcome({ ...empty, kind })).toMatchObject({
        outcome: 'PARTIAL',
        reason: expect.stringContaining('saw no items'),
      });
    // DELTA cycles and happenings remove nothing: a quiet window is COMPLETE.
    expect(vouchedOutcome({ ...empty, mode: 'DELTA' }).outcome).toBe('COMPLETE');
    expect(vouchedOutcome({ ...empty, kind: 'SALES' }).outcome).toBe('COMPLETE');
    expect(vouchedOutcome({ ...empty, kind: 'HISTORY' }).outcome).toBe('COMPLETE');
  });

  it('PARTIAL and FAILED stay as they are', () => {
    expect(vouchedOutcome({ ...full, outcome: 'PARTIAL', end_offsets_count: 0 })).toEqual({ outcome: 'PARTIAL' });
    expect(vouchedOutcome({ ...full, outcome: 'FAILED', items_seen: 0 })).toEqual({ outcome: 'FAILED' });
  });
});

describe('completeRemoves', () => {
  it('FULL cycles of every delta kind', () => {
    expect(completeRemoves({ kind: 'LISTINGS', mode: 'FULL' })).toBe(true);
    expect(completeRemoves({ kind: 'LISTINGS', mode: 'DELTA' })).toBe(false);
    expect(completeRemoves({ kind: 'BUYORDERS', mode: 'FULL' })).toBe(true);
    expect(completeRemoves({ kind: 'ORDER_BOOK', mode: 'FULL' })).toBe(true);
    expect(completeRemoves({ kind: 'SALES', mode: 'FULL' })).toBe(false);
  });
});

describe('hourRuns', () => {
  const H = 3_600_000;
  const t = (h: number, m = 0) => Date.UTC(2026, 10, 20, h, m);
  it('computes each hour once when cycles cover the same hours', () => {
    const spans = [
      { from: t(12, 5), to: t(12, 55) },
      { from: t(12, 10), to: t(13, 2) },
      { from: t(12, 0), to: t(12, 30) },
    ];
    expect(hourRuns(spans)).toEqual([{ from: t(12), to: t(13) }]);
  });
  it('keeps hours apart that no cycle joins (a replay applying markers of distant hours together)', () => {
    const spans = [
      { from: t(1, 30), to: t(2, 10) },
      { from: t(9, 0), to: t(9, 0) },
      { from: t(3, 0), to: t(3, 59) },
    ];
    expect(hourRuns(spans)).toEqual([
      { from: t(1), to: t(3) },
      { from: t(9), to: t(9) },
    ]);
  });
  it('a span ending exactly on the hour includes that hour (the market cap covers it)', () => {
    expect(hourRuns([{ from: t(4, 50), to: t(5) }])).toEqual([{ from: t(4), to: t(5) }]);
    expect(hourRuns([])).toEqual([]);
    expect(hourRuns([{ from: t(0), to: t(0) + 3 * H - 1 }])).toEqual([{ from: t(0), to: t(2) }]);
  });
});

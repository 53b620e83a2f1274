/**
 * Markers that cannot lie, the producer's half. Root cause (issue 12): when fetching the data
 * topic's end offsets failed (broker away), the poller logged a warning and sent its marker
 * anyway — COMPLETE, with end_offsets [] — which a consumer reads as "nothing to wait for".
 */
import { describe, expect, it } from 'vitest';
import { cycleOutcome, endOffsetsFrom, removalsAllowed, type CycleFacts } from './cycle-end.js';

const fetched = [
  { partition: 0, high: '120' },
  { partition: 1, high: '0' },
  { partition: 2, high: '7' },
];

describe('endOffsetsFrom', () => {
  it('names the last record of every non-empty partition, not only those the cycle wrote to', () => {
    expect(endOffsetsFrom(fetched, new Map([[0, 100n]]))).toEqual({
      ok: true,
      offsets: [
        { partition: 0, offset: 119 },
        { partition: 2, offset: 6 },
      ],
    });
  });

  it('an answer naming no partition is no answer', () => {
    expect(endOffsetsFrom([], new Map())).toMatchObject({ ok: false, reason: 'Kafka reported no partitions' });
  });

  it('refuses an end that does not cover what the cycle wrote (stale metadata), or a missing partition', () => {
    expect(endOffsetsFrom(fetched, new Map([[2, 7n]]))).toMatchObject({
      ok: false,
      reason: 'partition 2 ends at 7, before the record the cycle wrote at 7',
    });
    expect(endOffsetsFrom(fetched, new Map([[5, 0n]]))).toMatchObject({
      ok: false,
      reason: 'no end offset for partition 5',
    });
  });

  it('a cycle that wrote nothing still names the topic ends (earlier cycles may be in flight)', () => {
    expect(endOffsetsFrom(fetched, new Map()).ok).toBe(true);
    expect(endOffsetsFrom([{ partition: 0, high: '0' }], new Map())).toEqual({ ok: true, offsets: [] });
  });
});

describe('cycleOutcome', () => {
  const clean: CycleFacts = { error: null, seen: 10, rejected: 0, emptied: false, endOffsets: null };

  it('COMPLETE only when clean and the end offsets are known', () => {
    expect(cycleOutcome(clean)).toEqual({ outcome: 'COMPLETE', error: null });
  });

  it('a cycle whose end offsets could not be fetched is PARTIAL, saying why', () => {
    expect(cycleOutcome({ ...clean, endOffsets: 'fetching them failed: broker away' })).toEqual({
      outcome: 'PARTIAL',
      error: 'end offsets of the data topic unknown (fetching them failed: broker away); removals not vouched for',
    });
  });

  it('failures and refusals keep their own outcome and message', () => {
    expect(cycleOutcome({ ...clean, error: 'upstream_timeout: x', seen: 0, endOffsets: 'y' })).toEqual({
      outcome: 'FAILED',
      error: 'upstream_timeout: x',
    });
    expect(cycleOutcome({ ...clean, error: 'kafka_unavailable: x' }).outcome).toBe('PARTIAL');
    expect(cycleOutcome({ ...clean, rejected: 2 })).toEqual({ outcome: 'PARTIAL', error: '2 upstream rows refused' });
  });

  it('an upstream that suddenly answers nothing is PARTIAL and sends no removals', () => {
    const emptied = { ...clean, seen: 0, emptied: true };
    expect(cycleOutcome(emptied).outcome).toBe('PARTIAL');
    expect(removalsAllowed(emptied)).toBe(false);
    expect(removalsAllowed(clean)).toBe(true);
    expect(removalsAllowed({ ...clean, rejected: 1 })).toBe(false);
    expect(removalsAllowed({ ...clean, error: 'x' })).toBe(false);
  });
});

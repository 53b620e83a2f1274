/**
 * Stored offsets that cannot lie. Root cause (issue 12): offsets in PostgreSQL did not know which
 * Kafka cluster they counted records of; against a new cluster every record below them was
 * dropped as "already applied", with lag 0 and nothing logged.
 */
import { describe, expect, it } from 'vitest';
import { AppError } from '@skinprices/domain';
import {
  describeMismatch,
  isOffsetsMismatch,
  offsetMismatches,
  offsetsMismatchError,
  storedOffsetMismatch,
  type StoredOffset,
} from './offsets.js';

const row = (over: Partial<StoredOffset> = {}): StoredOffset => ({
  topic: 'listings.v1',
  partition: 0,
  nextOffset: 100n,
  clusterId: 'A',
  ...over,
});
const ends = new Map([
  [
    'listings.v1',
    new Map([
      [0, 100n],
      [1, 5n],
      [2, 0n],
    ]),
  ],
  ['sales.v1', new Map([[0, 7n]])],
]);

describe('storedOffsetMismatch', () => {
  it('a row bound to another cluster is refused whatever its offset', () => {
    expect(storedOffsetMismatch(row({ nextOffset: 0n }), 'B', 10n)).toEqual({
      reason: 'cluster',
      topic: 'listings.v1',
      partition: 0,
      nextOffset: 0n,
      stored: 'A',
      actual: 'B',
    });
  });

  it('next_offset equal to the end is caught up; one past it never existed in this log', () => {
    expect(storedOffsetMismatch(row(), 'A', 100n)).toBeUndefined();
    expect(storedOffsetMismatch(row({ nextOffset: 101n }), 'A', 100n)).toMatchObject({
      reason: 'beyond_end',
      end: 100n,
    });
  });

  it('a row from before migration 0004 (no cluster id) is adoptable, but its offset is still checked', () => {
    expect(storedOffsetMismatch(row({ clusterId: null }), 'B', 100n)).toBeUndefined();
    expect(storedOffsetMismatch(row({ clusterId: null, nextOffset: 8_091n }), 'B', 0n)).toMatchObject({
      reason: 'beyond_end',
    });
  });

  it('without a measured end only the cluster is compared', () => {
    expect(storedOffsetMismatch(row({ nextOffset: 10n ** 12n }), 'A', undefined)).toBeUndefined();
  });
});

describe('offsetMismatches', () => {
  it('names every row that does not fit: other cluster, past the end, topic or partition gone', () => {
    const rows = [
      row(),
      row({ partition: 1, nextOffset: 6n }),
      row({ partition: 2, nextOffset: 0n, clusterId: null }),
      row({ partition: 3, nextOffset: 1n }),
      row({ topic: 'sales.v1', clusterId: 'Z', nextOffset: 1n }),
      row({ topic: 'gone.v1', nextOffset: 1n }),
    ];
    expect(offsetMismatches(rows, 'A', ends).map((m) => [m.topic, m.partition, m.reason])).toEqual([
      ['listings.v1', 1, 'beyond_end'],
      ['listings.v1', 3, 'no_partition'],
      ['sales.v1', 0, 'cluster'],
      ['gone.v1', 0, 'no_topic'],
    ]);
  });

  it('nothing stored, nothing wrong', () => {
    expect(offsetMismatches([], 'A', new Map())).toEqual([]);
  });
});

describe('offsetsMismatchError', () => {
  it('is a non-retryable AppError naming topic, partition, stored and actual, and how to reset', () => {
    const err = offsetsMismatchError('materializer', [
      { reason: 'cluster', topic: 'listings.v1', partition: 4, nextOffset: 8_091n, stored: 'old', actual: 'new' },
      { reason: 'beyond_end', topic: 'sales.v1', partition: 0, nextOffset: 90n, end: 3n },
    ]);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: 'offsets_mismatch', retryable: false });
    expect(isOffsetsMismatch(err)).toBe(true);
    expect(err.message).toContain('listings.v1[4] stored next_offset 8091 counts records of Kafka cluster old');
    expect(err.message).toContain('connected to cluster new');
    expect(err.message).toContain("sales.v1[0] stored next_offset 90 is past the partition's end offset 3");
    expect(err.message).toContain('make replay');
    expect(err.message).toContain('make reset-offsets');
    // Details go to JSON logs: no bigint left in them.
    expect(() => JSON.stringify(err.details)).not.toThrow();
    expect(err.details).toMatchObject({ groupId: 'materializer', mismatches: [{ nextOffset: '8091' }, { end: '3' }] });
  });

  it('lists five rows and counts the rest', () => {
    const many = Array.from({ length: 8 }, (_, i) => ({
      reason: 'no_topic' as const,
      topic: `t${i}`,
      partition: 0,
      nextOffset: 1n,
    }));
    expect(offsetsMismatchError('g', many).message).toContain('and 3 more');
    expect(describeMismatch(many[0]!)).toBe('t0[0] stored next_offset 1: the topic does not exist in this cluster');
  });
});

/** Lag as the heartbeat reports it: only assigned partitions, against PostgreSQL's stored offsets. */
import { describe, expect, it } from 'vitest';
import { measureLag } from './heartbeat.js';

const ends = new Map([
  ['listings.v1:0', { low: 0n, high: 100n }],
  ['listings.v1:1', { low: 0n, high: 50n }],
  ['listings.v1:2', { low: 40n, high: 60n }],
  ['sales.v1:0', { low: 0n, high: 7n }],
]);

describe('measureLag', () => {
  it('sums end − stored next offset over the assigned partitions only', () => {
    const stored = new Map([
      ['listings.v1:0', 90n],
      ['listings.v1:1', 50n],
      ['sales.v1:0', 0n],
    ]);
    const { total, partitions } = measureLag({ 'listings.v1': [1, 0], 'sales.v1': [0] }, ends, stored);
    expect(total).toBe(17n);
    expect(partitions).toEqual([
      { topic: 'listings.v1', partition: 0, end: 100, next: 90, lag: 10 },
      { topic: 'listings.v1', partition: 1, end: 50, next: 50, lag: 0 },
      { topic: 'sales.v1', partition: 0, end: 7, next: 0, lag: 7 },
    ]);
  });

  it('a partition never applied counts from its log start; retention caps what is behind', () => {
    const stored = new Map([['listings.v1:2', 10n]]);
    expect(measureLag({ 'listings.v1': [2] }, ends, stored).partitions).toEqual([
      { topic: 'listings.v1', partition: 2, end: 60, next: 40, lag: 20 },
    ]);
    expect(measureLag({ 'listings.v1': [2] }, ends, new Map()).total).toBe(20n);
  });

  it('a stored offset beyond the end (another cluster) is no negative lag', () => {
    expect(measureLag({ 'sales.v1': [0] }, ends, new Map([['sales.v1:0', 500n]])).total).toBe(0n);
  });

  it('no assignment, or partitions Kafka gave no offsets for, add nothing', () => {
    expect(measureLag({}, ends, new Map())).toEqual({ total: 0n, partitions: [] });
    expect(measureLag({ 'gone.v1': [0] }, ends, new Map())).toEqual({ total: 0n, partitions: [] });
  });
});

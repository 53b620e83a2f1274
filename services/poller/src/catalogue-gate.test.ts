import type { PollCycleEvent } from '@skinprices/events';
import { describe, expect, it } from 'vitest';
import { initialGate, nextGate, type GateEvent, type GateState } from './catalogue-gate.js';

const T = 'listings.v1';
const marker = (
  market: string,
  kind: PollCycleEvent['kind'],
  ends: [partition: number, offset: number][] = [],
): GateEvent => ({
  kind: 'marker',
  marker: { market, kind, data_topic: T, end_offsets: ends.map(([partition, offset]) => ({ partition, offset })) },
});
const committed = (offsets: [partition: number, next: number][]): GateEvent => ({
  kind: 'committed',
  offsets: new Map(offsets.map(([p, o]) => [`${T}:${p}`, BigInt(o)])),
});

describe('catalogue gate transitions', () => {
  it("waits for every marketplace's LISTINGS marker, then for the group's commits past their end offsets", () => {
    let s: GateState = initialGate(['cn-a', 'cn-b', 'eu-a']);
    s = nextGate(s, committed([[0, 1_000]])); // commits before the markers change nothing
    s = nextGate(
      s,
      marker('cn-a', 'LISTINGS', [
        [0, 10],
        [1, 20],
      ]),
    );
    s = nextGate(s, marker('cn-b', 'SALES', [[0, 99]])); // another kind does not count
    s = nextGate(s, marker('hist-a', 'LISTINGS', [[0, 99]])); // nor a marketplace not waited for
    s = nextGate(s, marker('cn-a', 'LISTINGS', [[0, 99]])); // nor a second cycle
    expect(s).toEqual({
      kind: 'waiting',
      pending: new Set(['cn-b', 'eu-a']),
      ends: new Map([
        [`${T}:0`, 10n],
        [`${T}:1`, 20n],
      ]),
    });
    s = nextGate(s, marker('eu-a', 'LISTINGS', [[0, 15]]));
    s = nextGate(s, marker('cn-b', 'LISTINGS', [[2, 5]]));
    expect(s).toEqual({
      kind: 'ingesting',
      ends: new Map([
        [`${T}:0`, 15n],
        [`${T}:1`, 20n],
        [`${T}:2`, 5n],
      ]),
    });
    // The committed offset is the next to read: it must pass the end offset.
    s = nextGate(
      s,
      committed([
        [0, 16],
        [1, 20],
        [2, 6],
      ]),
    );
    expect(s.kind).toBe('ingesting');
    s = nextGate(
      s,
      committed([
        [0, 16],
        [2, 6],
      ]),
    ); // a partition without commits is not in
    expect(s.kind).toBe('ingesting');
    s = nextGate(
      s,
      committed([
        [0, 16],
        [1, 21],
        [2, 6],
      ]),
    );
    expect(s).toEqual({ kind: 'open', reason: 'listed' });
  });

  it('opens with the last marker when the cycles emitted nothing', () => {
    let s = initialGate(['cn-a', 'cn-b']);
    s = nextGate(s, marker('cn-a', 'LISTINGS'));
    s = nextGate(s, marker('cn-b', 'LISTINGS'));
    expect(s).toEqual({ kind: 'open', reason: 'listed' });
  });

  it('opens on timeout, stop or a Kafka failure, and stays open with its first reason', () => {
    const waiting = initialGate(['cn-a']);
    const ingesting = nextGate(waiting, marker('cn-a', 'LISTINGS', [[0, 1]]));
    for (const s of [waiting, ingesting]) {
      expect(nextGate(s, { kind: 'timeout' })).toEqual({ kind: 'open', reason: 'timeout' });
      expect(nextGate(s, { kind: 'stop' })).toEqual({ kind: 'open', reason: 'stopped' });
      expect(nextGate(s, { kind: 'failed' })).toEqual({ kind: 'open', reason: 'failed' });
    }
    const open = nextGate(waiting, { kind: 'timeout' });
    expect(nextGate(open, marker('cn-a', 'LISTINGS'))).toBe(open);
    expect(nextGate(open, committed([[0, 5]]))).toBe(open);
    expect(nextGate(open, { kind: 'stop' })).toBe(open);
  });

  it('is open from the start when there is nothing to wait for', () => {
    expect(initialGate([])).toEqual({ kind: 'open', reason: 'listed' });
  });
});

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  initialPriority,
  ListingsFirst,
  nextPriority,
  type PartitionView,
  type PriorityOptions,
  type PriorityState,
  recordsLeft,
} from './priority.js';

const opts: PriorityOptions = {
  pauseAbove: 100,
  pauseAfterMs: 1_000,
  resumeBelow: 10,
  resumeAfterMs: 200,
  idleMs: 2_000,
  maxPauseMs: 5_000,
  minFlowMs: 500,
};
const view = (left: number, ageMs: number, at: number): PartitionView => ({ left, ageMs, at });

describe('nextPriority', () => {
  it('pauses the others when a listings partition has records left, and lets them flow once all caught up', () => {
    let s: PriorityState = initialPriority(0);
    s = nextPriority(s, [view(5, 0, 10), view(100, 0, 10)], 10, opts);
    expect(s.kind).toBe('flowing'); // at the threshold, not above
    s = nextPriority(s, [view(5, 0, 20), view(101, 0, 20)], 20, opts);
    expect(s).toEqual({ kind: 'listings-first', since: 20 });
    s = nextPriority(s, [view(5, 0, 30), view(11, 0, 30)], 30, opts);
    expect(s.kind).toBe('listings-first'); // one still above resumeBelow
    s = nextPriority(s, [view(10, 200, 40), view(0, 0, 40)], 40, opts);
    expect(s).toEqual({ kind: 'flowing', since: 40, holdUntil: 0 });
  });

  it('pauses them when the listings committed are late, even with nothing left in the fetch', () => {
    let s = nextPriority(initialPriority(0), [view(0, 1_001, 0)], 0, opts);
    expect(s.kind).toBe('listings-first');
    s = nextPriority(s, [view(0, 201, 100)], 100, opts);
    expect(s.kind).toBe('listings-first'); // still later than resumeAfterMs
    s = nextPriority(s, [view(0, 150, 200)], 200, opts);
    expect(s.kind).toBe('flowing');
  });

  it('a partition silent for idleMs with nothing left has caught up; one with records left has not', () => {
    const late = view(5, 3_000, 0);
    let s = nextPriority(initialPriority(0), [late], 0, opts);
    expect(s.kind).toBe('listings-first');
    expect(nextPriority(s, [late], 1_999, opts).kind).toBe('listings-first');
    s = nextPriority(s, [late], 2_000, opts);
    expect(s).toEqual({ kind: 'flowing', since: 2_000, holdUntil: 0 });
    // Nor does an old view pause them again.
    expect(nextPriority(s, [late], 3_000, opts).kind).toBe('flowing');
    // Records left: waiting for its next fetch, not idle (only maxPauseMs ends that pause).
    const backlog = view(5_000, 0, 0);
    s = nextPriority(initialPriority(0), [backlog], 0, opts);
    expect(nextPriority(s, [backlog], 4_999, opts).kind).toBe('listings-first');
  });

  it('never pauses longer than maxPauseMs, then holds them flowing for minFlowMs', () => {
    let s: PriorityState = nextPriority(initialPriority(0), [view(500, 0, 0)], 0, opts);
    expect(s.kind).toBe('listings-first');
    s = nextPriority(s, [view(500, 0, 4_999)], 4_999, opts);
    expect(s.kind).toBe('listings-first');
    s = nextPriority(s, [view(500, 0, 5_000)], 5_000, opts);
    expect(s).toEqual({ kind: 'flowing', since: 5_000, holdUntil: 5_500 });
    expect(nextPriority(s, [view(500, 0, 5_499)], 5_499, opts).kind).toBe('flowing');
    expect(nextPriority(s, [view(500, 0, 5_500)], 5_500, opts).kind).toBe('listings-first');
  });

  it('with no listings partitions (none assigned) nothing is paused', () => {
    expect(nextPriority(initialPriority(0), [], 10, opts).kind).toBe('flowing');
    expect(nextPriority({ kind: 'listings-first', since: 0 }, [], 10, opts).kind).toBe('flowing');
  });

  it('property: never paused longer than maxPauseMs at a time, nor within minFlowMs of a pause cut short', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            dt: fc.integer({ min: 0, max: 1_500 }),
            views: fc.array(fc.record({ left: fc.nat(300), ageMs: fc.nat(3_000), back: fc.nat(3_000) }), {
              maxLength: 4,
            }),
          }),
          { maxLength: 200 },
        ),
        (steps) => {
          let now = 0;
          let s: PriorityState = initialPriority(0);
          let cutShortAt: number | undefined;
          for (const { dt, views } of steps) {
            now += dt;
            const before = s;
            s = nextPriority(
              s,
              views.map((v) => view(v.left, v.ageMs, now - v.back)),
              now,
              opts,
            );
            if (s.kind === 'listings-first') expect(now - s.since).toBeLessThan(opts.maxPauseMs);
            if (before.kind === 'listings-first' && s.kind === 'flowing' && s.holdUntil > 0) cutShortAt = now;
            if (before.kind === 'flowing' && s.kind === 'listings-first' && cutShortAt !== undefined)
              expect(now - cutShortAt).toBeGreaterThanOrEqual(opts.minFlowMs);
          }
        },
      ),
    );
  });
});

describe('ListingsFirst', () => {
  function setup() {
    let now = 1_000_000;
    const calls: string[] = [];
    const consumer = {
      pause: (t: { topic: string }[]) => calls.push(`pause ${t.map((x) => x.topic).join(',')}`),
      resume: (t: { topic: string }[]) => calls.push(`resume ${t.map((x) => x.topic).join(',')}`),
    };
    const p = new ListingsFirst('listings.v1', ['sales.v1', 'history.v1'], consumer, opts, () => now);
    return { p, calls, consumer, at: (t: number) => (now = 1_000_000 + t), now: () => now };
  }

  it('pauses and resumes the other topics on what its listings batches report', () => {
    const { p, calls, at, now } = setup();
    p.observe('sales.v1', 0, { highWatermark: '10000', nextOffset: 1n, receivedAt: now() }); // not the listings topic: ignored
    expect(calls).toEqual([]);
    p.observe('listings.v1', 2, { highWatermark: '1000', nextOffset: 500n, lastTimestamp: now(), receivedAt: now() });
    expect(calls).toEqual(['pause sales.v1,history.v1']);
    expect(p.phase).toBe('listings-first');
    at(300);
    p.observe('listings.v1', 2, {
      highWatermark: '1000',
      nextOffset: 995n,
      lastTimestamp: now() - 100,
      receivedAt: now(),
    });
    expect(calls).toEqual(['pause sales.v1,history.v1', 'resume sales.v1,history.v1']);
    expect(p.stats).toEqual({ pauses: 1, pausedMs: 300 });
  });

  it("judges a batch's lateness by its last record's timestamp", () => {
    const { p, calls, now } = setup();
    p.observe('listings.v1', 0, {
      highWatermark: '10',
      nextOffset: 10n,
      lastTimestamp: now() - 5_000,
      receivedAt: now(),
    });
    expect(calls).toEqual(['pause sales.v1,history.v1']);
  });

  it('resumes on its timer when no listings batch ends the pause, and when its partitions are revoked', () => {
    const { p, calls, at, now } = setup();
    p.observe('listings.v1', 0, { highWatermark: '5000', nextOffset: 0n, lastTimestamp: now(), receivedAt: now() });
    at(1_000);
    // The backlog read, but the records had waited 1.5 s: still behind.
    p.observe('listings.v1', 0, {
      highWatermark: '5000',
      nextOffset: 5_000n,
      lastTimestamp: now() - 1_500,
      receivedAt: now(),
    });
    at(2_999);
    p.tick();
    expect(p.phase).toBe('listings-first');
    at(3_000);
    p.tick(); // nothing left and silent for idleMs: caught up
    expect(calls.at(-1)).toBe('resume sales.v1,history.v1');
    at(3_100);
    p.observe('listings.v1', 0, { highWatermark: '9000', nextOffset: 5_000n, lastTimestamp: now(), receivedAt: now() });
    expect(calls.at(-1)).toBe('pause sales.v1,history.v1');
    p.assigned([1, 3]); // partition 0 went to another member: its lag is not ours
    expect(calls.at(-1)).toBe('resume sales.v1,history.v1');
    expect(p.phase).toBe('flowing');
  });

  it('tells a restarted consumer the phase again on its rebalance, and survives one that refuses', () => {
    let refuse = false;
    const calls: string[] = [];
    const consumer = {
      pause: () => {
        if (refuse) throw new Error('Consumer group was not initialized');
        calls.push('pause');
      },
      resume: () => {
        if (refuse) throw new Error('Consumer group was not initialized');
        calls.push('resume');
      },
    };
    const now = 1_000_000;
    const p = new ListingsFirst('listings.v1', ['sales.v1'], consumer, opts, () => now);
    refuse = true;
    p.observe('listings.v1', 0, { highWatermark: '9000', nextOffset: 0n, receivedAt: now });
    expect(p.phase).toBe('listings-first');
    refuse = false;
    p.assigned([0]);
    expect(calls).toEqual(['pause']);
  });

  it('a high watermark below the next offset (a stale fetch) counts as nothing left, not as negative', () => {
    const { p, calls, now } = setup();
    p.observe('listings.v1', 0, { highWatermark: '10', nextOffset: 50n, lastTimestamp: now(), receivedAt: now() });
    expect(calls).toEqual([]);
  });
});

describe('recordsLeft', () => {
  it('is what the partition held past the batch when it was fetched, never less than nothing', () => {
    expect(recordsLeft('100', 40n)).toBe(60);
    expect(recordsLeft('40', 40n)).toBe(0);
    expect(recordsLeft('30', 40n)).toBe(0); // a stale fetch
    expect(recordsLeft(undefined, 5n)).toBe(0);
  });
});

import { describe, expect, it } from 'vitest';
import { HistoryCursor, type HistoryWork } from './history-cursor.js';

/** Every work item the cursor gives on `today` until it has none, each reported done. */
function drain(c: HistoryCursor, today: number): HistoryWork[] {
  const out: HistoryWork[] = [];
  for (let w = c.next(today); w; w = c.next(today)) {
    out.push(w);
    c.done(w);
  }
  return out;
}

describe('HistoryCursor', () => {
  it('closes of every day first, oldest first; then the hours of the recent days', () => {
    const c = new HistoryCursor(5, 2);
    const work = drain(c, 100);
    expect(work).toEqual([
      { day: 95, closes: true, hourly: false },
      { day: 96, closes: true, hourly: false },
      { day: 97, closes: true, hourly: false },
      { day: 98, closes: true, hourly: false },
      { day: 99, closes: true, hourly: false },
      { day: 98, closes: false, hourly: true },
      { day: 99, closes: false, hourly: true },
    ]);
    expect(c.caughtUp(100)).toBe(true);
  });

  it('then each newly closed day brings its close and its hours together', () => {
    const c = new HistoryCursor(5, 2);
    drain(c, 100);
    expect(drain(c, 101)).toEqual([{ day: 100, closes: true, hourly: true }]);
    expect(drain(c, 103)).toEqual([
      { day: 101, closes: true, hourly: true },
      { day: 102, closes: true, hourly: true },
    ]);
  });

  it('a day that closes during the hours pass goes first, with its hours, and the pass goes on', () => {
    const c = new HistoryCursor(3, 3);
    for (let i = 0; i < 3; i++) c.done(c.next(50)!);
    const first = c.next(50)!;
    expect(first).toEqual({ day: 47, closes: false, hourly: true });
    c.done(first);
    expect(c.next(51)).toEqual({ day: 50, closes: true, hourly: true });
    c.done(c.next(51)!);
    expect(drain(c, 51)).toEqual([
      { day: 48, closes: false, hourly: true },
      { day: 49, closes: false, hourly: true },
    ]);
  });

  it('a failed cycle (not reported done) is asked again', () => {
    const c = new HistoryCursor(2, 0);
    expect(c.next(10)).toEqual({ day: 8, closes: true, hourly: false });
    expect(c.next(10)).toEqual({ day: 8, closes: true, hourly: false });
  });

  it('without hourly days there is no hours pass; hours never reach further back than the closes', () => {
    expect(drain(new HistoryCursor(3, 0), 10).every((w) => w.closes && !w.hourly)).toBe(true);
    const hours = drain(new HistoryCursor(2, 10), 10).filter((w) => !w.closes);
    expect(hours.map((w) => w.day)).toEqual([8, 9]);
  });

  it('nextClose: the next closes day whether or not it has closed (a manual re-poll), with hours once through', () => {
    const c = new HistoryCursor(2, 1);
    expect(c.nextClose(10)).toEqual({ day: 8, closes: true, hourly: false });
    drain(c, 10);
    expect(c.nextClose(10)).toEqual({ day: 10, closes: true, hourly: true });
    c.done(c.nextClose(10));
    expect(c.next(11)).toBeUndefined();
  });

  it('a cursor resumed from a position kept after any cycle gives exactly the work left, nothing twice', () => {
    const whole = drain(new HistoryCursor(6, 3), 200);
    for (let stop = 0; stop <= whole.length; stop++) {
      const before = new HistoryCursor(6, 3);
      const done: HistoryWork[] = [];
      for (let k = 0; k < stop; k++) {
        const w = before.next(200) as HistoryWork;
        done.push(w);
        before.done(w);
      }
      const after = new HistoryCursor(6, 3);
      after.resume(before.position());
      expect([...done, ...drain(after, 200)], `stopped after ${stop}`).toEqual(whole);
    }
    // A position from before any cycle is a fresh start.
    const fresh = new HistoryCursor(6, 3);
    fresh.resume({ closesNext: null, hoursNext: null, hoursEnd: null });
    expect(drain(fresh, 200)).toEqual(whole);
    // Days close while the poller is down: the restarted one takes them with their hours.
    const kept = new HistoryCursor(6, 3);
    drain(kept, 200);
    const later = new HistoryCursor(6, 3);
    later.resume(kept.position());
    expect(drain(later, 202)).toEqual([
      { day: 200, closes: true, hourly: true },
      { day: 201, closes: true, hourly: true },
    ]);
  });
});

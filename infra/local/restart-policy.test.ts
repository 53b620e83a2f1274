import { describe, expect, it } from 'vitest';
import {
  DEFAULT_RESTART_POLICY,
  EX_CONFIG,
  INITIAL_RESTART_STATE,
  next,
  pauseFor,
  type RestartEvent,
  type RestartState,
} from './restart-policy.js';

const policy = { baseMs: 1_000, maxMs: 30_000, healthyMs: 60_000, finalCodes: [78] };
const S = 1_000;

/** Runs `events` from the initial state and returns every state on the way. */
function run(events: RestartEvent[], from: RestartState = INITIAL_RESTART_STATE): RestartState[] {
  const states: RestartState[] = [];
  let s = from;
  for (const e of events) states.push((s = next(s, e, policy)));
  return states;
}

/** A service that starts at `at`, runs `ranMs`, crashes, and is restarted when its pause is over. */
function crashAfter(at: number, ranMs: number): RestartEvent[] {
  return [{ type: 'started', at }, { type: 'exited', at: at + ranMs }, { type: 'restartDue' }];
}

/** The pauses of a run of crashes, each after `ranMs` of running (clock advanced by hand). */
function pauses(runs: number[]): number[] {
  let s = INITIAL_RESTART_STATE;
  let clock = 0;
  const out: number[] = [];
  for (const ranMs of runs) {
    for (const e of crashAfter(clock, ranMs)) {
      s = next(s, e, policy);
      if (s.phase === 'backoff') {
        out.push(s.pauseMs);
        clock += ranMs + s.pauseMs;
      }
    }
  }
  return out;
}

describe('restart policy', () => {
  it('doubles the pause from 1 s to at most 30 s while a service keeps crashing at once', () => {
    expect(pauses([100, 100, 100, 100, 100, 100, 100])).toEqual([1, 2, 4, 8, 16, 30, 30].map((x) => x * S));
  });

  it('goes starting → running → backoff → starting on a crash', () => {
    expect(run(crashAfter(5 * S, 2 * S))).toEqual([
      { phase: 'running', streak: 0, since: 5 * S },
      { phase: 'backoff', streak: 1, pauseMs: 1 * S, ranMs: 2 * S },
      { phase: 'starting', streak: 1 },
    ]);
  });

  it('counts a run one millisecond short of the healthy minute as part of the streak', () => {
    expect(pauses([100, 100, 100, 60 * S - 1])).toEqual([1, 2, 4, 8].map((x) => x * S));
  });

  it('healthy minute: a crash after a healthy minute pauses 1 s again, not the grown pause (issue 13: the restart pause never reset)', () => {
    // Root cause: the supervisor kept one restart counter per service for its whole life, so a
    // service that crashed five times on a bad morning paid 30 s for every later crash, however
    // long it had run well in between. A run of `healthyMs` now ends the streak.
    expect(pauses([100, 100, 100, 100, 100, 100, 10 * 60 * S])).toEqual([1, 2, 4, 8, 16, 30, 1].map((x) => x * S));
    // …and the streak grows again from there.
    expect(pauses([100, 100, 100, 100, 100, 100, 60 * S, 100, 100])).toEqual(
      [1, 2, 4, 8, 16, 30, 1, 2, 4].map((x) => x * S),
    );
  });

  it('takes the healthy time from its policy', () => {
    const short = { ...policy, healthyMs: 5 * S };
    let s = next(
      next(next(INITIAL_RESTART_STATE, { type: 'started', at: 0 }, short), { type: 'exited', at: 1 }, short),
      { type: 'restartDue' },
      short,
    );
    s = next(next(s, { type: 'started', at: 10 * S }, short), { type: 'exited', at: 16 * S }, short);
    expect(s).toMatchObject({ phase: 'backoff', streak: 1, pauseMs: 1 * S });
  });

  it('treats a process that exits before it was seen started as a crash of no duration', () => {
    expect(next(INITIAL_RESTART_STATE, { type: 'exited', at: 9 * S }, policy)).toEqual({
      phase: 'backoff',
      streak: 1,
      pauseMs: 1 * S,
      ranMs: 0,
    });
  });

  it('stops: a running service waits for its exit, one in backoff is done at once, and nothing restarts', () => {
    const running = run([{ type: 'started', at: 0 }])[0] as RestartState;
    const stopping = next(running, { type: 'stop' }, policy);
    expect(stopping).toEqual({ phase: 'stopping' });
    expect(next(stopping, { type: 'exited', at: 1 }, policy)).toEqual({ phase: 'exited' });
    const backoff = next(running, { type: 'exited', at: 1 }, policy);
    expect(next(backoff, { type: 'stop' }, policy)).toEqual({ phase: 'exited' });
    expect(next({ phase: 'exited' }, { type: 'restartDue' }, policy)).toEqual({ phase: 'exited' });
  });

  it('leaves the state as it was (the same object) on an event that means nothing in it', () => {
    const running = next(INITIAL_RESTART_STATE, { type: 'started', at: 0 }, policy);
    for (const e of [{ type: 'started', at: 1 }, { type: 'restartDue' }] as RestartEvent[])
      expect(next(running, e, policy)).toBe(running);
    const exited: RestartState = { phase: 'exited' };
    for (const e of [{ type: 'started', at: 1 }, { type: 'exited', at: 1 }, { type: 'stop' }] as RestartEvent[])
      expect(next(exited, e, policy)).toBe(exited);
  });

  it('exit 78 is final: a materializer whose offsets belong to another cluster is not restarted in a loop', () => {
    // Root cause: every exit led to backoff, so a materializer refusing foreign offsets (exit 78,
    // EX_CONFIG) was started again every 1 to 30 s for ever, each time refusing again and pushing
    // its explanation out of sight. Restarting cannot fix 78; the service stays down.
    expect(DEFAULT_RESTART_POLICY.finalCodes).toEqual([EX_CONFIG]);
    const [, failed] = run([
      { type: 'started', at: 0 },
      { type: 'exited', at: 4 * S, code: 78 },
    ]);
    expect(failed).toEqual({ phase: 'failed', code: 78, ranMs: 4 * S });
    // Nothing moves it: no restart is ever due, and a stop has no process to wait for.
    for (const e of [
      { type: 'restartDue' },
      { type: 'started', at: 5 * S },
      { type: 'exited', at: 5 * S, code: 1 },
      { type: 'stop' },
    ] as RestartEvent[])
      expect(next(failed as RestartState, e, policy)).toBe(failed);
    // Also when it refuses before it was seen started.
    expect(next(INITIAL_RESTART_STATE, { type: 'exited', at: 0, code: 78 }, policy)).toMatchObject({ phase: 'failed' });
  });

  it('restarts after any other exit: code 1, a signal, 78 of a policy without final codes', () => {
    const running = next(INITIAL_RESTART_STATE, { type: 'started', at: 0 }, policy);
    for (const code of [1, 2, 0, null, undefined])
      expect(next(running, { type: 'exited', at: S, code }, policy)).toMatchObject({ phase: 'backoff' });
    expect(next(running, { type: 'exited', at: S, code: 78 }, { ...policy, finalCodes: [] })).toMatchObject({
      phase: 'backoff',
    });
  });

  it('a service told to stop that exits 78 has simply exited', () => {
    expect(next({ phase: 'stopping' }, { type: 'exited', at: 0, code: 78 }, policy)).toEqual({ phase: 'exited' });
  });

  it('never exceeds the maximum, however long the streak', () => {
    expect(pauseFor(1, DEFAULT_RESTART_POLICY)).toBe(1 * S);
    expect(pauseFor(6, DEFAULT_RESTART_POLICY)).toBe(30 * S);
    expect(pauseFor(10_000, DEFAULT_RESTART_POLICY)).toBe(30 * S);
  });
});

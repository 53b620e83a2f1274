/*
 * The supervisor's restart policy, one service's life as a pure transition
 * `next(state, event, policy) → state`; the supervisor only performs what the new state asks for
 * (spawn on `starting`, a timer of `pauseMs` on `backoff`, SIGTERM on `stopping`).
 *
 *            started                exited (a crash)
 *   starting ───────▶ running ─────────────────────▶ backoff ──restartDue──▶ starting
 *      │                 │   pause = base · 2^(streak-1), at most max; a run that lasted
 *      │                 │   `healthyMs` ends the streak, so its crash pauses `base` again
 *      └─────────────────┴──exited with a final code (78)──▶ failed   (never restarted)
 *   starting | running | backoff ──stop──▶ stopping ──exited──▶ exited
 *                                          (backoff ──stop──▶ exited: no process to wait for)
 *
 * The streak has to end somewhere: without that a service that crashed five times in a bad hour
 * would pay the longest pause for every later crash, however long it had run well in between.
 *
 * A final code is the service saying that starting it again cannot help: 78 (EX_CONFIG) is the
 * materializer finding its stored offsets foreign to this Kafka cluster, which only an operator
 * resolves (`make reset-offsets` or `make replay`). Restarting it would only repeat the refusal
 * and bury its explanation in the log, as systemd's `RestartPreventExitStatus` avoids too.
 */

export interface RestartPolicy {
  /** Pause before the first restart of a streak. @default 1000 */
  baseMs: number;
  /** Longest pause. @default 30000 */
  maxMs: number;
  /** A run at least this long ends the crash streak: its crash pauses `baseMs` again. @default 60000 */
  healthyMs: number;
  /** Exit codes after which a service is not restarted (`failed`). @default [78] (EX_CONFIG) */
  finalCodes: readonly number[];
}

/** sysexits.h: a configuration (here: stored state) the process cannot fix by starting again. */
export const EX_CONFIG = 78;

export const DEFAULT_RESTART_POLICY: Readonly<RestartPolicy> = Object.freeze({
  baseMs: 1_000,
  maxMs: 30_000,
  healthyMs: 60_000,
  finalCodes: Object.freeze([EX_CONFIG]),
});

/** `streak`: crashes in a row, none after a healthy run. */
export type RestartState =
  | { readonly phase: 'starting'; readonly streak: number }
  | { readonly phase: 'running'; readonly streak: number; readonly since: number }
  | { readonly phase: 'backoff'; readonly streak: number; readonly pauseMs: number; readonly ranMs: number }
  | { readonly phase: 'failed'; readonly code: number; readonly ranMs: number }
  | { readonly phase: 'stopping' }
  | { readonly phase: 'exited' };

export type RestartPhase = RestartState['phase'];

/**
 * `at`: the supervisor's clock (epoch ms); injected, so tests need no real time. `code`: the exit
 * code, null (or absent) when a signal ended the process.
 */
export type RestartEvent =
  | { readonly type: 'started'; readonly at: number }
  | { readonly type: 'exited'; readonly at: number; readonly code?: number | null }
  | { readonly type: 'restartDue' }
  | { readonly type: 'stop' };

export const INITIAL_RESTART_STATE: RestartState = Object.freeze({ phase: 'starting', streak: 0 });

/** The pause before restart number `streak` of a streak (1-based). */
export function pauseFor(streak: number, policy: RestartPolicy): number {
  // The exponent is capped so a long streak cannot overflow to Infinity on the way to maxMs.
  return Math.min(policy.maxMs, policy.baseMs * 2 ** Math.min(Math.max(streak - 1, 0), 30));
}

/** The state after `event`; an event that means nothing in a state leaves it unchanged (same object). */
export function next(
  state: RestartState,
  event: RestartEvent,
  policy: RestartPolicy = DEFAULT_RESTART_POLICY,
): RestartState {
  switch (event.type) {
    case 'started':
      return state.phase === 'starting' ? { phase: 'running', streak: state.streak, since: event.at } : state;
    case 'exited': {
      if (state.phase === 'stopping') return { phase: 'exited' };
      if (state.phase !== 'running' && state.phase !== 'starting') return state;
      // A process that dies before it was seen started ran for no time at all.
      const ranMs = state.phase === 'running' ? Math.max(0, event.at - state.since) : 0;
      if (event.code != null && policy.finalCodes.includes(event.code))
        return { phase: 'failed', code: event.code, ranMs };
      const streak = (ranMs >= policy.healthyMs ? 0 : state.streak) + 1;
      return { phase: 'backoff', streak, pauseMs: pauseFor(streak, policy), ranMs };
    }
    case 'restartDue':
      return state.phase === 'backoff' ? { phase: 'starting', streak: state.streak } : state;
    case 'stop':
      if (state.phase === 'backoff') return { phase: 'exited' };
      return state.phase === 'starting' || state.phase === 'running' ? { phase: 'stopping' } : state;
  }
}

/**
 * The simulated clock. It runs at `speed` × real time from an anchor and can be moved: tests
 * freeze it (speed 0) for exact comparisons, or run it fast to make months of history in
 * seconds. Moving it backwards is refused: upstream time never goes back.
 */
export interface ClockState {
  now: number;
  speed: number;
}

export class SimClock {
  private anchorSim: number;
  private anchorReal: number;
  private speed: number;

  constructor(
    start: number,
    speed = 1,
    private readonly realNow: () => number = Date.now,
  ) {
    this.anchorSim = start;
    this.anchorReal = realNow();
    this.speed = speed;
  }

  now(): number {
    return Math.floor(this.anchorSim + (this.realNow() - this.anchorReal) * this.speed);
  }

  state(): ClockState {
    return { now: this.now(), speed: this.speed };
  }

  /** Re-anchors at the current simulated time, so a speed change does not jump the clock. */
  setSpeed(speed: number): void {
    if (!Number.isFinite(speed) || speed < 0) throw new RangeError('speed must be a finite number >= 0');
    this.anchorSim = this.now();
    this.anchorReal = this.realNow();
    this.speed = speed;
  }

  advance(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError('advance needs a finite, non-negative number of ms');
    this.anchorSim = this.now() + ms;
    this.anchorReal = this.realNow();
  }

  set(at: number): void {
    if (!Number.isFinite(at) || at < this.now()) throw new RangeError('the clock only moves forward');
    this.anchorSim = at;
    this.anchorReal = this.realNow();
  }
}

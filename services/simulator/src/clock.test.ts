import { describe, expect, it } from 'vitest';
import { SimClock } from './clock.js';

const START = Date.UTC(2025, 0, 6, 12, 0, 0);

/** A real clock the test moves by hand. */
function fakeReal(at = 1_000_000): { now: () => number; tick: (ms: number) => void } {
  let t = at;
  return { now: () => t, tick: (ms) => void (t += ms) };
}

describe('SimClock', () => {
  it('is frozen with speed 0', () => {
    const real = fakeReal();
    const clock = new SimClock(START, 0, real.now);
    real.tick(3_600_000);
    expect(clock.now()).toBe(START);
    expect(clock.state()).toEqual({ now: START, speed: 0 });
  });

  it('runs at speed × real time', () => {
    const real = fakeReal();
    const clock = new SimClock(START, 60, real.now);
    real.tick(1_000);
    expect(clock.now()).toBe(START + 60_000);
  });

  it('advance and set move a frozen clock forward', () => {
    const clock = new SimClock(START, 0, fakeReal().now);
    clock.advance(90_000);
    expect(clock.now()).toBe(START + 90_000);
    clock.advance(0);
    expect(clock.now()).toBe(START + 90_000);
    clock.set(START + 86_400_000);
    expect(clock.now()).toBe(START + 86_400_000);
    clock.set(START + 86_400_000); // setting the current time is not "backwards"
    expect(clock.now()).toBe(START + 86_400_000);
  });

  it('advance keeps the clock running from the new time', () => {
    const real = fakeReal();
    const clock = new SimClock(START, 2, real.now);
    real.tick(500);
    clock.advance(10_000);
    expect(clock.now()).toBe(START + 1_000 + 10_000);
    real.tick(500);
    expect(clock.now()).toBe(START + 12_000);
  });

  it('refuses to move backwards, and bad amounts', () => {
    const clock = new SimClock(START, 0, fakeReal().now);
    expect(() => clock.set(START - 1)).toThrow(RangeError);
    expect(() => clock.advance(-1)).toThrow(RangeError);
    expect(() => clock.advance(Number.NaN)).toThrow(RangeError);
    expect(() => clock.set(Number.NaN)).toThrow(RangeError);
    expect(() => clock.setSpeed(-1)).toThrow(RangeError);
    expect(() => clock.setSpeed(Number.POSITIVE_INFINITY)).toThrow(RangeError);
    expect(clock.now()).toBe(START);
  });

  it('a speed change does not jump the time', () => {
    const real = fakeReal();
    const clock = new SimClock(START, 10, real.now);
    real.tick(1_000);
    expect(clock.now()).toBe(START + 10_000);
    clock.setSpeed(1_000);
    expect(clock.now()).toBe(START + 10_000);
    real.tick(1_000);
    expect(clock.now()).toBe(START + 10_000 + 1_000_000);
    clock.setSpeed(0);
    real.tick(60_000);
    expect(clock.state()).toEqual({ now: START + 1_010_000, speed: 0 });
    clock.setSpeed(1);
    expect(clock.now()).toBe(START + 1_010_000);
  });
});

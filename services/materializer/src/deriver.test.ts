import { describe, expect, it } from 'vitest';
import { judgeGate, recomputeGate } from './derive-gates.js';

describe('recomputeGate: the recomputation is paced, and waits while ingest is far behind', () => {
  it('never runs before its pace allows, backlog or not', () => {
    expect(recomputeGate(999, 1_000, 0, undefined)).toBe(false);
    expect(recomputeGate(999, 1_000, 0, 0)).toBe(false);
    expect(recomputeGate(999, 1_000, 50_000, 0)).toBe(false);
  });

  it('runs when due and ingest has little left to read', () => {
    expect(recomputeGate(1_000, 1_000, 0, 900)).toBe(true);
    expect(recomputeGate(1_000, 0, 10_000, 900)).toBe(true);
  });

  it('waits while ingest has much left to read, from when its markers queued the work', () => {
    expect(recomputeGate(1_000, 0, 10_001, 1_000)).toBe(false);
    expect(recomputeGate(20_000, 0, 300_000, 1_000)).toBe(false);
    // Caught up meanwhile: runs at once.
    expect(recomputeGate(20_000, 0, 10, 1_000)).toBe(true);
  });

  it('waits 30 s at most: derived values never fall further behind while a backlog lasts', () => {
    expect(recomputeGate(30_999, 0, 300_000, 1_000)).toBe(false);
    expect(recomputeGate(31_000, 0, 300_000, 1_000)).toBe(true);
  });

  it("does not hold work it did not see queued (a restart, another member's markers)", () => {
    expect(recomputeGate(1_000, 0, 300_000, undefined)).toBe(true);
  });
});

describe('judgeGate: the second look waits while listings are on their way in', () => {
  it('runs at once when listings have little left to read and no listings marker is pending', () => {
    expect(judgeGate(0, 0, false)).toBe(true);
    expect(judgeGate(0, 10_000, false)).toBe(true);
  });

  it('waits while listings have much left to read, or a listings marker is stored but not applied', () => {
    expect(judgeGate(0, 10_001, false)).toBe(false);
    expect(judgeGate(45_000, 0, true)).toBe(false);
    expect(judgeGate(59_999, 300_000, true)).toBe(false);
  });

  it('waits at most a minute from its oldest queued row', () => {
    expect(judgeGate(60_000, 300_000, true)).toBe(true);
    expect(judgeGate(60_000, 0, true)).toBe(true);
  });
});

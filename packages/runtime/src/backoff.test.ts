import { describe, expect, it } from 'vitest';
import { Backoff, backoffMs } from './backoff.js';

const policy = { baseMs: 100, maxMs: 10_000 };

describe('backoffMs', () => {
  it('is full jitter under an exponential ceiling capped at max', () => {
    expect(backoffMs(1, policy, () => 0.999)).toBe(99);
    expect(backoffMs(4, policy, () => 0.999)).toBe(799);
    expect(backoffMs(20, policy, () => 0.999)).toBe(9_990);
    expect(backoffMs(3, policy, () => 0)).toBe(0);
    expect(backoffMs(0, policy, () => 0.5)).toBe(50);
  });
});

describe('Backoff', () => {
  it('grows with each failure and starts over after a success', () => {
    const b = new Backoff(policy, () => 0.999);
    expect([b.next(), b.next(), b.next()]).toEqual([99, 199, 399]);
    expect(b.attempts).toBe(3);
    b.reset();
    expect(b.attempts).toBe(0);
    expect(b.next()).toBe(99);
  });
});

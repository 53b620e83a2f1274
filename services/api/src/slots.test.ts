import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Slots } from './slots.js';

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('Slots', () => {
  it('runs at most `size` at once, the others in the order they asked', async () => {
    const slots = new Slots(2);
    const started: number[] = [];
    const release = new Map<number, () => void>();
    const runs = [0, 1, 2, 3, 4].map((i) =>
      slots.run(async () => {
        started.push(i);
        await new Promise<void>((resolve) => release.set(i, resolve));
        return i;
      }),
    );
    await tick();
    expect(started).toEqual([0, 1]);
    expect([slots.running, slots.waiting]).toEqual([2, 3]);
    release.get(1)?.();
    await tick();
    expect(started).toEqual([0, 1, 2]);
    release.get(0)?.();
    release.get(2)?.();
    await tick();
    expect(started).toEqual([0, 1, 2, 3, 4]);
    release.get(3)?.();
    release.get(4)?.();
    expect(await Promise.all(runs)).toEqual([0, 1, 2, 3, 4]);
    expect([slots.running, slots.waiting]).toEqual([0, 0]);
  });

  it('gives the slot on when a read fails', async () => {
    const slots = new Slots(1);
    const failed = slots.run(() => Promise.reject(new Error('database away')));
    const next = slots.run(async () => 'answered');
    await expect(failed).rejects.toThrow('database away');
    expect(await next).toBe('answered');
    expect([slots.running, slots.waiting]).toEqual([0, 0]);
  });

  it('never exceeds its size and runs every read once, whatever the timings and failures', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.array(fc.record({ ticks: fc.nat({ max: 5 }), fails: fc.boolean() }), { maxLength: 30 }),
        async (size, reads) => {
          const slots = new Slots(size);
          let inside = 0;
          let most = 0;
          let ran = 0;
          const all = reads.map(({ ticks, fails }) =>
            slots
              .run(async () => {
                inside++;
                most = Math.max(most, inside);
                for (let t = 0; t < ticks; t++) await tick();
                inside--;
                ran++;
                if (fails) throw new Error('failed');
              })
              .catch(() => undefined),
          );
          await Promise.all(all);
          expect(most).toBeLessThanOrEqual(size);
          expect(ran).toBe(reads.length);
          expect([slots.running, slots.waiting]).toEqual([0, 0]);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('refuses a size that is not a positive integer', () => {
    expect(() => new Slots(0)).toThrow(RangeError);
    expect(() => new Slots(1.5)).toThrow(RangeError);
  });
});

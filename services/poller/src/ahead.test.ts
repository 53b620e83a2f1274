import { describe, expect, it } from 'vitest';
import { aheadOne } from './ahead.js';

const tick = () => new Promise((r) => setTimeout(r, 5));

describe('aheadOne', () => {
  it('fetches the next page while the caller works on the current one, in order', async () => {
    const log: string[] = [];
    async function* pages() {
      for (let i = 1; i <= 3; i++) {
        log.push(`fetch ${i} start`);
        await tick();
        log.push(`fetch ${i} done`);
        yield i;
      }
    }
    const got: number[] = [];
    for await (const p of aheadOne(pages())) {
      log.push(`send ${p} start`);
      await tick();
      await tick();
      log.push(`send ${p} done`);
      got.push(p);
    }
    expect(got).toEqual([1, 2, 3]);
    // Page 2's fetch starts before page 1's send is done: the waits overlap.
    expect(log.indexOf('fetch 2 start')).toBeLessThan(log.indexOf('send 1 done'));
    expect(log.indexOf('fetch 3 start')).toBeLessThan(log.indexOf('send 2 done'));
    // Never more than one page ahead.
    expect(log.indexOf('fetch 3 start')).toBeGreaterThan(log.indexOf('send 1 done'));
  });

  it("surfaces the source's error at the page it failed on", async () => {
    async function* pages() {
      yield 1;
      await tick();
      throw new Error('page 2 failed');
    }
    const got: number[] = [];
    await expect(
      (async () => {
        for await (const p of aheadOne(pages())) got.push(p);
      })(),
    ).rejects.toThrow('page 2 failed');
    expect(got).toEqual([1]);
  });

  it('an early stop closes the source without an unhandled rejection from the page in flight', async () => {
    let closed = false;
    async function* pages() {
      try {
        yield 1;
        await tick();
        throw new Error('never taken');
      } finally {
        closed = true;
      }
    }
    for await (const p of aheadOne(pages())) {
      expect(p).toBe(1);
      break;
    }
    expect(closed).toBe(true);
  });
});

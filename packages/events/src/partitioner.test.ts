import fc from 'fast-check';
import { Partitioners } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { DefaultPartitioner, murmur2 } from './partitioner.js';

const metadata = (n: number) =>
  Array.from({ length: n }, (_, partitionId) => ({
    partitionId,
    leader: 1,
    replicas: [1],
    isr: [1],
    partitionErrorCode: 0,
  }));

describe('DefaultPartitioner', () => {
  it("puts every key on the partition kafkajs's (the Java client's) default partitioner picks", () => {
    const theirs = Partitioners.DefaultPartitioner();
    const ours = DefaultPartitioner();
    fc.assert(
      fc.property(fc.string({ maxLength: 200, unit: 'binary' }), fc.integer({ min: 1, max: 64 }), (key, n) => {
        const args = { topic: 't', partitionMetadata: metadata(n), message: { key, value: null } };
        expect(ours(args)).toBe(theirs(args));
      }),
      { numRuns: 2000 },
    );
    // 2,000 runs take ~1 s alone and passed 5 s on a loaded 2-core machine.
  }, 30_000);

  it("matches the Java client's murmur2 on known values", () => {
    // Utils.murmur2 of these UTF-8 strings, from the Java client's own test (UtilsTest.testMurmur2).
    const cases: [string, number][] = [
      ['21', -973932308],
      ['foobar', -790332482],
      ['a-little-bit-long-string', -985981536],
      ['a-little-bit-longer-string', -1486304829],
      ['lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971],
    ];
    for (const [s, h] of cases) expect(murmur2(Buffer.from(s)), s).toBe(h);
  });

  it('honours an explicit partition and spreads keyless messages over available partitions', () => {
    const p = DefaultPartitioner();
    expect(p({ topic: 't', partitionMetadata: metadata(6), message: { key: 'k', value: null, partition: 4 } })).toBe(4);
    const seen = new Set<number>();
    for (let i = 0; i < 12; i++) seen.add(p({ topic: 't', partitionMetadata: metadata(6), message: { value: null } }));
    expect(seen.size).toBe(6);
  });
});

import { createRequire } from 'node:module';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KAFKAJS_FILES, kafkajsPatches } from './kafkajs.js';
import { groupMessagesPerPartition, type GroupArgs } from './partition-grouping.js';

const require = createRequire(import.meta.url);

/** A pristine copy of kafkajs's grouping (its own module instance, whatever the cache holds). */
function kafkajsGrouping(): <M>(args: GroupArgs<M>) => Record<number, M[]> {
  const path = require.resolve(KAFKAJS_FILES.grouping);
  const cached = require.cache[path];
  delete require.cache[path];
  try {
    return require(path) as <M>(args: GroupArgs<M>) => Record<number, M[]>;
  } finally {
    if (cached) require.cache[path] = cached;
    else delete require.cache[path];
  }
}

describe('groupMessagesPerPartition', () => {
  const original = kafkajsGrouping();

  it('groups as kafkajs does: the same partitions in the same order, each in message order', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 40 }), { maxLength: 500 }),
        fc.integer({ min: 0, max: 5 }),
        (targets, metadataLength) => {
          const messages = targets.map((partition, i) => ({ i, partition }));
          const a: GroupArgs<(typeof messages)[number]> = {
            topic: 't',
            partitionMetadata: Array.from({ length: metadataLength }, (_, id) => ({ partitionId: id })),
            messages,
            partitioner: ({ message }) => message.partition,
          };
          const mine = groupMessagesPerPartition(a);
          const theirs = original(a);
          expect(mine).toEqual(theirs);
          expect(Object.keys(mine)).toEqual(Object.keys(theirs));
        },
      ),
      { numRuns: 500 },
    );
  });

  it("is the one kafkajs's producer uses in this process (kafkajs.ts swapped it in before kafkajs loaded)", () => {
    expect(kafkajsPatches.grouping).toBe('patched');
    expect(require(KAFKAJS_FILES.grouping)).toBe(groupMessagesPerPartition);
  });

  it('takes linear time: 100,000 records to one partition in well under a second', () => {
    const messages = Array.from({ length: 100_000 }, (_, i) => i);
    const t0 = performance.now();
    const grouped = groupMessagesPerPartition({
      topic: 't',
      partitionMetadata: [{}],
      messages,
      partitioner: () => 0,
    });
    expect(grouped[0]).toHaveLength(100_000);
    // kafkajs's copies 5·10⁹ array elements for this; ours a few milliseconds even on a loaded machine.
    expect(performance.now() - t0).toBeLessThan(1_000);
  });
});

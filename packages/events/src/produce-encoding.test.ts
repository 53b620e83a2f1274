import { createRequire } from 'node:module';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { KAFKAJS_FILES, kafkajsPatches } from './kafkajs.js';
import {
  encodeProduceRequest,
  fastProduceRequest,
  groupMessagesPerPartition,
  type GroupArgs,
  type KafkajsParts,
  type ProduceRequest,
  type ProduceRequestArgs,
} from './produce-encoding.js';

const require = createRequire(import.meta.url);

/** A pristine copy of one of kafkajs's files (its own module instance, whatever the cache holds). */
function pristine<T>(file: string): T {
  const path = require.resolve(file);
  const cached = require.cache[path];
  delete require.cache[path];
  try {
    return require(path) as T;
  } finally {
    if (cached) require.cache[path] = cached;
    else delete require.cache[path];
  }
}

const kafkajsV3 = pristine<(args: ProduceRequestArgs) => ProduceRequest>(KAFKAJS_FILES.produceV3);
const kafkajsGrouping = pristine<<M>(args: GroupArgs<M>) => Record<number, M[]>>(KAFKAJS_FILES.grouping);
const parts: KafkajsParts = {
  Encoder: require(KAFKAJS_FILES.encoder) as KafkajsParts['Encoder'],
  Long: require(KAFKAJS_FILES.long) as KafkajsParts['Long'],
  crc32C: require(KAFKAJS_FILES.crc32C) as KafkajsParts['crc32C'],
};
const LongClass = parts.Long as unknown as { fromValue(v: unknown): unknown };
const ours = fastProduceRequest(kafkajsV3, parts);

/** The request payload's bytes, as kafkajs's protocol/request.js reads them (buf up to offset). */
async function bytesOf(request: ProduceRequest): Promise<Buffer> {
  const encoder = (await request.encode()) as { buf: Buffer; offset: number };
  return Buffer.from(encoder.buf.subarray(0, encoder.offset));
}

const text = fc.string({ maxLength: 40, unit: 'grapheme' });
const bytes = fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a));
const keyOrValue = fc.oneof(bytes, text, fc.constant(null), fc.constant(undefined));
const headerValue = fc.oneof(text, bytes);
const headers = fc.option(
  fc.dictionary(
    fc.string({ minLength: 1, maxLength: 12 }),
    fc.oneof(headerValue, fc.array(headerValue, { maxLength: 3 })),
    {
      maxKeys: 4,
    },
  ),
  { nil: undefined },
);
const message = fc.record({ key: keyOrValue, value: keyOrValue, headers }, { requiredKeys: ['key', 'value'] });
const args = fc.record({
  acks: fc.constantFrom(-1, 0, 1),
  timeout: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
  transactionalId: fc.option(text, { nil: undefined }),
  producerId: fc.oneof(
    fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map((v) => LongClass.fromValue(v.toString())),
    fc.integer({ min: -1, max: 2 ** 31 }),
  ),
  producerEpoch: fc.integer({ min: 0, max: 32_767 }),
  topicData: fc.array(
    fc.record({
      topic: fc.string({ minLength: 1, maxLength: 30, unit: 'grapheme' }),
      partitions: fc.array(
        fc.record({
          partition: fc.integer({ min: 0, max: 1000 }),
          firstSequence: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
          // 1-150 records, uniformly: offset deltas past 63 take a second varint byte.
          messages: fc.integer({ min: 1, max: 150 }).chain((n) => fc.array(message, { minLength: n, maxLength: n })),
        }),
        { minLength: 1, maxLength: 3 },
      ),
    }),
    { minLength: 1, maxLength: 2 },
  ),
}) as fc.Arbitrary<ProduceRequestArgs>;

afterEach(() => {
  vi.restoreAllMocks();
});

describe('the one-pass produce request', () => {
  it("writes kafkajs's bytes for every request our producers can send", async () => {
    // Both read the clock per partition; the same fixed clock makes their batches comparable.
    vi.spyOn(Date, 'now').mockReturnValue(Date.UTC(2026, 10, 27, 13, 45, 1, 234));
    await fc.assert(
      fc.asyncProperty(args, async (a) => {
        expect(encodeProduceRequest(a, parts), 'took the fast path').toBeDefined();
        expect(await bytesOf(ours(a))).toEqual(await bytesOf(kafkajsV3(a)));
      }),
      { numRuns: 80 },
    );
  }, 60_000);

  it("leaves what it does not cover to kafkajs's encoder: compression, timestamps, other types, bad headers", async () => {
    vi.spyOn(Date, 'now').mockReturnValue(1_795_000_000_000);
    const base = (messages: ProduceRequestArgs['topicData'][number]['partitions'][number]['messages']) =>
      ({
        acks: -1,
        timeout: 30_000,
        topicData: [{ topic: 't', partitions: [{ partition: 0, firstSequence: 0, messages }] }],
      }) as ProduceRequestArgs;
    const m = { key: Buffer.from('k'), value: Buffer.from('v') };
    const others: ProduceRequestArgs[] = [
      { ...base([m]), compression: 1 },
      base([m, { ...m, timestamp: '1795000000000' }]),
      base([{ ...m, timestamp: 1_795_000_000_000 }]),
      base([{ key: 42, value: Buffer.from('v') }]),
      base([{ key: 'k', value: new Uint8Array([1, 2]) }]),
      base([{ ...m, headers: { a: 5 } }]),
      // kafkajs throws on a header without a value.
      base([{ ...m, headers: { a: null } }]),
      base([{ ...m, headers: { a: undefined } }]),
      base([{ ...m, headers: { a: ['x', null] } }]),
    ];
    const outcome = (request: ProduceRequest) =>
      bytesOf(request).then(
        (b) => ({ bytes: b.toString('hex') }),
        (err: unknown) => ({ error: String(err) }),
      );
    for (const a of others) {
      expect(encodeProduceRequest(a, parts)).toBeUndefined();
      expect(await outcome(ours(a))).toEqual(await outcome(kafkajsV3(a)));
    }
  });

  it('is what this process uses: kafkajs.ts swapped both in before kafkajs was loaded', () => {
    expect(kafkajsPatches).toEqual({ grouping: 'patched', produceEncoding: 'patched' });
    const inUse = require(KAFKAJS_FILES.produceV3) as unknown;
    expect(inUse).not.toBe(kafkajsV3);
    expect((require(KAFKAJS_FILES.grouping) as unknown) === groupMessagesPerPartition).toBe(true);
  });
});

describe('groupMessagesPerPartition', () => {
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
          const theirs = kafkajsGrouping(a);
          expect(mine).toEqual(theirs);
          expect(Object.keys(mine)).toEqual(Object.keys(theirs));
        },
      ),
      { numRuns: 500 },
    );
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

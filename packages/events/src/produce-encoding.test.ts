import { createRequire } from 'node:module';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { KAFKAJS_FILES, kafkajsParts, kafkajsPatches } from './kafkajs.js';
import {
  encodeProduceRequest,
  fastProduceRequest,
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
const parts = kafkajsParts();
const LongClass = parts.Long as unknown as { fromValue(v: unknown): unknown };
const ours = fastProduceRequest(kafkajsV3, parts);

/** The request payload's bytes, as kafkajs's protocol/request.js reads them (buf up to offset). */
async function bytesOf(request: ProduceRequest): Promise<Buffer> {
  const encoder = (await request.encode()) as { buf: Buffer; offset: number };
  return Buffer.from(encoder.buf.subarray(0, encoder.offset));
}

// 'binary': any code point, lone surrogates included (UTF-8 writes them as U+FFFD, 3 bytes).
const text = fc.oneof(fc.string({ maxLength: 40, unit: 'binary' }), fc.string({ maxLength: 40, unit: 'grapheme' }));
const bytes = fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a));
const keyOrValue = fc.oneof(bytes, text, fc.constant(null), fc.constant(undefined));
const headerValue = fc.oneof(text, bytes);
const headers = fc.option(
  fc.dictionary(
    fc.string({ minLength: 1, maxLength: 12, unit: 'binary' }),
    fc.oneof(headerValue, fc.array(headerValue, { maxLength: 3 })),
    {
      maxKeys: 4,
    },
  ),
  { nil: undefined },
);
// What kafkajs ignores may be there too: a null timestamp, a partition, anything else.
const message = fc.record(
  {
    key: keyOrValue,
    value: keyOrValue,
    headers,
    timestamp: fc.constant(null),
    partition: fc.nat(10),
    note: fc.string(),
  },
  { requiredKeys: ['key', 'value'] },
);
const args = fc.record({
  acks: fc.constantFrom(-1, 0, 1),
  timeout: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
  transactionalId: fc.option(text, { nil: undefined }),
  producerId: fc.oneof(
    fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map((v) => LongClass.fromValue(v.toString())),
    fc.integer({ min: -1, max: 2 ** 31 }),
    // kafkajs's idempotent producer holds the broker's id as a string.
    fc.bigInt({ min: -1n, max: 2n ** 63n - 1n }).map((v) => v.toString()),
  ),
  producerEpoch: fc.integer({ min: 0, max: 32_767 }),
  topicData: fc.array(
    fc.record({
      topic: fc.string({ minLength: 1, maxLength: 30, unit: 'binary' }),
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

  it('writes long records as kafkajs does: 3-byte lengths, 2-byte header counts, non-ASCII header keys', async () => {
    vi.spyOn(Date, 'now').mockReturnValue(1_795_000_000_000);
    const big = Buffer.alloc(20_000, 7);
    const headers = Object.fromEntries(Array.from({ length: 70 }, (_, i) => [`ключ-${i}-\u{1F600}`, `v${i}`]));
    const a: ProduceRequestArgs = {
      acks: -1,
      timeout: 30_000,
      transactionalId: 'tx-\u00e9',
      producerId: '4611686018427387904',
      producerEpoch: 3,
      topicData: [
        {
          topic: 'listings.v1',
          partitions: [
            { partition: 2, firstSequence: 2 ** 31 - 1, messages: [{ key: 'k\ud800', value: big, headers }] },
          ],
        },
      ],
    };
    expect(encodeProduceRequest(a, parts)).toBeDefined();
    expect(await bytesOf(ours(a))).toEqual(await bytesOf(kafkajsV3(a)));
  });

  it("is what kafkajs's produce v7 request (the one a current broker gets) encodes with in this process", async () => {
    expect(kafkajsPatches.produceEncoding).toBe('patched');
    vi.spyOn(Date, 'now').mockReturnValue(1_795_000_000_000);
    const a = {
      acks: -1,
      timeout: 30_000,
      producerId: '42',
      producerEpoch: 0,
      topicData: [
        {
          topic: 't',
          partitions: [
            { partition: 0, firstSequence: 0, messages: [{ key: Buffer.from('k'), value: Buffer.from('v') }] },
          ],
        },
      ],
    };
    const produce = require(KAFKAJS_FILES.produce) as {
      protocol(v: { version: number }): (args: object) => { request: ProduceRequest };
    };
    const encoder = (await produce.protocol({ version: 7 })(a).request.encode()) as { buf: Buffer; offset: number };
    expect(Buffer.from(encoder.buf.subarray(0, encoder.offset))).toEqual(await bytesOf(kafkajsV3(a)));
    // The one-pass encoder allocates exactly the request's size; kafkajs's Encoder grows by powers of two.
    expect(encoder.buf.length).toBe(encoder.offset);
    expect(encoder.offset & (encoder.offset - 1)).not.toBe(0);
  });
});

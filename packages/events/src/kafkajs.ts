/*
 * The one place kafkajs is loaded, with its producer's grouping and produce-request encoding
 * replaced by produce-encoding.ts's (same bytes; a fraction of the allocations).
 *
 * Both are swapped in Node's CommonJS module cache before kafkajs's own files first require
 * them: sendMessages.js keeps the grouping function it required when kafkajs was loaded, and the
 * produce v4-v7 requests keep the v3 factory they required on the first produce. So this module
 * requires kafkajs itself, after the swap, and the rest of the package imports kafkajs's values
 * from here (types still come from 'kafkajs'). A process that loaded kafkajs earlier some other
 * way keeps kafkajs's own code — slower, never wrong — and `kafkajsPatches` says so.
 */
import { createRequire } from 'node:module';
import type * as KafkaJs from 'kafkajs';
import {
  fastProduceRequest,
  groupMessagesPerPartition,
  type KafkajsParts,
  type ProduceRequest,
  type ProduceRequestArgs,
} from './produce-encoding.js';

const require = createRequire(import.meta.url);

/** kafkajs's files, by their deep paths (kafkajs has no `exports` map). */
export const KAFKAJS_FILES = {
  index: 'kafkajs',
  sendMessages: 'kafkajs/src/producer/sendMessages.js',
  grouping: 'kafkajs/src/producer/groupMessagesPerPartition.js',
  produceV3: 'kafkajs/src/protocol/requests/produce/v3/request.js',
  produceV4: 'kafkajs/src/protocol/requests/produce/v4/request.js',
  encoder: 'kafkajs/src/protocol/encoder.js',
  long: 'kafkajs/src/utils/long.js',
  crc32C: 'kafkajs/src/protocol/recordBatch/crc32C/index.js',
} as const;

/** patched: ours is used; too-late: kafkajs had already taken its own; missing: kafkajs's files moved. */
export type KafkajsPatch = 'patched' | 'too-late' | 'missing';

const loaded = (file: string): boolean => require.cache[require.resolve(file)] !== undefined;

/** Loads `file` and makes every later require of it return `replace(its exports)`. */
function swap(file: string, replace: (original: never) => unknown): void {
  const original: unknown = require(file);
  const cached = require.cache[require.resolve(file)];
  if (cached === undefined) throw new Error(`${file} is not in the module cache`);
  cached.exports = replace(original as never);
}

function install(): { grouping: KafkajsPatch; produceEncoding: KafkajsPatch } {
  let grouping: KafkajsPatch;
  let produceEncoding: KafkajsPatch;
  try {
    grouping = loaded(KAFKAJS_FILES.sendMessages) ? 'too-late' : 'patched';
    produceEncoding = loaded(KAFKAJS_FILES.produceV4) ? 'too-late' : 'patched';
    const parts: KafkajsParts = {
      Encoder: require(KAFKAJS_FILES.encoder) as KafkajsParts['Encoder'],
      Long: require(KAFKAJS_FILES.long) as KafkajsParts['Long'],
      crc32C: require(KAFKAJS_FILES.crc32C) as KafkajsParts['crc32C'],
    };
    if (grouping === 'patched') swap(KAFKAJS_FILES.grouping, () => groupMessagesPerPartition);
    if (produceEncoding === 'patched')
      swap(KAFKAJS_FILES.produceV3, (original: (args: ProduceRequestArgs) => ProduceRequest) =>
        fastProduceRequest(original, parts),
      );
  } catch {
    // A kafkajs whose files moved: its own code, and no reason to stop the service.
    return { grouping: 'missing', produceEncoding: 'missing' };
  }
  return { grouping, produceEncoding };
}

/** Whether this process's kafkajs runs with produce-encoding.ts's grouping and encoder. */
export const kafkajsPatches = install();

const kafkajs = require(KAFKAJS_FILES.index) as typeof KafkaJs;
export default kafkajs;
export const { Kafka, logLevel } = kafkajs;
export type Kafka = KafkaJs.Kafka;

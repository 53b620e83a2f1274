/*
 * The one place kafkajs is loaded, with its producer's grouping (partition-grouping.ts) and its
 * produce-request encoding (produce-encoding.ts) replaced: the same bytes, a fraction of the
 * allocations.
 *
 * Both are swapped in Node's CommonJS module cache before kafkajs's own files first require
 * them: sendMessages.js keeps the grouping function it required when kafkajs was loaded, and
 * the produce v4 and v5 requests keep the v3 factory they required on the first produce (v6 is
 * built on v5, v7 on v6). So this module requires kafkajs itself, after the swap, and the rest
 * of the package imports kafkajs's values from here (types still come from 'kafkajs'). A
 * process that loaded kafkajs some other way first keeps kafkajs's own code — slower, never
 * wrong — and `kafkajsPatches` says so; the services log it at start.
 */
import { createRequire } from 'node:module';
import type * as KafkaJs from 'kafkajs';
import { groupMessagesPerPartition } from './partition-grouping.js';
import {
  fastProduceRequest,
  type KafkajsParts,
  type ProduceRequest,
  type ProduceRequestArgs,
} from './produce-encoding.js';

const require = createRequire(import.meta.url);

/** The kafkajs the replacements were written and tested against (byte for byte, in tests). */
const KAFKAJS_VERSION = '2.2.4';

/** kafkajs's files, by their deep paths (kafkajs has no `exports` map). */
export const KAFKAJS_FILES = {
  index: 'kafkajs',
  packageJson: 'kafkajs/package.json',
  sendMessages: 'kafkajs/src/producer/sendMessages.js',
  grouping: 'kafkajs/src/producer/groupMessagesPerPartition.js',
  produce: 'kafkajs/src/protocol/requests/produce/index.js',
  produceV3: 'kafkajs/src/protocol/requests/produce/v3/request.js',
  produceV4: 'kafkajs/src/protocol/requests/produce/v4/request.js',
  produceV5: 'kafkajs/src/protocol/requests/produce/v5/request.js',
  encoder: 'kafkajs/src/protocol/encoder.js',
  long: 'kafkajs/src/utils/long.js',
  crc32C: 'kafkajs/src/protocol/recordBatch/crc32C/index.js',
} as const;

/**
 * patched: ours is used; too-late: kafkajs had already taken its own; other-version: a kafkajs
 * other than KAFKAJS_VERSION, left alone; missing: kafkajs's files are not where they were.
 */
export type KafkajsPatch = 'patched' | 'too-late' | 'other-version' | 'missing';

const loaded = (file: string): boolean => require.cache[require.resolve(file)] !== undefined;

/** Loads `file` and makes every later require of it return `replace(its exports)`. */
function swap<T>(file: string, replace: (original: T) => unknown): void {
  const original = require(file) as T;
  const cached = require.cache[require.resolve(file)];
  if (cached === undefined) throw new Error(`${file} is not in the module cache`);
  cached.exports = replace(original);
}

/** kafkajs's encoder class, Long and CRC-32C: what the one-pass encoder writes through. */
export function kafkajsParts(): KafkajsParts {
  return {
    Encoder: require(KAFKAJS_FILES.encoder) as KafkajsParts['Encoder'],
    Long: require(KAFKAJS_FILES.long) as KafkajsParts['Long'],
    crc32C: require(KAFKAJS_FILES.crc32C) as KafkajsParts['crc32C'],
  };
}

function installGrouping(): KafkajsPatch {
  try {
    // Evaluated again (a test's module reset): the cache already holds ours.
    if (require(KAFKAJS_FILES.grouping) === groupMessagesPerPartition) return 'patched';
    if (loaded(KAFKAJS_FILES.sendMessages)) return 'too-late';
    swap(KAFKAJS_FILES.grouping, () => groupMessagesPerPartition);
    return 'patched';
  } catch {
    return 'missing';
  }
}

function installProduceEncoding(): KafkajsPatch {
  try {
    if (loaded(KAFKAJS_FILES.produceV4) || loaded(KAFKAJS_FILES.produceV5)) return 'too-late';
    const parts = kafkajsParts();
    // fastProduceRequest returns a factory it made already as it is.
    swap(KAFKAJS_FILES.produceV3, (original: (args: ProduceRequestArgs) => ProduceRequest) =>
      fastProduceRequest(original, parts),
    );
    return 'patched';
  } catch {
    return 'missing';
  }
}

function install(): { grouping: KafkajsPatch; produceEncoding: KafkajsPatch } {
  let version: string;
  try {
    version = (require(KAFKAJS_FILES.packageJson) as { version: string }).version;
  } catch {
    return { grouping: 'missing', produceEncoding: 'missing' };
  }
  if (version !== KAFKAJS_VERSION) return { grouping: 'other-version', produceEncoding: 'other-version' };
  return { grouping: installGrouping(), produceEncoding: installProduceEncoding() };
}

/** Whether this process's kafkajs runs with partition-grouping.ts's and produce-encoding.ts's code. */
export const kafkajsPatches = install();

const kafkajs = require(KAFKAJS_FILES.index) as typeof KafkaJs;
export default kafkajs;
export const { Kafka, logLevel } = kafkajs;
export type Kafka = KafkaJs.Kafka;

/*
 * kafkajs 2.2.4 (its last release) builds a produce request with an allocation per field: every
 * record gets its own zeroed 512-byte Encoder, every varint an array and a Buffer, every
 * timestamp delta a BigInt-backed Long, and the record's options are copied with an object
 * spread followed by properties (V8's slow path in Node 20). The bytes are then copied four
 * more times on their way into the request (record → batch body → batch → partition → request).
 *
 * The materializer's outbox relay sends thousands of changes a transaction to two topics, and in
 * a cold start kafkajs's request encoding and grouping (partition-grouping.ts) take about a fifth
 * of its thread, much of the rest of it in the garbage collector; every poller spends a like share
 * of its produce path there.
 *
 * This module writes the same bytes in one pass into one buffer (sizes first, then the
 * records, then the CRC-32C of the batch body). Anything outside the shape producers send —
 * compression, a message timestamp, keys or values other than bytes or strings, headers other
 * than strings or bytes, arguments kafkajs would choke on — goes to kafkajs's own encoder, so
 * the result is what kafkajs would send or the error it would throw (produce-encoding.test.ts
 * compares them). kafkajs.ts installs it before kafkajs's first produce request.
 */

/** What kafkajs's produce v3 request factory takes (protocol/requests/produce/v3/request.js). */
export interface ProduceRequestArgs {
  acks: number;
  timeout: number;
  transactionalId?: string | null;
  producerId?: unknown;
  producerEpoch?: number | null;
  compression?: number | null;
  topicData: readonly {
    topic: string;
    partitions: readonly { partition: number; firstSequence?: number | null; messages: readonly ProduceMessage[] }[];
  }[];
}

interface ProduceMessage {
  key?: unknown;
  value?: unknown;
  headers?: unknown;
  timestamp?: unknown;
  [other: string]: unknown;
}

/** What the factory returns; `encode` resolves to a kafkajs Encoder. */
export interface ProduceRequest {
  apiKey: number;
  apiVersion: number;
  apiName: string;
  expectResponse: () => boolean;
  encode: () => Promise<unknown>;
}

/** The parts of kafkajs the encoder writes through, so its bytes are kafkajs's by construction. */
export interface KafkajsParts {
  /** protocol/encoder.js: the class `encode` must resolve to. */
  Encoder: new (initialSize?: number) => { buf: Buffer; offset: number };
  /** utils/long.js: how kafkajs reads a producer id (a Long, a number or a string). */
  Long: { fromValue(v: unknown): { getHighBits(): number; getLowBits(): number } };
  /** protocol/recordBatch/crc32C. */
  crc32C: (buffer: Buffer) => number;
}

/** The record batch's magic byte (v2 format) and the transactional attribute bit. */
const MAGIC_BYTE = 2;
const TRANSACTIONAL_MASK = 16;
/** Batch body header: attributes, last offset delta, two timestamps, producer id and epoch, first sequence, record count. */
const BODY_HEADER = 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4;
/** Partition leader epoch, magic byte and CRC, before the body. */
const BATCH_HEADER = 4 + 1 + 4;

const zigzag = (v: number): number => (v << 1) ^ (v >> 31);

function sizeOfVarInt(v: number): number {
  let u = zigzag(v);
  let bytes = 1;
  while ((u & 0xffffff80) !== 0) {
    bytes++;
    u >>>= 7;
  }
  return bytes;
}

function writeVarInt(buf: Buffer, at: number, v: number): number {
  let u = zigzag(v);
  while ((u & 0xffffff80) !== 0) {
    buf[at++] = (u & 0x7f) | 0x80;
    u >>>= 7;
  }
  buf[at++] = u & 0x7f;
  return at;
}

/** Byte length of a key, value or header value (null: none); undefined when kafkajs's own path must take it. */
function lengthOf(v: unknown): number | undefined {
  if (v === null || v === undefined) return -1;
  if (Buffer.isBuffer(v)) return v.length;
  if (typeof v === 'string') return Buffer.byteLength(v, 'utf8');
  return undefined;
}

function writeBytes(buf: Buffer, at: number, v: unknown, length: number): number {
  at = writeVarInt(buf, at, length);
  if (length <= 0) return at;
  return at + (typeof v === 'string' ? buf.write(v, at, length, 'utf8') : (v as Buffer).copy(buf, at));
}

/** A message's headers flattened as kafkajs flattens them (arrays to one header per value). */
function headerList(headers: unknown): { key: string; value: unknown }[] | undefined {
  if (headers === undefined) return [];
  if (headers === null || typeof headers !== 'object' || Array.isArray(headers)) return undefined;
  const list: { key: string; value: unknown }[] = [];
  for (const key of Object.keys(headers)) {
    const v = (headers as Record<string, unknown>)[key];
    for (const value of Array.isArray(v) ? v : [v]) {
      // kafkajs measures a header value with Buffer.byteLength, which throws on a missing one.
      if (value === null || value === undefined || lengthOf(value) === undefined) return undefined;
      list.push({ key, value });
    }
  }
  return list;
}

/** One record's layout: its body's length and its parts' lengths, measured once and written once. */
interface RecordPlan {
  body: number;
  keyLength: number;
  valueLength: number;
  headers: { key: string; keyLength: number; value: unknown; valueLength: number }[];
}

/** The records of one partition, or undefined when one of them needs kafkajs's own encoder. */
function planRecords(messages: readonly ProduceMessage[]): { plans: RecordPlan[]; bytes: number } | undefined {
  const plans: RecordPlan[] = [];
  let bytes = 0;
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as ProduceMessage;
    if (m.timestamp !== undefined && m.timestamp !== null) return undefined;
    const keyLength = lengthOf(m.key);
    const valueLength = lengthOf(m.value);
    const list = headerList(m.headers);
    if (keyLength === undefined || valueLength === undefined || list === undefined) return undefined;
    const headers = [];
    let headerBytes = sizeOfVarInt(list.length);
    for (const h of list) {
      const hk = Buffer.byteLength(h.key, 'utf8');
      const hv = lengthOf(h.value) as number;
      headers.push({ key: h.key, keyLength: hk, value: h.value, valueLength: hv });
      headerBytes += sizeOfVarInt(hk) + hk + sizeOfVarInt(hv) + hv;
    }
    // Attributes (one byte), the timestamp delta (always 0 here: one varlong byte), the offset delta.
    const body =
      1 +
      1 +
      sizeOfVarInt(i) +
      sizeOfVarInt(keyLength) +
      Math.max(keyLength, 0) +
      sizeOfVarInt(valueLength) +
      Math.max(valueLength, 0) +
      headerBytes;
    plans.push({ body, keyLength, valueLength, headers });
    bytes += sizeOfVarInt(body) + body;
  }
  return { plans, bytes };
}

/** One partition of the request: its own args and its records' plan. */
interface PlannedPartition {
  p: ProduceRequestArgs['topicData'][number]['partitions'][number];
  planned: { plans: RecordPlan[]; bytes: number };
}

/** One topic of the request, planned: its name's length, its partitions and its share of the request's bytes. */
interface PlannedTopic {
  topic: string;
  topicLength: number;
  partitions: PlannedPartition[];
  bytes: number;
}

/** A topic's partitions planned and its bytes summed, or undefined when it needs kafkajs's own encoder. */
function planTopic(t: ProduceRequestArgs['topicData'][number]): PlannedTopic | undefined {
  if (typeof t.topic !== 'string') return undefined;
  const topicLength = Buffer.byteLength(t.topic, 'utf8');
  let bytes = 2 + topicLength + 4;
  const partitions: PlannedPartition[] = [];
  for (const p of t.partitions) {
    if (p.firstSequence === null) return undefined;
    const planned = planRecords(p.messages);
    if (planned === undefined) return undefined;
    // Partition, record batch size; the batch: first offset, its length, then the batch itself.
    bytes += 4 + 4 + 8 + 4 + BATCH_HEADER + BODY_HEADER + planned.bytes;
    partitions.push({ p, planned });
  }
  return { topic: t.topic, topicLength, partitions, bytes };
}

/**
 * A partition's entry up to its batch's CRC: partition, record batch size, first offset, batch
 * length, partition leader epoch and magic byte. Returns where the CRC goes.
 */
function writeBatchStart(buf: Buffer, at: number, partition: number, recordBytes: number): number {
  const batchLength = BATCH_HEADER + BODY_HEADER + recordBytes;
  at = buf.writeInt32BE(partition, at);
  at = buf.writeInt32BE(8 + 4 + batchLength, at);
  at = buf.writeBigInt64BE(0n, at); // first offset
  at = buf.writeInt32BE(batchLength, at);
  at = buf.writeInt32BE(0, at); // partition leader epoch
  return buf.writeInt8(MAGIC_BYTE, at);
}

/**
 * A batch body's header: attributes, last offset delta, first and max timestamps, producer id
 * and epoch, first sequence, record count. Returns where the records go.
 */
function writeBodyHeader(
  buf: Buffer,
  at: number,
  attributes: number,
  timestamp: bigint,
  producerId: { getHighBits(): number; getLowBits(): number },
  producerEpoch: number,
  p: PlannedPartition['p'],
): number {
  at = buf.writeInt16BE(attributes, at);
  at = buf.writeInt32BE(p.messages.length - 1, at);
  at = buf.writeBigInt64BE(timestamp, at);
  at = buf.writeBigInt64BE(timestamp, at);
  at = buf.writeInt32BE(producerId.getHighBits(), at);
  at = buf.writeInt32BE(producerId.getLowBits(), at);
  at = buf.writeInt16BE(producerEpoch, at);
  at = buf.writeInt32BE(p.firstSequence ?? 0, at);
  return buf.writeInt32BE(p.messages.length, at);
}

/** A partition's records as planRecords laid them out. Returns the offset past the last one. */
function writeRecords(buf: Buffer, at: number, messages: readonly ProduceMessage[], plans: RecordPlan[]): number {
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as ProduceMessage;
    const r = plans[i] as RecordPlan;
    at = writeVarInt(buf, at, r.body);
    buf[at++] = 0; // attributes
    buf[at++] = 0; // timestamp delta 0, as a varlong
    at = writeVarInt(buf, at, i);
    at = writeBytes(buf, at, m.key, r.keyLength);
    at = writeBytes(buf, at, m.value, r.valueLength);
    at = writeVarInt(buf, at, r.headers.length);
    for (const h of r.headers) {
      at = writeVarInt(buf, at, h.keyLength);
      at += buf.write(h.key, at, h.keyLength, 'utf8');
      at = writeBytes(buf, at, h.value, h.valueLength);
    }
  }
  return at;
}

/**
 * A produce v3 request's payload (what kafkajs's `encode` builds) in one buffer, or undefined when
 * the request needs kafkajs's own encoder. `now` stands in for kafkajs's Date.now() per partition.
 */
export function encodeProduceRequest(
  args: ProduceRequestArgs,
  parts: KafkajsParts,
  now: () => number = Date.now,
): { buf: Buffer; offset: number } | undefined {
  // kafkajs's defaults apply to undefined only; a null it would choke on goes to it to choke on.
  if (args.compression !== undefined && args.compression !== 0) return undefined;
  if (args.producerId === null || args.producerEpoch === null) return undefined;
  const transactionalId = args.transactionalId ?? null;
  const producerId = parts.Long.fromValue(args.producerId === undefined ? -1 : args.producerId);
  const producerEpoch = args.producerEpoch ?? 0;
  const attributes = transactionalId ? TRANSACTIONAL_MASK : 0;

  // Pass 1: every partition's records planned and the request's size summed.
  const topics: PlannedTopic[] = [];
  let size = 2 + (transactionalId === null ? 0 : Buffer.byteLength(transactionalId, 'utf8')) + 2 + 4 + 4;
  for (const t of args.topicData) {
    const topic = planTopic(t);
    if (topic === undefined) return undefined;
    size += topic.bytes;
    topics.push(topic);
  }

  // Pass 2: the bytes, in kafkajs's order.
  const buf = Buffer.allocUnsafe(size);
  let at = 0;
  if (transactionalId === null) at = buf.writeInt16BE(-1, at);
  else {
    const n = Buffer.byteLength(transactionalId, 'utf8');
    at = buf.writeInt16BE(n, at);
    at += buf.write(transactionalId, at, n, 'utf8');
  }
  at = buf.writeInt16BE(args.acks, at);
  at = buf.writeInt32BE(args.timeout, at);
  at = buf.writeInt32BE(topics.length, at);
  for (const t of topics) {
    at = buf.writeInt16BE(t.topicLength, at);
    at += buf.write(t.topic, at, t.topicLength, 'utf8');
    at = buf.writeInt32BE(t.partitions.length, at);
    for (const { p, planned } of t.partitions) {
      const crcAt = writeBatchStart(buf, at, p.partition, planned.bytes);
      const bodyAt = crcAt + 4;
      // No message carries a timestamp (planRecords): first and max are the same "now".
      at = writeBodyHeader(buf, bodyAt, attributes, BigInt(now()), producerId, producerEpoch, p);
      at = writeRecords(buf, at, p.messages, planned.plans);
      buf.writeUInt32BE(parts.crc32C(buf.subarray(bodyAt, at)), crcAt);
    }
  }
  if (at !== size) throw new Error(`produce request: wrote ${at} bytes of ${size}`);
  const encoder = new parts.Encoder(0);
  encoder.buf = buf;
  encoder.offset = size;
  return encoder;
}

type RequestFactory = (args: ProduceRequestArgs) => ProduceRequest;

/** Marks a factory fastProduceRequest made, so a second install does not wrap it again. */
const FAST = Symbol.for('skinprices.fastProduceRequest');

/**
 * kafkajs's produce v3 request factory with `encode` taking the one-pass path when it can
 * (kafkajs's own `encode` otherwise). Produce v4-v7 requests are built on v3's.
 */
export function fastProduceRequest(original: RequestFactory, parts: KafkajsParts): RequestFactory {
  if (FAST in original) return original;
  const factory: RequestFactory = (args) => {
    const request = original(args);
    const own = request.encode;
    request.encode = async () => encodeProduceRequest(args, parts) ?? own();
    return request;
  };
  return Object.assign(factory, { [FAST]: true });
}

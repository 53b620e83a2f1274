/**
 * Kafka client construction plus producer and consumer helpers that speak our events.
 */
import { AppError } from '@skinprices/domain';
import type { Consumer, KafkaConfig, Producer, RecordMetadata } from 'kafkajs';
import { Kafka, logLevel } from './kafkajs.js';
import { eventKey, keyHeaders } from './keys.js';
import { patchKafkajsIdleLoop } from './idle-loop.js';
import { DefaultPartitioner, partitionOfKey } from './partitioner.js';
import type { TopicCodec } from './serde.js';
import type { EventKind, EventMap } from './types.js';

export interface KafkaOptions {
  /** Comma-separated host:port list. */
  brokers: string;
  clientId: string;
  /** kafkajs logs through this; pass a pino-backed function, or leave it at WARN to stderr. */
  logCreator?: KafkaConfig['logCreator'];
}

export function createKafka(options: KafkaOptions): Kafka {
  // Before any connection exists: kafkajs 2.2.4's idle connections spin (idle-loop.ts).
  patchKafkajsIdleLoop();
  return new Kafka({
    clientId: options.clientId,
    brokers: options.brokers
      .split(',')
      .map((b) => b.trim())
      .filter(Boolean),
    logLevel: logLevel.WARN,
    connectionTimeout: 5_000,
    requestTimeout: 30_000,
    retry: { initialRetryTime: 200, retries: 8 },
    ...(options.logCreator ? { logCreator: options.logCreator } : {}),
  });
}

export interface SendResult<K extends EventKind> {
  metadata: RecordMetadata[];
  sent: number;
  /** Events refused before sending (bad shape or price); nothing of them reached Kafka. */
  rejected: { event: EventMap[K]; error: AppError }[];
}

/** A keyed record on its way to one topic. */
interface OutRecord {
  key: Buffer;
  value: Buffer;
  partition?: number;
}

/**
 * The records of `sent` whose partition no successful response in `acked` names, each with its
 * partition set (so a resend goes exactly there). See EventProducer.send for why this happens.
 */
export function unacknowledged(
  sent: readonly OutRecord[],
  acked: readonly RecordMetadata[],
  numPartitions: number,
): OutRecord[] {
  const ok = new Set(acked.filter((m) => m.errorCode === 0).map((m) => m.partition));
  const out: OutRecord[] = [];
  for (const r of sent) {
    const partition = r.partition ?? partitionOfKey(r.key, numPartitions);
    if (!ok.has(partition)) out.push({ ...r, partition });
  }
  return out;
}

/** How many times one send may find partitions unacknowledged and resend them before it fails. */
const MAX_RESENDS = 20;

/**
 * Bytes of keys and values per produce request. kafkajs puts all of a request's records for one
 * partition into one record batch, and the broker refuses a batch over message.max.bytes (1 MiB by
 * default): a marketplace whose whole catalogue arrives at the end of its cycle (some 30k listings
 * at full size, one send) would be refused every cycle. Half the limit leaves room for the
 * batch's own overhead whatever the partition spread.
 */
export const MAX_REQUEST_BYTES = 512 * 1024;

/** Consecutive runs of `messages` of at most `maxBytes` of keys and values each (one message may exceed it alone). */
export function chunkBySize<M extends { key: Buffer; value: Buffer }>(messages: readonly M[], maxBytes: number): M[][] {
  const chunks: M[][] = [];
  let current: M[] = [];
  let bytes = 0;
  for (const m of messages) {
    const size = m.key.length + m.value.length;
    if (current.length > 0 && bytes + size > maxBytes) {
      chunks.push(current);
      current = [];
      bytes = 0;
    }
    current.push(m);
    bytes += size;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

/**
 * Idempotent producer: acks from all in-sync replicas and one request in flight per broker, as
 * KIP-98 requires (kafkajs does not enforce the in-flight limit itself). Kafka de-duplicates a
 * retried request of the same producer session; a session kafkajs re-initialises after a broker
 * failure (a new producer id) can write a batch again, which consumers absorb (they apply by key
 * and observed_at, sales by sale_id).
 */
export class EventProducer {
  private readonly producer: Producer;
  /** Partition counts per topic, as the partitioner last saw them. */
  private readonly partitionCounts = new Map<string, number>();

  constructor(kafka: Kafka) {
    const counts = this.partitionCounts;
    this.producer = kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
      createPartitioner: () => {
        const partition = DefaultPartitioner();
        return (args) => {
          counts.set(args.topic, args.partitionMetadata.length);
          return partition(args);
        };
      },
      // Retrying without limit is what keeps the idempotent producer exactly-once (kafkajs warns
      // otherwise); while Kafka is away a send waits, and the caller's cycle waits with it.
      retry: { retries: Number.MAX_SAFE_INTEGER, initialRetryTime: 300, maxRetryTime: 30_000 },
    });
  }

  async connect(): Promise<void> {
    try {
      await this.producer.connect();
    } catch (err) {
      throw new AppError('kafka_unavailable', `producer could not connect: ${String(err)}`, { cause: err });
    }
  }

  async disconnect(): Promise<void> {
    await this.producer.disconnect();
  }

  /** Encodes and sends events keyed by marketplace + item identity; bad events are returned, not sent. */
  async send<K extends EventKind>(codec: TopicCodec<K>, events: readonly EventMap[K][]): Promise<SendResult<K>> {
    const rejected: SendResult<K>['rejected'] = [];
    const messages: { key: Buffer; value: Buffer; headers?: Record<string, string> }[] = [];
    for (const event of events) {
      try {
        // The key as bytes once: the partitioner and the record encoder would each convert a string.
        const headers = keyHeaders(codec.kind, event);
        messages.push({
          key: Buffer.from(eventKey(codec.kind, event)),
          value: codec.encode(event),
          ...(headers ? { headers } : {}),
        });
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        rejected.push({ event, error: err });
      }
    }
    if (messages.length === 0) return { metadata: [], sent: 0, rejected };
    try {
      // kafkajs tracks a send's progress per broker, not per partition: when a broker dies
      // mid-send, its partitions move to a broker that already answered for its own, the retry
      // finds nothing left to send, and send() resolves without those records (make chaos kills
      // brokers mid-send and would lose them). So every partition must be named
      // by a successful response; the records of any other are sent again, to that partition.
      // Requests of bounded size, one after another: with one request in flight the order of
      // the records per partition is the order of the events, as in one request.
      const metadata: RecordMetadata[] = [];
      for (const chunk of chunkBySize(messages, MAX_REQUEST_BYTES)) {
        let pending: OutRecord[] = chunk;
        for (let resend = 0; pending.length > 0; resend++) {
          if (resend > MAX_RESENDS)
            throw new Error(`${pending.length} records still unacknowledged after ${MAX_RESENDS} resends`);
          const got = await this.producer.send({ topic: codec.topic, acks: -1, messages: pending });
          metadata.push(...got.filter((m) => m.errorCode === 0));
          const n = this.partitionCounts.get(codec.topic);
          pending = n === undefined ? [] : unacknowledged(pending, got, n);
        }
      }
      return { metadata, sent: messages.length, rejected };
    } catch (err) {
      throw new AppError(
        'kafka_unavailable',
        `sending ${messages.length} records to ${codec.topic} failed: ${String(err)}`,
        {
          cause: err,
        },
      );
    }
  }

  /** A null value under `key`: on a compacted topic it removes the key's state for good. */
  async tombstone(topic: string, key: string): Promise<void> {
    await this.producer.send({ topic, acks: -1, messages: [{ key, value: null }] });
  }
}

export interface DecodedMessage<K extends EventKind> {
  topic: string;
  partition: number;
  offset: string;
  key: string | null;
  /** null for a tombstone. */
  value: EventMap[K] | null;
  /** Set when the record could not be decoded; the handler decides (dead-letter, stop). */
  error?: AppError;
}

export interface ConsumedBatch<K extends EventKind> {
  topic: string;
  partition: number;
  messages: DecodedMessage<K>[];
  /**
   * The partition's high watermark when the batch was fetched (the offset the next record will
   * get). A consumer that keeps its own offsets can tell from it that a stored position is past
   * the end of this log (another cluster, a recreated topic). @default unknown (hand-built batches)
   */
  highWatermark?: string;
  /**
   * The last record's timestamp (ms since the epoch: its producer's CreateTime), to tell how late
   * a consumer is. @default unknown (hand-built batches, an empty batch)
   */
  lastTimestamp?: number;
  /** The first record's timestamp (CreateTime, ms): how long the batch's oldest record waited. */
  firstTimestamp?: number;
}

export interface ConsumerOptions {
  groupId: string;
  /** Where a group without committed offsets starts. @default true */
  fromBeginning?: boolean;
  /**
   * Commit offsets to Kafka after each handled batch. The materializer leaves this on, but as a
   * starting hint only: its offsets of record live in PostgreSQL (consumer_offsets, written in
   * the batch's transaction) and decide what is new. @default true
   */
  autoCommit?: boolean;
  /**
   * How long the group waits for a silent member (a killed process) before giving its
   * partitions to another. @default 30000 (the broker's minimum is 6000)
   */
  sessionTimeoutMs?: number;
  /**
   * Batches of this many partitions handled at once (kafkajs partitionsConsumedConcurrently);
   * one partition's batches are still handled one after another, in offset order. @default 1
   */
  concurrency?: number;
  /**
   * The most a fetch takes of one partition (kafkajs maxBytesPerPartition), so the largest batch
   * the handler gets when a partition is behind; a partition that is not behind gives what it
   * has, whatever this is. @default 1 MiB (kafkajs's)
   */
  maxBytesPerPartition?: number;
}

/** A consumer of one or more topics that hands the handler decoded batches of one partition each. */
export class EventConsumer<K extends EventKind> {
  private readonly consumer: Consumer;
  private readonly byTopic: Map<string, TopicCodec<K>>;

  constructor(
    kafka: Kafka,
    codecs: readonly TopicCodec<K>[],
    private readonly options: ConsumerOptions,
  ) {
    const sessionTimeout = options.sessionTimeoutMs ?? 30_000;
    this.consumer = kafka.consumer({
      groupId: options.groupId,
      allowAutoTopicCreation: false,
      sessionTimeout,
      heartbeatInterval: Math.max(500, Math.floor(sessionTimeout / 6)),
      ...(options.maxBytesPerPartition === undefined
        ? {}
        : {
            maxBytesPerPartition: options.maxBytesPerPartition,
            // A fetch answers for every partition the broker leads; kafkajs's own cap of 10 MiB
            // would otherwise cut a few behind partitions to less than they may each give.
            maxBytes: Math.max(10 * 1024 * 1024, 4 * options.maxBytesPerPartition),
          }),
    });
    this.byTopic = new Map(codecs.map((c) => [c.topic, c]));
  }

  get raw(): Consumer {
    return this.consumer;
  }

  async start(handler: (batch: ConsumedBatch<K>) => Promise<void>): Promise<void> {
    await this.consumer.connect();
    await this.consumer.subscribe({
      topics: [...this.byTopic.keys()],
      fromBeginning: this.options.fromBeginning ?? true,
    });
    const autoCommit = this.options.autoCommit ?? true;
    await this.consumer.run({
      autoCommit,
      partitionsConsumedConcurrently: this.options.concurrency ?? 1,
      eachBatchAutoResolve: false,
      eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale, commitOffsetsIfNecessary }) => {
        const codec = this.byTopic.get(batch.topic);
        if (!codec || !isRunning() || isStale()) return;
        const messages: DecodedMessage<K>[] = [];
        for (const m of batch.messages) {
          // One literal of one shape per record, not `{ ...base, value }` (V8's slow path for a
          // spread followed by more properties, paid on every record).
          const message: DecodedMessage<K> = {
            topic: batch.topic,
            partition: batch.partition,
            offset: m.offset,
            key: m.key?.toString('utf8') ?? null,
            value: null,
          };
          messages.push(message);
          if (m.value === null) continue;
          try {
            message.value = await codec.decode(m.value);
          } catch (err) {
            if (!(err instanceof AppError) || err.retryable) throw err;
            message.error = err;
          }
        }
        const lastTimestamp = Number(batch.messages.at(-1)?.timestamp);
        const firstTimestamp = Number(batch.messages[0]?.timestamp);
        await handler({
          topic: batch.topic,
          partition: batch.partition,
          messages,
          highWatermark: batch.highWatermark,
          ...(Number.isFinite(lastTimestamp) ? { lastTimestamp } : {}),
          ...(Number.isFinite(firstTimestamp) ? { firstTimestamp } : {}),
        });
        // A revoked partition (isStale) must not get its offset moved by a batch that finished late.
        if (!isRunning() || isStale()) return;
        const last = batch.messages.at(-1);
        if (last) resolveOffset(last.offset);
        if (autoCommit) await commitOffsetsIfNecessary();
        await heartbeat();
      },
    });
  }

  async stop(): Promise<void> {
    await this.consumer.disconnect();
  }
}

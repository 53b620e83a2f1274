/*
 * The materializer: consumes every poller topic (listings, buy orders, float-ranged, float buy
 * orders, sales, the store's book, history, poll-cycle markers) and applies each batch in one
 * PostgreSQL transaction with its offsets (the ingest path, apply.ts), several partitions at once
 * (each partition's batches stay in order, and each owns its offset row), on two consumers: the
 * listings lane (listings and poll-cycle markers, `listingsConcurrency`) and the other kinds'
 * lane (`concurrency`), so a price never waits for a round of history or sales batches. After
 * each commit it pokes the derive path (deriver.ts), which applies the poll-cycle markers whose
 * data is in, in transactions of its own.
 *
 *   created ──start()──▶ migrating ──▶ verifying ──▶ consuming ──stop()──▶ stopping ──▶ stopped
 *                                         │           │  ▲
 *                                         │ batch fails│  │retry after backoff (kafkajs re-delivers the batch)
 *                                         │           ▼  │
 *                                         │         erroring
 *                                         ▼           │
 *                   offsets_mismatch ──▶ failed ◀─────┘ (stopped; start() rejects, or onFatal hears it)
 *
 * verifying: the stored offsets are compared with the Kafka cluster before anything is consumed
 * (offsets.ts): a row bound to another cluster, or a next offset past its partition's end, would
 * silently skip records, so the materializer refuses to start with a non-retryable
 * `offsets_mismatch` naming each row. Rows stored before migration 0004 are adopted (bound to
 * this cluster) if they fit. The same check runs on every partition assignment before the
 * assignment's first batch, and each batch's transaction refuses a row bound to another cluster.
 *
 * A batch refused for a record's content never reaches `erroring`: the record is isolated and
 * dead-lettered inside the batch's transaction (poison.ts) and the partition moves on. Only
 * retryable errors (connection, deadlock, shutdown) roll back and let kafkajs redeliver.
 *
 * Kafka's committed offsets are only a starting hint (committed after our transaction);
 * PostgreSQL's consumer_offsets decide what is new. Offsets are resolved only after the
 * transaction commits, and not at all for a partition revoked meanwhile (the consumer helper
 * checks isStale): the new owner starts from PostgreSQL's offsets either way.
 */
import type { AppError } from '@skinprices/domain';
import { EventConsumer, topicFor, type ConsumedBatch, type EventSerde, type TopicCodec } from '@skinprices/events';
import type { Logger } from '@skinprices/runtime';
import { migrate, type Pool, type PoolClient } from '@skinprices/store';
import type { Admin, Kafka } from 'kafkajs';
import { schemaLockSql } from './lock.js';
import { applyBatch, MATERIALIZED_KINDS, type ApplyOptions, type ApplyResult, type MaterializedKind } from './apply.js';
import { Deriver, type DeriveReport } from './deriver.js';
import { otherKindsGroup } from './groups.js';
import { Heartbeat } from './heartbeat.js';
import type { MaterializerMetrics } from './metrics.js';
import { advanceToLogStart, clusterIdOf, isOffsetsMismatch, seedKafkaGroup, verifyStoredOffsets } from './offsets.js';
import { ListingsFirst, recordsLeft, type PriorityOptions } from './priority.js';
import { ServedListings } from './served.js';

export type MaterializerState =
  'created' | 'migrating' | 'verifying' | 'consuming' | 'erroring' | 'stopping' | 'stopped' | 'failed';

export interface MaterializerOptions {
  groupId: string;
  topicSuffix: string;
  migrationsDir: string;
  /** @default 30000 */
  sessionTimeoutMs?: number;
  /** Write committed changes to the outbox. @default true (off while replaying) */
  outbox?: boolean;
  /** Days of hourly history kept. @default 100 */
  hourlyRetentionDays?: number;
  /**
   * The other kinds' partitions applied at once (their lane's kafkajs
   * partitionsConsumedConcurrently), each in its own transaction on its own connection: the pool
   * needs this and `listingsConcurrency` together plus the derive path's, the schema lock's and
   * the heartbeat's; at least one batch per lane whatever the pool. @default 2
   */
  concurrency?: number;
  /** Listings and poll-cycle partitions applied at once, on the listings lane's consumer. @default 3 */
  listingsConcurrency?: number;
  /**
   * The largest batch a behind partition is applied in, in bytes of records (one fetch of it).
   * @default 1 MiB (kafkajs's): ~2,400 listings a batch
   */
  maxBatchBytes?: number;
  /** How often the derive path looks for ready markers without a poke. @default 1000 */
  deriveIntervalMs?: number;
  /** The derive path's pause after a recomputation, in multiples of its time (deriver.ts). @default 2 */
  recomputeCostFactor?: number;
  /** Per `topic:partition`, the first offset not to apply. @default none */
  stopAt?: ReadonlyMap<string, bigint>;
  /**
   * Write this process's row in materializer_heartbeat (state, lag, last batch) this often.
   * @default none: no heartbeat (replays, embedded tests)
   */
  heartbeatIntervalMs?: number;
  /**
   * While the listings topic is behind, the other data topics wait (priority.ts). @default none:
   * every topic is fetched as it comes (replays, tests that do not ask for it)
   */
  listingsFirst?: PriorityOptions;
  /**
   * Listings rows held in memory to drop repeats before SQL (served.ts), over all partitions;
   * 0 holds none (every record written). @default 2,000,000
   */
  servedMaxRows?: number;
}

/** What every batch's handling shares, made once by start(). */
interface BatchDeps {
  kindOf: ReadonlyMap<string, MaterializedKind>;
  applyOptions: ApplyOptions;
  deriver: Deriver;
}

/** What a listener hears after each committed batch; `ms` is the time from receipt to commit. */
export type BatchReport = ApplyResult & {
  topic: string;
  partition: number;
  ms: number;
  /** From the batch's first record's produce to the batch reaching the ingest path (unknown: absent). */
  waitMs?: number;
  /** Of `ms`, the wait for the assignment's listings rows to be loaded (served.ts). */
  loadMs?: number;
};

/**
 * One consumer of the materializer: the listings lane or the other kinds' lane. Each has its own
 * fetch loop, so a listings batch never waits for a fetch round of history or sales batches to
 * end (kafkajs fetches a broker's partitions again only when every batch of its last fetch has
 * been handled: in a burst a listings batch would wait seconds behind them).
 */
interface Lane {
  groupId: string;
  consumer: EventConsumer<MaterializedKind>;
  topics: readonly string[];
  assignment: Record<string, number[]> | undefined;
  kafkaMemberId: string | undefined;
  /** The check of the lane's current assignment's stored offsets; each of its batches waits for it. */
  verifying: Promise<void>;
  /** Its last batch failed (and kafkajs retries it). */
  erroring: boolean;
}

/** The topics each lane reads: listings and markers on the listings lane, the others on the other. */
interface LaneTopics {
  listings: string;
  markers: string;
  others: string[];
}

/** What the listings lane's assignments are told to: the served rows load their partitions (served.ts). */
interface ListingsAssignment {
  topic: string;
  /** How many partitions the listings topic has (start() asks Kafka once). */
  partitions: number;
  served: ServedListings;
}

export class Materializer {
  state: MaterializerState = 'created';
  private lanes: Lane[] = [];
  private lock: PoolClient | undefined;
  private readonly listeners = new Set<(r: BatchReport) => void>();
  private deriver: Deriver | undefined;
  private readonly deriveListeners = new Set<(r: DeriveReport) => void>();
  private heartbeat: Heartbeat | undefined;
  private lastBatchAt: Date | undefined;
  private admin: Admin | undefined;
  private clusterId: string | undefined;
  private readonly fatalListeners = new Set<(err: AppError) => void>();
  /** Why the materializer stopped by itself (state `failed`). */
  failure: AppError | undefined;
  /** Pauses the other data topics while the listings are behind (options.listingsFirst). */
  private priority: ListingsFirst | undefined;
  /** Per partition of the assignment (`topic:partition`), the records its last batch left unread. */
  private readonly unread = new Map<string, number>();
  private priorityTimer: NodeJS.Timeout | undefined;
  /** The listings rows this process serves, per partition it owns (served.ts); made by start(). */
  private served: ServedListings | undefined;

  constructor(
    private readonly options: MaterializerOptions,
    private readonly deps: {
      kafka: Kafka;
      serde: EventSerde;
      pool: Pool;
      logger: Logger;
      /** @default none: nothing is measured */
      metrics?: MaterializerMetrics;
    },
  ) {}

  /** Listings rows held in memory to recognise repeats (served.ts). */
  get servedRows(): number {
    return this.served?.rows() ?? 0;
  }

  /** Whether the other data topics are paused behind the listings, and how often they were. */
  get listingsFirst(): { phase: string; pauses: number; pausedMs: number } | undefined {
    const p = this.priority;
    return p && { phase: p.phase, ...p.stats };
  }

  /** This process's row in materializer_heartbeat, if it writes one. */
  get memberId(): string | undefined {
    return this.heartbeat?.memberId;
  }

  onBatch(listener: (r: BatchReport) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Records this process's partitions (of `topic`, or all) have left to read, as their last batches saw it. */
  private unreadRecords(topic?: string): number {
    let records = 0;
    for (const [key, n] of this.unread) if (topic === undefined || key.startsWith(`${topic}:`)) records += n;
    return records;
  }

  /** Hears each derive transaction that did something: markers, second look, recomputation (deriver.ts). */
  onDerive(listener: (r: DeriveReport) => void): () => void {
    this.deriveListeners.add(listener);
    return () => this.deriveListeners.delete(listener);
  }

  /** Resolves once every marker whose data is in has been applied (replays, tests). */
  async settle(): Promise<void> {
    await this.deriver?.settle();
  }

  /**
   * Hears the error that stopped a running materializer by itself (stored offsets that turned
   * out not to match the cluster on an assignment or a batch); the process should exit non-zero.
   * A mismatch found by start() rejects start() instead.
   */
  onFatal(listener: (err: AppError) => void): () => void {
    this.fatalListeners.add(listener);
    return () => this.fatalListeners.delete(listener);
  }

  /**
   * Runs `migrating` and `verifying` (the diagram above), then `consuming`: both lanes and the
   * derive path started.
   */
  async start(): Promise<void> {
    const { metrics } = this.deps;
    await this.lockSchema();
    this.state = 'migrating';
    await this.applyMigrations();
    const { codecs, kindOf } = await this.loadCodecs();
    this.state = 'verifying';
    const { admin, clusterId } = await this.verifyAtStart(kindOf);
    const topics = laneTopics(kindOf, this.options.topicSuffix);
    const { listingsLane, otherLane, listings } = await this.makeLanes(admin, codecs, topics);
    this.startPriority(topics, otherLane);
    for (const l of this.lanes) {
      await this.seedGroup(admin, l);
      this.watchAssignments(l, l === listingsLane ? listings : undefined);
    }
    for (const topic of kindOf.keys())
      for (const reason of ['decode', 'sql']) metrics?.deadLetters.inc({ topic, reason }, 0);
    this.startHeartbeat();
    const applyOptions = this.applyOptions(clusterId, listings.served);
    const deriver = this.startDeriver(topics.listings);
    this.state = 'consuming';
    await this.startLanes({ kindOf, applyOptions, deriver });
  }

  /** Takes the schema lock (shared) on a connection of its own (this.lock). */
  private async lockSchema(): Promise<void> {
    // Held for the process's lifetime; a running replay holds it exclusively, and we wait for it.
    this.lock = await this.deps.pool.connect();
    await this.lock.query(`SELECT pg_advisory_lock_shared(${schemaLockSql('current_schema()')})`);
  }

  /** Applies the migrations not yet applied to the schema. */
  private async applyMigrations(): Promise<void> {
    const { pool, logger } = this.deps;
    const mig = await migrate(pool, this.options.migrationsDir);
    if (mig.applied.length > 0) logger.info({ applied: mig.applied.map((m) => m.version) }, 'migrations applied');
  }

  /** Every materialized kind's codec (its topic's schemas registered), and the kind each topic carries. */
  private async loadCodecs(): Promise<{
    codecs: TopicCodec<MaterializedKind>[];
    kindOf: Map<string, MaterializedKind>;
  }> {
    const codecs: TopicCodec<MaterializedKind>[] = [];
    const kindOf = new Map<string, MaterializedKind>();
    for (const kind of MATERIALIZED_KINDS) {
      const codec = await this.deps.serde.codec(`${topicFor(kind).name}${this.options.topicSuffix}`, kind);
      codecs.push(codec as TopicCodec<MaterializedKind>);
      kindOf.set(codec.topic, kind);
    }
    return { codecs, kindOf };
  }

  /**
   * Connects the admin client and checks every stored offset of the consumed topics against the
   * cluster. On failure it lets go of the lock and the admin client and rethrows: `failed` on a
   * mismatch, `stopped` otherwise.
   */
  private async verifyAtStart(
    kindOf: ReadonlyMap<string, MaterializedKind>,
  ): Promise<{ admin: Admin; clusterId: string }> {
    try {
      this.admin = this.deps.kafka.admin();
      await this.admin.connect();
      this.clusterId = await clusterIdOf(this.admin);
      // Every stored partition of every topic consumed, before the consumer exists: nothing is
      // fetched, let alone skipped, until the offsets are known to count this cluster's records.
      await this.verify(Object.fromEntries([...kindOf.keys()].map((t) => [t, []])));
      return { admin: this.admin, clusterId: this.clusterId };
    } catch (err) {
      await this.release();
      this.state = isOffsetsMismatch(err) ? 'failed' : 'stopped';
      if (isOffsetsMismatch(err)) this.failure = err;
      throw err;
    }
  }

  /**
   * Makes both lanes (this.lanes, the listings lane first) and the listings rows this process
   * serves (this.served); no consumer is started yet.
   */
  private async makeLanes(
    admin: Admin,
    codecs: readonly TopicCodec<MaterializedKind>[],
    topics: LaneTopics,
  ): Promise<{ listingsLane: Lane; otherLane: Lane; listings: ListingsAssignment }> {
    const { listingsSlots, otherSlots } = this.slots();
    const listingsLane = this.newLane(this.options.groupId, [topics.listings, topics.markers], listingsSlots, codecs);
    const [listingsMeta] = (await admin.fetchTopicMetadata({ topics: [topics.listings] })).topics;
    const partitions = listingsMeta?.partitions.length ?? 0;
    const served = this.newServed(topics.listings);
    this.served = served;
    const otherLane = this.newLane(otherKindsGroup(this.options.groupId), topics.others, otherSlots, codecs);
    this.lanes = [listingsLane, otherLane];
    return { listingsLane, otherLane, listings: { topic: topics.listings, partitions, served } };
  }

  /** The batches each lane applies at once. */
  private slots(): { listingsSlots: number; otherSlots: number } {
    // Never more batches than connections left beside the schema lock, the derive path and one
    // for the heartbeat or a reader: a batch waiting for a connection holds up its partition.
    const slots = Math.max(2, (this.deps.pool.options.max ?? 10) - 3);
    const listingsSlots = Math.max(1, Math.min(this.options.listingsConcurrency ?? 3, slots - 1));
    const otherSlots = Math.max(1, Math.min(this.options.concurrency ?? 2, slots - listingsSlots));
    return { listingsSlots, otherSlots };
  }

  /** A lane of `topics` in Kafka group `groupId`, its consumer made but not started. */
  private newLane(
    groupId: string,
    topics: readonly string[],
    concurrency: number,
    codecs: readonly TopicCodec<MaterializedKind>[],
  ): Lane {
    return {
      groupId,
      consumer: new EventConsumer(
        this.deps.kafka,
        codecs.filter((c) => topics.includes(c.topic)),
        {
          groupId,
          fromBeginning: true,
          concurrency,
          ...(this.options.sessionTimeoutMs ? { sessionTimeoutMs: this.options.sessionTimeoutMs } : {}),
          ...(this.options.maxBatchBytes ? { maxBytesPerPartition: this.options.maxBatchBytes } : {}),
        },
      ),
      topics,
      assignment: undefined,
      kafkaMemberId: undefined,
      verifying: Promise.resolve(),
      erroring: false,
    };
  }

  /** The listings rows held in memory (served.ts), each load logged and measured. */
  private newServed(listingsTopic: string): ServedListings {
    const { logger, metrics } = this.deps;
    const served = new ServedListings({
      groupId: this.options.groupId,
      topic: listingsTopic,
      maxRows: this.options.servedMaxRows ?? 2_000_000,
      onLoad: (r) => {
        if (r.error)
          logger.warn(
            { err: r.error, partitions: r.partitions },
            'listings rows not loaded: every record of these partitions is written',
          );
        else logger.info({ partitions: r.partitions, rows: r.rows, ms: Math.round(r.ms) }, 'listings rows loaded');
        metrics?.servedRows.set(served.rows());
      },
    });
    return served;
  }

  /** With options.listingsFirst, pauses the other lane's data topics while the listings are behind. */
  private startPriority(topics: LaneTopics, otherLane: Lane): void {
    const { metrics } = this.deps;
    if (!this.options.listingsFirst) return;
    const priority = new ListingsFirst(
      topics.listings,
      topics.others,
      otherLane.consumer.raw,
      this.options.listingsFirst,
    );
    this.priority = priority;
    // The pause's time limit holds when no listings batch comes to end it.
    this.priorityTimer = setInterval(() => {
      priority.tick();
      metrics?.listingsFirst.set(priority.phase === 'listings-first' ? 1 : 0);
      metrics?.listingsFirstPausedSeconds.set(priority.stats.pausedMs / 1000);
    }, 1_000);
    this.priorityTimer.unref();
  }

  /** Starts a new Kafka group of the lane at the stored offsets (offsets.ts seedKafkaGroup). */
  private async seedGroup(admin: Admin, l: Lane): Promise<void> {
    const { pool, logger } = this.deps;
    try {
      const seeded = await seedKafkaGroup(pool, admin, {
        groupId: this.options.groupId,
        kafkaGroup: l.groupId,
        topics: l.topics,
      });
      if (seeded > 0)
        logger.info({ group: l.groupId, partitions: seeded }, "a new Kafka group starts at the read model's offsets");
    } catch (err) {
      // Only where the lane starts reading: without it, it reads its topics from their start and
      // the stored offsets skip what was applied. Refused also when another process of the group
      // joined it first (a scale-out's normal start).
      logger.info(
        { err: String(err), group: l.groupId },
        "Kafka group not seeded with the stored offsets; it starts where Kafka says (the log's start if nothing is committed)",
      );
    }
  }

  /**
   * Follows the lane's assignments: each one is recorded, told to the priority (and, on the
   * listings lane, `listings`, to the served rows), and its stored offsets checked.
   */
  private watchAssignments(l: Lane, listings: ListingsAssignment | undefined): void {
    const raw = l.consumer.raw;
    raw.on(raw.events.GROUP_JOIN, ({ payload }) => {
      l.assignment = payload.memberAssignment;
      l.kafkaMemberId = payload.memberId;
      if (listings) {
        const partitions = payload.memberAssignment[listings.topic] ?? [];
        this.priority?.assigned(partitions);
        listings.served.assign(() => this.deps.pool.connect(), partitions, listings.partitions);
      } else this.priority?.tell();
      for (const key of [...this.unread.keys()])
        if (l.topics.includes(key.slice(0, key.lastIndexOf(':')))) this.unread.delete(key);
      // Emitted after the group's sync, before the first fetch of the new assignment: every batch
      // awaits this check, so no partition of the assignment is applied before its offsets are.
      // A mismatch stops the materializer even if no batch comes; other failures (Kafka or
      // PostgreSQL away) are retried by the next batch (assignmentVerified).
      l.verifying = this.verify(assigned(payload.memberAssignment));
      l.verifying.catch((err: unknown) => {
        if (isOffsetsMismatch(err)) this.fail(err);
      });
    });
  }

  /** With options.heartbeatIntervalMs, writes this process's row in materializer_heartbeat. */
  private startHeartbeat(): void {
    const { pool, kafka, logger, metrics } = this.deps;
    if (!this.options.heartbeatIntervalMs) return;
    this.heartbeat = new Heartbeat(
      { groupId: this.options.groupId, intervalMs: this.options.heartbeatIntervalMs },
      {
        pool,
        kafka,
        logger,
        ...(metrics ? { metrics } : {}),
        source: {
          state: () => this.state,
          assignment: () => this.assignment(),
          // Both lanes' member ids, space-separated (one per Kafka group: groups.ts).
          kafkaMemberId: () => {
            const ids = this.lanes.flatMap((l) => (l.kafkaMemberId ? [l.kafkaMemberId] : []));
            return ids.length > 0 ? ids.join(' ') : undefined;
          },
          lastBatchAt: () => this.lastBatchAt,
        },
      },
    );
    this.heartbeat.start();
  }

  /** What every batch's transaction is applied with (apply.ts). */
  private applyOptions(clusterId: string, served: ServedListings): ApplyOptions {
    return {
      groupId: this.options.groupId,
      outbox: this.options.outbox ?? true,
      hourlyRetentionDays: this.options.hourlyRetentionDays ?? 100,
      clusterId,
      ...(this.options.stopAt ? { stopAt: this.options.stopAt } : {}),
      served,
    };
  }

  /** Starts the derive path (this.deriver), its transactions measured and told to onDerive listeners. */
  private startDeriver(listingsTopic: string): Deriver {
    const { pool, logger, metrics } = this.deps;
    const deriver = new Deriver(
      {
        groupId: this.options.groupId,
        outbox: this.options.outbox ?? true,
        hourlyRetentionDays: this.options.hourlyRetentionDays ?? 100,
        ...(this.options.deriveIntervalMs ? { intervalMs: this.options.deriveIntervalMs } : {}),
        ...(this.options.recomputeCostFactor === undefined
          ? {}
          : { recomputeCostFactor: this.options.recomputeCostFactor }),
        // What this process's partitions have left to read: recomputations wait while it is large;
        // the second look while listings.v1's part is.
        backlog: () => this.unreadRecords(),
        listingsBacklog: () => this.unreadRecords(listingsTopic),
      },
      { pool, logger },
    );
    deriver.onDerive((r) => {
      metrics?.deriveSeconds.observe({ step: r.step }, r.ms / 1000);
      metrics?.markers.inc(r.markers.length);
      if (r.liquidity) metrics?.liquidityItems.inc({ scope: r.liquidity.scope }, r.liquidity.items);
      for (const l of this.deriveListeners) l(r);
    });
    this.deriver = deriver;
    deriver.start();
    return deriver;
  }

  /** Starts both lanes' consumers; if either fails to start, stops the materializer and rethrows. */
  private async startLanes(deps: BatchDeps): Promise<void> {
    // Both lanes or neither: a lane that started while the other failed to (a topic missing, Kafka
    // away) would apply batches of a materializer whose start() rejected and that nobody stops.
    const started = await Promise.allSettled(
      this.lanes.map((l) => l.consumer.start((batch) => this.handle(l, batch, deps))),
    );
    const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) {
      await this.stop().catch(() => undefined);
      throw failed.reason;
    }
  }

  /** Applies one batch of a lane: its transaction, then what listeners, metrics and the derive path hear. */
  private async handle(lane: Lane, batch: ConsumedBatch<MaterializedKind>, deps: BatchDeps): Promise<void> {
    const { pool, logger, metrics } = this.deps;
    const { kindOf, applyOptions, deriver } = deps;
    // Stopped for good: throwing keeps kafkajs from resolving (and committing) the batch while
    // stop() disconnects.
    if (this.failure) throw this.failure;
    const t0 = performance.now();
    const receivedAt = Date.now();
    let client: PoolClient | undefined;
    try {
      await this.assignmentVerified(lane);
      const loading = performance.now();
      if (kindOf.get(batch.topic) === 'listing') await this.served?.ready();
      const loadMs = performance.now() - loading;
      client = await pool.connect();
      const result = await applyBatch(client, kindOf.get(batch.topic) as MaterializedKind, batch, applyOptions);
      // The whole batch lay below the stored offset and past the end Kafka reported with it:
      // a stale batch, or a log that is not the one the offset counts. A fresh ListOffsets
      // tells which before the batch is resolved.
      if (result.pastEnd) await this.verify({ [batch.topic]: [batch.partition] });
      // Erroring while either lane's last batch failed: listings flowing must not hide the other
      // lane stalled on a retried batch (/v1/status reads the state from the heartbeat).
      lane.erroring = false;
      if (this.state === 'erroring' && !this.lanes.some((l) => l.erroring)) this.state = 'consuming';
      const last = batch.messages.at(-1);
      if (last) {
        const nextOffset = BigInt(last.offset) + 1n;
        // Only partitions still this process's (a batch of the previous assignment may end
        // after a rebalance).
        if (lane.assignment?.[batch.topic]?.includes(batch.partition))
          this.unread.set(`${batch.topic}:${batch.partition}`, recordsLeft(batch.highWatermark, nextOffset));
        this.priority?.observe(batch.topic, batch.partition, {
          highWatermark: batch.highWatermark,
          nextOffset,
          lastTimestamp: batch.lastTimestamp,
          receivedAt,
        });
      }
      const report: BatchReport = {
        ...result,
        topic: batch.topic,
        partition: batch.partition,
        ms: performance.now() - t0,
        ...(loadMs >= 1 ? { loadMs } : {}),
        ...(batch.firstTimestamp === undefined ? {} : { waitMs: Math.max(0, receivedAt - batch.firstTimestamp) }),
      };
      this.lastBatchAt = new Date();
      this.record(report);
      for (const l of this.listeners) l(report);
      // A marker stored, or the data a stored marker waited for: the derive path looks now.
      if (result.applied > 0 || result.deadLetters > 0) deriver.poke();
      if (result.deadLetters > 0)
        logger.error(
          {
            topic: batch.topic,
            partition: batch.partition,
            count: result.deadLetters,
            poisoned: result.poisoned,
          },
          'records sent to dead_letters',
        );
    } catch (err) {
      if (isOffsetsMismatch(err)) {
        this.fail(err);
        throw err;
      }
      // Throwing makes kafkajs retry the batch (with its backoff); nothing was committed.
      metrics?.batchesFailed.inc({ topic: batch.topic });
      lane.erroring = true;
      this.state = 'erroring';
      logger.warn({ err, topic: batch.topic, partition: batch.partition }, 'batch failed; will be retried');
      throw err;
    } finally {
      client?.release();
    }
  }

  /** Every lane's partitions, as one assignment (topic → partitions); none before a lane joined. */
  private assignment(): Record<string, number[]> | undefined {
    const joined = this.lanes.filter((l) => l.assignment !== undefined);
    return joined.length === 0 ? undefined : Object.assign({}, ...joined.map((l) => l.assignment));
  }

  /** Checks the stored offsets of `scope` (topic → partitions; [] = all stored) against the cluster. */
  private async verify(scope: Readonly<Record<string, readonly number[]>>): Promise<void> {
    const { pool, logger } = this.deps;
    if (!this.admin || !this.clusterId) return;
    const { checked, adopted } = await verifyStoredOffsets(pool, this.admin, {
      groupId: this.options.groupId,
      clusterId: this.clusterId,
      scope,
    });
    if (adopted > 0)
      logger.info(
        { adopted, checked, cluster: this.clusterId },
        'stored offsets without a cluster id (from before migration 0004) adopted by this cluster',
      );
    const moved = await advanceToLogStart(pool, this.admin, {
      groupId: this.options.groupId,
      clusterId: this.clusterId,
      scope,
    });
    for (const m of moved)
      logger.warn(
        { topic: m.topic, partition: m.partition, skipped: m.skipped.toString() },
        'records below the log start expired before they were read (retention); a FULL cycle restores the state',
      );
  }

  /**
   * Waits for the current assignment's check. A check that failed for a passing reason (Kafka or
   * PostgreSQL away) starts again and fails this batch, which kafkajs retries after its backoff.
   */
  private async assignmentVerified(lane: Lane): Promise<void> {
    try {
      await lane.verifying;
    } catch (err) {
      if (!isOffsetsMismatch(err)) {
        const assignment = lane.assignment;
        lane.verifying = assignment ? this.verify(assigned(assignment)) : Promise.resolve();
        lane.verifying.catch(() => undefined);
      }
      throw err;
    }
  }

  /** Stops the materializer for good and tells onFatal listeners (once). */
  private fail(err: AppError): void {
    if (this.failure) return;
    this.failure = err;
    this.deps.logger.error({ err, details: err.details }, 'stored offsets do not match the Kafka cluster: stopping');
    // Not awaited: stop() waits for the running batch, which is the caller.
    void this.stop()
      .catch((stopErr: unknown) => this.deps.logger.warn({ err: stopErr }, 'stopping after the mismatch failed'))
      .finally(() => {
        this.state = 'failed';
        for (const l of this.fatalListeners) l(err);
      });
  }

  /** Lets go of the admin client and the schema lock (start() failed, or stop()). */
  private async release(): Promise<void> {
    await this.admin?.disconnect().catch(() => undefined);
    this.admin = undefined;
    await this.lock?.query('SELECT pg_advisory_unlock_all()').catch(() => undefined);
    this.lock?.release();
    this.lock = undefined;
  }

  private record(r: BatchReport): void {
    const { metrics } = this.deps;
    if (!metrics) return;
    metrics.batchSeconds.observe({ topic: r.topic }, r.ms / 1000);
    if (r.waitMs !== undefined) metrics.batchWait.observe({ topic: r.topic }, r.waitMs / 1000);
    metrics.records.inc({ topic: r.topic }, r.applied);
    if (r.deadLetters > r.poisoned)
      metrics.deadLetters.inc({ topic: r.topic, reason: 'decode' }, r.deadLetters - r.poisoned);
    if (r.poisoned > 0) metrics.deadLetters.inc({ topic: r.topic, reason: 'sql' }, r.poisoned);
    if (r.isolated) metrics.batchesIsolated.inc({ topic: r.topic });
    if (r.repeats) {
      metrics.repeats.inc({ path: 'skipped' }, r.repeats.skipped);
      metrics.repeats.inc({ path: 'candles' }, r.repeats.candles);
      metrics.servedRows.set(this.servedRows);
    }
    metrics.lastBatch.set(this.lastBatchAt ? this.lastBatchAt.getTime() / 1000 : Date.now() / 1000);
  }

  async stop(): Promise<void> {
    this.state = 'stopping';
    clearInterval(this.priorityTimer);
    await this.heartbeat?.stop();
    this.heartbeat = undefined;
    await Promise.all(this.lanes.map((l) => l.consumer.stop()));
    // After the consumer: no batch pokes it any more; a derive transaction running finishes.
    await this.deriver?.stop();
    await this.release();
    this.state = this.failure ? 'failed' : 'stopped';
  }
}

/** The topics of an assignment that hold partitions (in a scope, an empty list means every one). */
function assigned(assignment: Readonly<Record<string, readonly number[]>>): Record<string, readonly number[]> {
  return Object.fromEntries(Object.entries(assignment).filter(([, partitions]) => partitions.length > 0));
}

/** The consumed topics (`kindOf`'s) split between the two lanes. */
function laneTopics(kindOf: ReadonlyMap<string, MaterializedKind>, topicSuffix: string): LaneTopics {
  const listings = `${topicFor('listing').name}${topicSuffix}`;
  const markers = `${topicFor('pollCycle').name}${topicSuffix}`;
  const others = [...kindOf.keys()].filter((t) => t !== listings && t !== markers);
  return { listings, markers, others };
}

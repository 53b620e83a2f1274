/*
 * Listings first: while the listings topic is behind, the materializer stops fetching the other
 * data topics (buy orders, float offers, sales, order books, history: its other kinds' lane,
 * materializer.ts), so PostgreSQL's share of two cores goes to the prices customers and the
 * freshness target wait for. (The lanes already keep the listings out of the others' partition
 * slots and fetch rounds; what pausing frees is CPU.) After a cold start the other kinds' first
 * cycles and the history backfill arrive together, and without a pause a listing record waits
 * tens of seconds from its produce to its commit behind history and float-offer batches, whose
 * apply takes more of PostgreSQL than the listings' own.
 *
 *   flowing ──a listings partition behind──▶ listings-first (the others paused)
 *   listings-first ──every listings partition caught up, or idle──▶ flowing
 *   listings-first ──paused for maxPauseMs──▶ flowing, held for minFlowMs (the others are never
 *                                            starved: a burst longer than that shares again)
 *
 * A partition is behind when its last batch left more than pauseAbove records unread (the
 * partition's high watermark when the batch was fetched minus the offset after it), or its last
 * record was older than pauseAfterMs when the batch reached the handler (its producer's
 * timestamp; the apply's own time is not counted: the listings are late even if a fetch holds
 * all that is there — a fetch takes up to 1 MiB of a partition, ~10,000 listings, so the records
 * left alone rarely say it). It has caught up when its last batch left at most resumeBelow
 * records and its last record was at most resumeAfterMs old — or when, having left at most
 * resumeBelow records, no batch of it has come for idleMs (nothing new was produced there; a
 * partition with records left waits for a fetch, which may take longer than idleMs while the
 * other partitions' batches are applied, and is not idle). Producers' clocks must be within
 * a fraction of pauseAfterMs of the materializer's (NTP).
 *
 * Only this process's listings partitions count (scale-out: each member puts its own first); a
 * partition revoked in a rebalance is forgotten. Pausing is the other lane's consumer's (kafkajs
 * pause/resume of whole topics): nothing is skipped, the paused topics' records are fetched when
 * resumed, and exactly-once effects are unchanged (each batch's offsets are still committed in its own
 * transaction). Poll-cycle markers are never paused: a listings marker must not wait for them,
 * and the other kinds' markers wait for their data in the derive path regardless.
 */

/**
 * Records a batch left unread in its partition: the partition's high watermark when the batch was
 * fetched minus the offset after the batch. A high watermark below that offset (a stale fetch),
 * or none, is nothing left, not less.
 */
export function recordsLeft(highWatermark: string | undefined, nextOffset: bigint): number {
  const left = highWatermark === undefined ? 0n : BigInt(highWatermark) - nextOffset;
  return left > 0n ? Number(left) : 0;
}

export interface PriorityOptions {
  /** Records a listings batch left unread in its partition above which the others are paused. */
  pauseAbove: number;
  /** A listings batch's last record older than this (ms) when it committed: the others are paused. */
  pauseAfterMs: number;
  /** Caught up: at most this many records left … */
  resumeBelow: number;
  /** … and the last record at most this old (ms). */
  resumeAfterMs: number;
  /** A listings partition without a batch for this long (ms) has caught up. */
  idleMs: number;
  /** The longest the others stay paused at a time. */
  maxPauseMs: number;
  /** After a pause cut short by maxPauseMs, how long they flow before they can be paused again. */
  minFlowMs: number;
}

export const DEFAULT_PRIORITY: PriorityOptions = {
  // A large marketplace's FULL cycle is ~33,000 records over 6 partitions; a burst ~60,000.
  pauseAbove: 2_000,
  // The freshness target is 2 s from the poll to the API: a listing that waited a second in
  // Kafka is late.
  pauseAfterMs: 1_000,
  resumeBelow: 200,
  resumeAfterMs: 500,
  idleMs: 2_000,
  maxPauseMs: 15_000,
  minFlowMs: 5_000,
};

/** What a listings partition's last batch said: records left, its last record's age, when (ms). */
export interface PartitionView {
  left: number;
  ageMs: number;
  at: number;
}

export type PriorityState =
  | { readonly kind: 'flowing'; readonly since: number; readonly holdUntil: number }
  | { readonly kind: 'listings-first'; readonly since: number };

export const initialPriority = (now: number): PriorityState => ({ kind: 'flowing', since: now, holdUntil: 0 });

const idle = (v: PartitionView, now: number, o: PriorityOptions) => v.left <= o.resumeBelow && now - v.at >= o.idleMs;
const behind = (v: PartitionView, now: number, o: PriorityOptions) =>
  !idle(v, now, o) && (v.left > o.pauseAbove || v.ageMs > o.pauseAfterMs);
const caughtUp = (v: PartitionView, now: number, o: PriorityOptions) =>
  idle(v, now, o) || (v.left <= o.resumeBelow && v.ageMs <= o.resumeAfterMs);

/**
 * The pure transition, given the listings partitions' last batches at `now`: pause when one is
 * behind (not while held flowing), flow when all have caught up or the pause has lasted maxPauseMs.
 */
export function nextPriority(
  state: PriorityState,
  views: Iterable<PartitionView>,
  now: number,
  options: PriorityOptions,
): PriorityState {
  const all = [...views];
  if (state.kind === 'flowing') {
    if (now < state.holdUntil) return state;
    return all.some((v) => behind(v, now, options)) ? { kind: 'listings-first', since: now } : state;
  }
  if (all.every((v) => caughtUp(v, now, options))) return { kind: 'flowing', since: now, holdUntil: 0 };
  if (now - state.since >= options.maxPauseMs)
    return { kind: 'flowing', since: now, holdUntil: now + options.minFlowMs };
  return state;
}

/** What the materializer needs of its consumer: pausing and resuming whole topics. */
export interface Pausable {
  pause(topics: { topic: string }[]): void;
  resume(topics: { topic: string }[]): void;
}

/**
 * Keeps the state and the consumer's paused topics in step. `observe` after each listings batch,
 * `tick` on a timer (the pause's time limit must hold when no listings batch comes), `assigned`
 * after each rebalance.
 */
export class ListingsFirst {
  private state: PriorityState;
  private readonly views = new Map<number, PartitionView>();
  /** Times the others were paused, and milliseconds they spent paused (metrics). */
  readonly stats = { pauses: 0, pausedMs: 0 };

  constructor(
    private readonly listingsTopic: string,
    private readonly others: readonly string[],
    private readonly consumer: Pausable,
    private readonly options: PriorityOptions = DEFAULT_PRIORITY,
    private readonly clock: () => number = () => Date.now(),
  ) {
    this.state = initialPriority(clock());
  }

  get phase(): PriorityState['kind'] {
    return this.state.kind;
  }

  /**
   * A listings batch committed: it ended at `nextOffset` in a partition whose end was
   * `highWatermark`; its last record was produced at `lastTimestamp` and the batch reached the
   * handler at `receivedAt` (ms since the epoch).
   */
  observe(
    topic: string,
    partition: number,
    batch: {
      highWatermark?: string | undefined;
      nextOffset: bigint;
      lastTimestamp?: number | undefined;
      receivedAt: number;
    },
  ): void {
    if (topic !== this.listingsTopic) return;
    this.views.set(partition, {
      left: recordsLeft(batch.highWatermark, batch.nextOffset),
      ageMs: batch.lastTimestamp === undefined ? 0 : Math.max(0, batch.receivedAt - batch.lastTimestamp),
      at: this.clock(),
    });
    this.step();
  }

  /**
   * The listings partitions this process now owns (each rebalance): the others' views are
   * forgotten, and the consumer is told the current phase again — a consumer that kafkajs
   * restarted after a crash has a new group whose paused topics are empty.
   */
  assigned(partitions: readonly number[]): void {
    const own = new Set(partitions);
    for (const p of [...this.views.keys()]) if (!own.has(p)) this.views.delete(p);
    this.step();
    this.tell();
  }

  tick(): void {
    this.step();
  }

  private step(): void {
    const before = this.state;
    const now = this.clock();
    this.state = nextPriority(before, this.views.values(), now, this.options);
    if (before.kind === this.state.kind) return;
    if (this.state.kind === 'listings-first') this.stats.pauses++;
    else this.stats.pausedMs += now - before.since;
    this.tell();
  }

  /**
   * Pauses or resumes the others as the phase says. Between a kafkajs crash and its restart the
   * consumer has no group and refuses ("not initialized"), and one not running yet when the phase
   * changed refuses too: nothing to pause then, and the paused consumer's (re)join tells it again
   * (assigned, or the materializer calling this when the other kinds' lane joins its group).
   */
  tell(): void {
    const topics = this.others.map((topic) => ({ topic }));
    try {
      if (this.state.kind === 'listings-first') this.consumer.pause(topics);
      else this.consumer.resume(topics);
    } catch {
      // told again on the next rebalance
    }
  }
}

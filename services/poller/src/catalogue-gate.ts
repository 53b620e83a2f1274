/*
 * Holds every marketplace's kinds other than its listings, and the history-only marketplace's
 * backfill (CATALOGUE_GATE_SCOPE=backfill: that alone), until the platform's catalogue is in: on a
 * cold start the lowest prices come first. Each poller starts its other kinds only after its own
 * first LISTINGS cycle (poller.ts), but that alone leaves them competing with every other
 * marketplace's first listings: their buy orders, sales, float offers and order books would be
 * fetched, encoded, produced and applied on the same two cores while the materializer is still
 * ingesting the listings. A marketplace without listings (the history-only one) has no first
 * cycle of its own at all, so its 30- to 400-day backfill — a million history points or more,
 * written as daily and hourly candles — would run from the first second. Holding every kind
 * (scope 'all', the default) brings the catalogue in sooner; the price is that those kinds' first
 * cycles fall into the minutes after it, where price changes must show, which is why they then
 * run one kind after another (poller.ts; bench/bottlenecks.md, "Cold full catalogue").
 *
 * This gate opens when every listing marketplace of the registry has ended a LISTINGS cycle (any
 * outcome: a failing upstream is not waited for), as their markers on poll-cycles.v1 say, and the
 * materializer's consumer group has committed offsets past those cycles' end offsets (the rule by
 * which the materializer applies a marker: its records are in) — or when `timeoutMs` has passed
 * (a marketplace whose poller is not running, or a materializer that is down, must not hold the
 * rest back for ever). The markers alone open it too early: the pollers end their first cycles
 * long before the materializer has ingested them. It waits for the records to be ingested, not
 * for the markers to be applied (the derive path does that seconds later; a poller cannot see it
 * without the database).
 *
 *   waiting(pending markets, end offsets) ──marker of the last pending market──▶ ingesting(end offsets)
 *   ingesting ──the group's committed offsets pass every end offset──▶ open('listed')
 *   waiting | ingesting ──timeout──▶ open('timeout')
 *   waiting | ingesting ──stop()──▶ open('stopped')
 *   waiting ──the consumer could not start──▶ open('failed')
 *   (a consumer that fails later, or offsets that cannot be read, wait for the timeout)
 *
 * It reads the marker topic from its beginning (a consumer group of its own, nothing committed),
 * so no marker sent while it joins the group is missed: on a cold start the topic is empty and
 * the markers it waits for are the first ones; a poller restarted beside a running platform
 * finds every marketplace's old markers in the topic's first records and opens at once.
 * The cost of that choice: the marker topic is kept for ever, and in a deployment where some
 * marketplace of the registry never ran, the gate reads all of it before its timeout.
 * Why Kafka and not the read model: pollers never read the database, and poll-cycles.v1 is where
 * the platform says which cycles ended.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@skinprices/runtime';
import { EventConsumer, topicFor, type EventSerde, type PollCycleEvent } from '@skinprices/events';
import type { Admin, Kafka } from 'kafkajs';

export type GateReason = 'listed' | 'timeout' | 'stopped' | 'failed';

/** Per `topic:partition`, the last offset of a cycle (the marker's end_offsets). */
type EndOffsets = ReadonlyMap<string, bigint>;

export type GateState =
  | { readonly kind: 'waiting'; readonly pending: ReadonlySet<string>; readonly ends: EndOffsets }
  | { readonly kind: 'ingesting'; readonly ends: EndOffsets }
  | { readonly kind: 'open'; readonly reason: GateReason };

type Marker = Pick<PollCycleEvent, 'market' | 'kind' | 'data_topic' | 'end_offsets'>;

export type GateEvent =
  | { readonly kind: 'marker'; readonly marker: Marker }
  /** The materializer group's committed offsets (next to read) per `topic:partition`. */
  | { readonly kind: 'committed'; readonly offsets: ReadonlyMap<string, bigint> }
  | { readonly kind: 'timeout' }
  | { readonly kind: 'stop' }
  | { readonly kind: 'failed' };

const NO_ENDS: EndOffsets = new Map();

/** The gate before any marker: waiting for every one of `markets` (none: open at once). */
export function initialGate(markets: Iterable<string>): GateState {
  const pending = new Set(markets);
  return pending.size === 0 ? { kind: 'open', reason: 'listed' } : { kind: 'waiting', pending, ends: NO_ENDS };
}

/** Every end offset is below the committed offset of its partition. */
const ingested = (ends: EndOffsets, committed: ReadonlyMap<string, bigint>): boolean =>
  [...ends].every(([at, end]) => (committed.get(at) ?? -1n) > end);

/**
 * The pure transition. A LISTINGS marker of a pending marketplace takes it off the list and adds
 * its end offsets (the highest per partition); with none pending, the gate waits for the group's
 * commits to pass them (at once when the cycles emitted nothing). An open gate stays open.
 */
export function nextGate(state: GateState, event: GateEvent): GateState {
  if (state.kind === 'open') return state;
  switch (event.kind) {
    case 'marker': {
      const { market, kind, data_topic, end_offsets } = event.marker;
      if (state.kind !== 'waiting' || kind !== 'LISTINGS' || !state.pending.has(market)) return state;
      const pending = new Set(state.pending);
      pending.delete(market);
      const ends = new Map(state.ends);
      for (const e of end_offsets) {
        const at = `${data_topic}:${e.partition}`;
        const end = BigInt(e.offset);
        if ((ends.get(at) ?? -1n) < end) ends.set(at, end);
      }
      if (pending.size > 0) return { kind: 'waiting', pending, ends };
      return ends.size === 0 ? { kind: 'open', reason: 'listed' } : { kind: 'ingesting', ends };
    }
    case 'committed':
      return state.kind === 'ingesting' && ingested(state.ends, event.offsets)
        ? { kind: 'open', reason: 'listed' }
        : state;
    case 'timeout':
      return { kind: 'open', reason: 'timeout' };
    case 'stop':
      return { kind: 'open', reason: 'stopped' };
    case 'failed':
      return { kind: 'open', reason: 'failed' };
  }
}

export interface CatalogueGateOptions {
  /** The listing marketplaces whose first LISTINGS cycle is waited for. */
  markets: readonly string[];
  /** Open anyway after this long. */
  timeoutMs: number;
  /** Appended to the topic name (tests use their own topics). */
  topicSuffix: string;
  /** Names the gate's consumer group (a unique tail is added per process). */
  owner: string;
  /** The materializer's consumer group, whose committed offsets say the cycles are in. */
  materializerGroup: string;
  /** How often the group's offsets are read while ingesting. @default 1000 */
  offsetsEveryMs?: number;
}

export class CatalogueGate {
  private state: GateState;
  private consumer: EventConsumer<'pollCycle'> | undefined;
  /** The consumer's start (joining its group): a close waits for it. */
  private consumerRun: Promise<void> | undefined;
  private closing: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly opened: Promise<GateReason>;
  private resolveOpened: (reason: GateReason) => void = () => undefined;
  private started = false;

  constructor(
    private readonly options: CatalogueGateOptions,
    private readonly deps: { kafka: Kafka; admin: Admin; serde: EventSerde; logger: Pick<Logger, 'info' | 'warn'> },
  ) {
    this.state = initialGate(options.markets);
    this.opened = new Promise<GateReason>((resolve) => (this.resolveOpened = resolve));
    if (this.state.kind === 'open') this.resolveOpened(this.state.reason);
  }

  /** Still waiting for these marketplaces' markers (empty once they are in). */
  get pending(): string[] {
    return this.state.kind === 'waiting' ? [...this.state.pending] : [];
  }

  /** Where the gate is: waiting for markers, for the materializer, or open. */
  get phase(): GateState['kind'] {
    return this.state.kind;
  }

  /**
   * Starts listening (once) and settles when the gate opens; `signal` aborting opens it as
   * 'stopped' (a stopping poller must not wait on it).
   */
  wait(signal?: AbortSignal): Promise<GateReason> {
    if (signal) {
      if (signal.aborted) this.apply({ kind: 'stop' });
      else signal.addEventListener('abort', () => this.apply({ kind: 'stop' }), { once: true });
    }
    if (!this.started && this.state.kind === 'waiting') {
      this.started = true;
      this.deps.logger.info(
        { markets: this.state.pending.size, timeoutMs: this.options.timeoutMs },
        "the other kinds wait for every listing marketplace's first LISTINGS cycle",
      );
      this.timer = setTimeout(() => this.apply({ kind: 'timeout' }), this.options.timeoutMs);
      this.timer.unref();
      void this.listen().catch((err: unknown) => {
        this.deps.logger.warn({ err }, 'catalogue gate could not read poll-cycle markers; opening it');
        this.apply({ kind: 'failed' });
      });
    }
    return this.opened;
  }

  async stop(): Promise<void> {
    this.apply({ kind: 'stop' });
    await this.close();
  }

  private async listen(): Promise<void> {
    const topic = `${topicFor('pollCycle').name}${this.options.topicSuffix}`;
    const codec = await this.deps.serde.codec(topic, 'pollCycle');
    if (this.state.kind === 'open') return;
    const consumer = new EventConsumer(this.deps.kafka, [codec], {
      // A group of its own per process with nothing committed: it reads from the beginning every
      // time, and a second poller's gate is not handed half of the partitions.
      groupId: `${this.options.owner}-catalogue-gate-${randomUUID().slice(0, 8)}`,
      fromBeginning: true,
      autoCommit: false,
    });
    this.consumer = consumer;
    this.consumerRun = consumer.start(async (batch) => {
      for (const m of batch.messages) if (m.value) this.apply({ kind: 'marker', marker: m.value as PollCycleEvent });
    });
    // Opened meanwhile (the timeout, stop()): close() waited for this start, then stopped it.
    await this.consumerRun;
  }

  /** Reads the materializer group's committed offsets until the gate opens. */
  private async watchCommits(): Promise<void> {
    const every = this.options.offsetsEveryMs ?? 1_000;
    while (this.state.kind === 'ingesting') {
      const topics = [...new Set([...this.state.ends.keys()].map((at) => at.slice(0, at.lastIndexOf(':'))))];
      try {
        const answer = await this.deps.admin.fetchOffsets({ groupId: this.options.materializerGroup, topics });
        const offsets = new Map<string, bigint>();
        for (const t of answer)
          for (const p of t.partitions)
            if (p.offset !== '-1') offsets.set(`${t.topic}:${p.partition}`, BigInt(p.offset));
        this.apply({ kind: 'committed', offsets });
      } catch (err) {
        // A coordinator still loading on a cold start, a broker away: read again; the timeout
        // bounds the wait. (After stop() the admin client may be gone: nothing to say then.)
        if (this.state.kind === 'ingesting')
          this.deps.logger.warn({ err }, "catalogue gate could not read the materializer's offsets; trying again");
      }
      if (this.state.kind === 'ingesting') await sleep(every, undefined, { ref: false });
    }
  }

  private apply(event: GateEvent): void {
    const before = this.state;
    this.state = nextGate(before, event);
    if (before.kind === 'waiting' && this.state.kind === 'ingesting') {
      this.deps.logger.info(
        { partitions: this.state.ends.size, group: this.options.materializerGroup },
        "every listing marketplace ended a cycle: waiting for the materializer's commits to pass them",
      );
      // The markers are all in: the consumer is done, the offsets are read with the admin client.
      setImmediate(() => void this.close());
      void this.watchCommits();
    }
    if (before.kind !== 'open' && this.state.kind === 'open') {
      clearTimeout(this.timer);
      const reason = this.state.reason;
      if (reason === 'timeout')
        this.deps.logger.warn(
          { waitedForMs: this.options.timeoutMs, pending: before.kind === 'waiting' ? [...before.pending] : [] },
          before.kind === 'waiting'
            ? "catalogue gate timed out: the other kinds start without these marketplaces' first listings"
            : 'catalogue gate timed out: the other kinds start before the materializer has ingested the first listings',
        );
      else if (reason === 'listed')
        this.deps.logger.info("catalogue in (every listing marketplace's first cycle ingested): the other kinds start");
      this.resolveOpened(reason);
      // The consumer has done its job: leave the group (not from inside its own batch handler).
      setImmediate(() => void this.close());
    }
  }

  /** Stops the consumer once (stop() waits for it, so the process leaves the group before it exits). */
  private close(): Promise<void> {
    const consumer = this.consumer;
    if (!consumer) return this.closing ?? Promise.resolve();
    const run = this.consumerRun;
    this.consumer = undefined;
    this.closing = (async () => {
      // kafkajs cannot stop a consumer still joining its group (its runner is not running yet,
      // and the join carries on after a disconnect): let the start finish, then stop it.
      await run?.catch(() => undefined);
      await consumer.stop().catch(() => undefined);
    })();
    return this.closing;
  }
}

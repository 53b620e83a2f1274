/*
 * One marketplace's poller: a job per data kind the marketplace offers, each a loop with an
 * explicit state:
 *
 *            start()
 *   idle ──────────────▶ polling ──(cycle done)──▶ waiting ──(interval over)──▶ polling …
 *                           │                        ▲
 *                           │ (circuit open)          │
 *                           └────────▶ cooling ──────┘ (cool-down over: one trial cycle)
 *   any ──stop()──▶ stopping ──(current request aborted, marker sent)──▶ stopped
 *
 * A cycle pages through the upstream, normalises rows, drops duplicates, produces keyed events
 * (all rows on a FULL cycle, the changed ones first; only changed rows on a DELTA cycle; explicit
 * removals when the cycle saw everything), and ends with a poll-cycles.v1 marker saying COMPLETE, PARTIAL or
 * FAILED. A cycle that was not complete and clean never removes or zeroes anything, and a marker
 * says COMPLETE only with the data topic's end offsets attached (cycle-end.ts).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { AppError, DAY_MS, kindOfCapability, type Market } from '@skinprices/domain';
import {
  topicFor,
  type EventKind,
  type EventMap,
  type EventProducer,
  type EventSerde,
  type HistoryHoursEvent,
  type PollCycleEvent,
  type TopicCodec,
} from '@skinprices/events';
import {
  adapterFor,
  type Adapter,
  type FetchContext,
  type Kind,
  type KindInput,
  type Page,
  type RowMap,
  type UpstreamClient,
} from '@skinprices/marketplaces';
import { Backoff, type Logger } from '@skinprices/runtime';
import type { Admin, RecordMetadata } from 'kafkajs';
import { aheadOne } from './ahead.js';
import { cycleOutcome, endOffsetsFrom, removalsAllowed, type EndOffsets } from './cycle-end.js';
import { eventOf, historyRecords, isDeltaKind, removalOf, rowKey, sameRow, toEvent } from './events.js';
import type { CursorStore } from './cursor-store.js';
import { HistoryCursor, type HistoryWork } from './history-cursor.js';
import type { PollerMetrics } from './metrics.js';
import { CircuitBreaker, TokenBucket, withRetry } from './resilience.js';

/** Repeats of a FULL cycle per send at its end (an upstream page's worth). */
const REPEATS_PER_SEND = 500;

export type JobState = 'idle' | 'polling' | 'waiting' | 'cooling' | 'stopping' | 'stopped';

export interface PollerOptions {
  market: Market;
  /** Per kind: ms between cycles. */
  intervals: Partial<Record<Kind, number>>;
  /** Every n-th cycle of a delta kind is a FULL snapshot. @default 12 */
  fullEvery: number;
  /** Appended to every topic name (tests use their own topics). @default '' */
  topicSuffix: string;
  retries: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  requestsPerSecond: number;
  circuitThreshold: number;
  circuitCoolDownMs: number;
  /** How far back the first sales window reaches (upstream time). */
  salesLookbackMs: number;
  /** Days of history imported on the first run. */
  historyBackfillDays: number;
  /**
   * Of those, the most recent days whose hourly candles are imported with their closes (the
   * history format keeps hours for recent days; the warm demo's hourly history). @default 0
   */
  hourlyBackfillDays?: number;
  /** Pause between the hours pass's cycles (a day each). @default 0 */
  hourlyPaceMs?: number;
  /**
   * An adapter that reads this marketplace's daily closes from a history endpoint of its upstream
   * (the simulator serves one for every marketplace when asked: the warm demo of `make run`). A
   * HISTORY job then imports them like the history-only marketplace's, so changes and averages
   * have closes to stand on from the first day. @default none
   */
  dailyHistory?: Adapter;
  /**
   * Fetches of the data topic's end offsets before a COMPLETE cycle is marked PARTIAL for want of
   * them (each already retried by kafkajs; backoff as for upstream requests). @default 3
   */
  endOffsetAttempts?: number;
}

export interface PollerDeps {
  client: UpstreamClient;
  producer: EventProducer;
  serde: EventSerde;
  admin: Admin;
  logger: Logger;
  metrics: PollerMetrics;
  /** Adapter for the market's format (tests may inject one). */
  adapter?: Adapter;
  /**
   * Opens when the platform's catalogue is in (catalogue-gate.ts): every listing marketplace's
   * first LISTINGS cycle ingested. A listing marketplace's other kinds start after its own first
   * LISTINGS cycle and then this; a marketplace without listings starts its kinds after this
   * alone. Either way they then start one after another, each after the first cycle of the one
   * before it. @default none: a listing marketplace's other kinds start after its own first cycle
   */
  catalogue?: { wait(signal: AbortSignal): Promise<unknown> };
  /**
   * Where the history import and the sales window resume after a restart (cursor-store.ts):
   * read by resume(), written after each cycle that moved them. @default none: a restarted
   * poller imports its backfill and its first sales window again
   */
  cursors?: CursorStore;
}

/** How long a stop lets a running HISTORY cycle finish, so its day is not imported twice. */
const HISTORY_STOP_GRACE_MS = 10_000;

export interface CycleResult {
  kind: Kind;
  marker: PollCycleEvent;
  rejected: number;
  duplicates: number;
}

type Emitted = RowMap[Kind];

/**
 * One running cycle: what it decided when it started, and what it has counted since. The
 * counters and `error` move as its pages are fetched and sent; its marker reports them.
 */
interface CycleRun {
  readonly job: Job;
  readonly kind: Kind;
  readonly labels: { market: string; kind: Kind };
  /** A delta kind's cycle (isDeltaKind): it remembers what the topic says, and removes. */
  readonly delta: boolean;
  readonly full: boolean;
  /** The upstream day (days since epoch) the cycle started in. */
  readonly day: number;
  readonly startedAt: number;
  readonly cycleId: string;
  readonly input: KindInput;
  /** The marker's removals_sent (Job.removals). */
  readonly removalsSent: boolean;
  /** Whether each record carries removals_sent too. */
  readonly flagRecords: boolean;
  /** Ends the cycle's duration metric. */
  readonly timer: () => number;
  readonly codec: TopicCodec<EventKind>;
  /** The rows the cycle saw, by row key. */
  readonly seen: Map<string, Emitted>;
  /** Per partition of the data topic, the highest offset a send of this cycle was given. */
  readonly produced: Map<number, bigint>;
  /** A FULL cycle's repeats, sent after its pages when deferRepeats. */
  readonly deferred: { events: EventMap[EventKind][]; seen: [string, Emitted][] };
  /**
   * A FULL cycle of a delta kind re-sends every row, most of them as the topic last said them
   * (only observed_at moves). Those go after the cycle's pages, so that a row whose price did
   * change is not queued in its partition, and in the materializer, behind thousands of
   * repeats from earlier pages: the changed rows arrive at the pace of the upstream's pages,
   * the repeats as one burst at the end, which the materializer takes in large batches.
   */
  readonly deferRepeats: boolean;
  /** Records on the data topic (the marker's events_emitted, vouched for by its end offsets). */
  emitted: number;
  /** HISTORY: records on history-hours.v1. */
  hoursEmitted: number;
  rejected: number;
  duplicates: number;
  /** What broke the cycle off (fetching or sending); undefined while nothing did. */
  error: unknown;
}

/** What one page sends: its records, the rows they say (for job.last), and HISTORY's hours. */
interface PageRecords {
  out: EventMap[EventKind][];
  pageSeen: [string, Emitted][];
  /** HISTORY: the page's hours, for history-hours.v1 (historyRecords). */
  hoursOut: HistoryHoursEvent[];
}

class Job {
  state: JobState = 'idle';
  cycles = 0;
  /** Delta kinds: what the topic last said about each row key. */
  readonly last = new Map<string, Emitted>();
  /**
   * Delta kinds: rows of a send that failed, which may have reached the topic all the same (a
   * send spans partitions, and some may have acknowledged). Not in `last`, so not compared
   * against, but removed like its rows when a clean cycle no longer sees them.
   */
  readonly unsure = new Map<string, Emitted>();
  /**
   * Delta kinds: whether this job's cycles send every removal as a record (`removals_sent`), so
   * their markers need not remove what they did not see. `unknown` until a FULL cycle has ended
   * COMPLETE since the start (before it, what earlier processes said is unknown: the first FULL
   * marker removes what it did not see, as without `removals_sent`); `settling` until the next
   * FULL cycle starts, so that marker is long applied before any record of a flagged cycle can be
   * dropped as a repeat (a record dropped before an older marker's removal would not undo it); then
   * `sent`.
   */
  removals: 'unknown' | 'settling' | 'sent' = 'unknown';
  salesFrom: number | undefined;
  readonly salesSeen = new Set<string>();
  /** The sales the next window overlaps (sold at or after salesFrom), key → sold_at: kept in the cursor. */
  readonly salesRecent = new Map<string, number>();
  /** Aborts the cycle's upstream requests: at once on stop(), a HISTORY cycle's after a grace. */
  readonly requests = new AbortController();
  /** HISTORY: which day next (closes first, then recent hours), and what the running cycle imports. */
  history: HistoryCursor | undefined;
  historyWork: HistoryWork | undefined;
  /** Delta kinds: the upstream day (days since epoch) of the last complete FULL cycle. */
  fullDay: number | undefined;
  /** Wakes the loop early (stop). */
  wake = new AbortController();
  loop: Promise<void> | undefined;
  /** The job's own adapter (daily history of a listing marketplace); else the marketplace's. */
  constructor(
    readonly kind: Kind,
    readonly adapter?: Adapter,
  ) {}
}

/**
 * The kinds a poller runs (daily history imported from another format aside): those with an
 * interval that the marketplace offers (registry) and its format can fetch.
 */
export function polledKinds(market: Market, intervals: Partial<Record<Kind, number>>, adapter: Adapter): Kind[] {
  const offered = new Set(market.capabilities.map(kindOfCapability));
  return (Object.keys(intervals) as Kind[]).filter((k) => adapter.kinds.includes(k) && offered.has(k));
}

export class Poller {
  private readonly jobs: Job[];
  private readonly limiter: TokenBucket;
  private readonly circuit: CircuitBreaker;
  private readonly adapter: Adapter;
  private readonly stopCtl = new AbortController();
  private readonly listeners = new Set<(r: CycleResult) => void>();

  constructor(
    private readonly options: PollerOptions,
    private readonly deps: PollerDeps,
  ) {
    this.adapter = deps.adapter ?? adapterFor(options.market.upstreamFormat);
    const kinds = polledKinds(options.market, options.intervals, this.adapter);
    this.jobs = kinds.map((k) => new Job(k));
    if (options.dailyHistory && !kinds.includes('HISTORY')) this.jobs.push(new Job('HISTORY', options.dailyHistory));
    for (const j of this.jobs)
      if (j.kind === 'HISTORY')
        j.history = new HistoryCursor(options.historyBackfillDays, options.hourlyBackfillDays ?? 0);
    // The stricter of our configuration and what the real upstream documents.
    const limits = this.adapter.limits;
    this.limiter = new TokenBucket(
      limits && limits.requestsPerSecond < options.requestsPerSecond
        ? { perSecond: limits.requestsPerSecond, burst: Math.min(limits.burst, options.requestsPerSecond) }
        : { perSecond: options.requestsPerSecond },
    );
    const fromHeaders = limits?.pauseFromHeaders;
    if (fromHeaders)
      deps.client.onHeaders((headers) => {
        const until = fromHeaders(headers, Date.now());
        if (until !== undefined) this.limiter.pauseUntil(until);
      });
    this.circuit = new CircuitBreaker(options.circuitThreshold, options.circuitCoolDownMs);
  }

  get kinds(): Kind[] {
    return this.jobs.map((j) => j.kind);
  }

  states(): Record<string, JobState> {
    return Object.fromEntries(this.jobs.map((j) => [j.kind, j.state]));
  }

  /** Called after every cycle (tests wait on it). */
  onCycle(listener: (r: CycleResult) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Settles when the first LISTINGS cycle has ended (any outcome) and then, with a catalogue
   * gate, when the platform's catalogue is in — or when the poller stops; the other kinds' first
   * cycles then run one after another (start()). On a cold start the lowest prices are what
   * customers wait for: buy orders, sales, float data and history sharing the rate limit, the
   * broker, the materializer and two cores would only delay them — this marketplace's own, and
   * every other marketplace's still being ingested. By default (CATALOGUE_GATE_SCOPE all) a
   * listing marketplace's other kinds wait for the whole catalogue (catalogue-gate.ts).
   */
  private firstListings: Promise<void> = Promise.resolve();

  start(): void {
    const listings = this.jobs.find((j) => j.kind === 'LISTINGS');
    let listingsDone = (): void => undefined;
    const own = listings ? new Promise<void>((resolve) => (listingsDone = resolve)) : Promise.resolve();
    // The gate listens from the start (joining its consumer group takes seconds) and is waited
    // for after the first cycle; its timeout counts from here.
    const gate = this.deps.catalogue?.wait(this.stopCtl.signal);
    this.firstListings = gate
      ? own
          .then(() => gate)
          .then(
            () => undefined,
            () => undefined,
          )
      : own;
    this.stopCtl.signal.addEventListener('abort', () => listingsDone(), { once: true });
    // After them the other kinds' first cycles run one after another, each kind's loop free once
    // its first cycle ended: started together they would be one burst of every kind of every
    // marketplace — upstream requests, records, and the materializer's and the API's work for
    // them — landing just as the catalogue becomes visible, where price changes must show.
    let before = this.firstListings;
    for (const job of this.jobs) {
      if (job === listings) {
        job.loop = this.run(job, listingsDone);
        continue;
      }
      let firstDone = (): void => undefined;
      const first = new Promise<void>((resolve) => (firstDone = resolve));
      this.stopCtl.signal.addEventListener('abort', () => firstDone(), { once: true });
      job.loop = before.then(() => this.run(job, firstDone));
      before = first;
    }
  }

  /**
   * Stops every loop: the running request is aborted and its cycle ends with a marker; a running
   * HISTORY cycle first gets HISTORY_STOP_GRACE_MS to finish its day.
   */
  async stop(): Promise<void> {
    const graces: NodeJS.Timeout[] = [];
    for (const j of this.jobs) {
      // A history cycle cut off would import its day again after the restart: it may finish.
      if (j.kind === 'HISTORY' && j.state === 'polling')
        graces.push(setTimeout(() => j.requests.abort(), HISTORY_STOP_GRACE_MS));
      else j.requests.abort();
      if (j.state !== 'stopped') j.state = 'stopping';
    }
    this.stopCtl.abort();
    for (const j of this.jobs) j.wake.abort();
    await Promise.all(this.jobs.map((j) => j.loop ?? Promise.resolve()));
    for (const g of graces) clearTimeout(g);
  }

  /**
   * Continues the history import and the sales window from the cursors kept before a restart
   * (PollerDeps.cursors). Call before start(); without a store it does nothing.
   */
  async resume(): Promise<void> {
    const store = this.deps.cursors;
    if (!store) return;
    const kept = await store.load(this.options.market.slug);
    for (const job of this.jobs) {
      const cursor = kept.get(job.kind);
      if (!cursor) continue;
      if (job.history && cursor.history)
        job.history.resume({
          closesNext: cursor.history.closes_next,
          hoursNext: cursor.history.hours_next,
          hoursEnd: cursor.history.hours_end,
        });
      if (job.kind === 'SALES' && cursor.sales_from !== null) {
        job.salesFrom = cursor.sales_from;
        for (const k of cursor.sales_seen) {
          job.salesSeen.add(k);
          job.salesRecent.set(k, cursor.sales_from);
        }
      }
    }
    this.deps.logger.info(
      { resumed: Object.fromEntries([...kept].map(([k, c]) => [k, c.history ?? c.sales_from])) },
      'cursors resumed',
    );
  }

  /** Keeps where `job` resumes after a restart (HISTORY and SALES; PollerDeps.cursors). */
  private async keepCursor(job: Job): Promise<void> {
    const store = this.deps.cursors;
    if (!store || (job.kind !== 'SALES' && !job.history)) return;
    const h = job.history?.position();
    await store.save({
      market: this.options.market.slug,
      kind: job.kind,
      history: h ? { closes_next: h.closesNext, hours_next: h.hoursNext, hours_end: h.hoursEnd } : null,
      sales_from: job.kind === 'SALES' ? (job.salesFrom ?? null) : null,
      sales_seen: job.kind === 'SALES' ? [...job.salesRecent.keys()] : [],
      updated_at: this.deps.client.upstreamNow(),
    });
  }

  private async run(job: Job, afterFirstCycle: () => void = () => undefined): Promise<void> {
    try {
      await this.loop(job, afterFirstCycle);
    } finally {
      // However the loop ended (stopped, or thrown before its first cycle), the kinds queued
      // behind this one's first cycle must not wait for ever.
      afterFirstCycle();
      job.state = 'stopped';
    }
  }

  private async loop(job: Job, afterFirstCycle: () => void): Promise<void> {
    const interval = this.options.intervals[job.kind] ?? 300_000;
    while (!this.stopCtl.signal.aborted) {
      const wait = this.circuit.waitMs();
      if (wait > 0) {
        job.state = 'cooling';
        this.deps.metrics.circuitOpen.set({ market: this.options.market.slug }, 1);
        await this.pause(job, wait);
        continue;
      }
      this.deps.metrics.circuitOpen.set({ market: this.options.market.slug }, 0);
      // A day's close exists only once the day is over (by the upstream's clock).
      if (job.history?.caughtUp(this.upstreamDay())) {
        // Nothing to fetch is a first cycle done too: the kinds queued behind it may start.
        afterFirstCycle();
        job.state = 'waiting';
        await this.pause(job, Math.min(interval, 60_000));
        continue;
      }
      job.state = 'polling';
      let result: CycleResult | undefined;
      try {
        result = await this.cycle(job);
      } catch (err) {
        this.deps.logger.error({ err, kind: job.kind }, 'cycle crashed');
      }
      afterFirstCycle();
      if (this.stopCtl.signal.aborted) break;
      const failed = !result || result.marker.outcome === 'FAILED';
      this.circuit.record(!failed);
      if (result) for (const l of this.listeners) l(result);
      job.state = 'waiting';
      // History catches up day by day without waiting while days are missing.
      const catchingUp = job.history !== undefined && !failed && !job.history.caughtUp(this.upstreamDay());
      // The hours pass is a backfill of 24 rows per item and day: paced, so that it does not
      // queue ahead of other marketplaces' closes in history.v1's partitions (a consumer applies
      // a partition in order) or crowd live prices out of the database.
      const pace = job.historyWork?.closes === false ? (this.options.hourlyPaceMs ?? 0) : 0;
      await this.pause(job, catchingUp ? pace : interval);
    }
  }

  private async pause(job: Job, ms: number): Promise<void> {
    if (ms <= 0) return;
    try {
      await sleep(ms, undefined, { signal: job.wake.signal });
    } catch {
      // woken by stop()
    }
  }

  private upstreamDay(): number {
    return Math.floor(this.deps.client.upstreamNow() / DAY_MS);
  }

  /** Runs one cycle of `kind` now, outside the schedule (tests, manual re-polls). */
  async runOnce(kind: Kind): Promise<CycleResult> {
    const job = this.jobs.find((j) => j.kind === kind);
    if (!job) throw new AppError('kind_unsupported', `${this.options.market.slug} does not poll ${kind}`);
    return this.cycle(job);
  }

  /** One cycle of `job`: its pages, the repeats deferred to its end, its removals, then its marker. */
  private async cycle(job: Job): Promise<CycleResult> {
    const run = await this.startCycle(job);
    await this.fetchPages(run);
    await this.sendRepeats(run);
    // An answer with no item at all, after earlier ones had some, is a broken answer however
    // clean it looks: it removes nothing, and its cycle is not COMPLETE.
    const emptied = run.delta && !run.error && run.seen.size === 0 && job.last.size > 0;
    await this.sendRemovals(run, emptied);
    this.advanceWindows(job, run.kind, run.seen, run.error);
    // After the cycle's records were acknowledged, before its marker: a restart resumes past them.
    if (!run.error)
      await this.keepCursor(job).catch((err: unknown) =>
        this.deps.logger.warn({ err, kind: run.kind }, 'cursor not kept: a restart would fetch this cycle again'),
      );
    return this.endCycle(run, emptied);
  }

  /**
   * Decides the cycle's mode, input and id, counts it, and resolves its data topic's codec (a
   * registry away throws: the cycle crashes before it fetches anything).
   */
  private async startCycle(job: Job): Promise<CycleRun> {
    const { market } = this.options;
    const { client, metrics, logger } = this.deps;
    const kind = job.kind;
    const labels = { market: market.slug, kind };
    if (!client.hasClock)
      await client.syncClock().catch((err: unknown) => logger.warn({ err }, 'upstream clock unknown'));
    const delta = isDeltaKind(kind);
    const startedAt = client.upstreamNow();
    // The first cycle of each upstream day is FULL too: every item then has an observation, and so
    // a daily close, every day, however rarely its price moves (statistics read daily closes).
    const day = Math.floor(startedAt / DAY_MS);
    const full = !delta || job.last.size === 0 || job.cycles % this.options.fullEvery === 0 || job.fullDay !== day;
    if (delta && full && job.removals === 'settling') job.removals = 'sent';
    const removalsSent = delta && job.removals === 'sent';
    const timer = metrics.cycleSeconds.startTimer(labels);
    const input = this.inputFor(job, startedAt);
    const cycleId =
      kind === 'HISTORY' && input.day !== undefined
        ? `${market.slug}:HISTORY:${new Date(input.day * DAY_MS).toISOString().slice(0, 10)}${input.closes === false ? ':hours' : ''}`
        : `${market.slug}:${kind}:${startedAt}:${job.cycles}`;
    job.cycles++;
    const codec = await this.codec(kind);
    return {
      job,
      kind,
      labels,
      delta,
      full,
      day,
      startedAt,
      cycleId,
      input,
      removalsSent,
      // Only listings.v1 records carry the flag (a consumer of buy orders reads it on the marker).
      flagRecords: removalsSent && kind === 'LISTINGS',
      timer,
      codec,
      seen: new Map(),
      produced: new Map(),
      deferred: { events: [], seen: [] },
      deferRepeats: full && delta && job.last.size > 0,
      emitted: 0,
      hoursEmitted: 0,
      rejected: 0,
      duplicates: 0,
      error: undefined,
    };
  }

  /** Upstream requests of `job`'s cycle: rate-limited, retried, aborted by stop(). */
  private fetchContext(job: Job): FetchContext {
    const { client, logger } = this.deps;
    return {
      client,
      market: this.options.market.slug,
      signal: job.requests.signal,
      request: (fn) =>
        withRetry(fn, {
          retries: this.options.retries,
          baseMs: this.options.backoffBaseMs,
          maxMs: this.options.backoffMaxMs,
          limiter: this.limiter,
          bare429Ms: this.adapter.limits?.bare429BackoffMs,
          signal: job.requests.signal,
          onRetry: (err, attempt, waitMs) =>
            logger.warn(
              { kind: job.kind, code: err.code, attempt, waitMs, msg: err.message },
              'retrying upstream request',
            ),
        }),
    };
  }

  /** Pages through the upstream, sending each page's records; what breaks it off is the cycle's error. */
  private async fetchPages(run: CycleRun): Promise<void> {
    const { job, kind, input } = run;
    try {
      for await (const page of aheadOne((job.adapter ?? this.adapter).pages(kind, this.fetchContext(job), input)))
        await this.takePage(run, page);
    } catch (err) {
      run.error = err;
    }
  }

  /** Counts a page's refused rows, then sends its records: a HISTORY day's hours before its close. */
  private async takePage(run: CycleRun, page: Page<Kind>): Promise<void> {
    const { kind, labels } = run;
    const { client, producer, metrics, logger } = this.deps;
    if (page.rejected.length > 0) {
      run.rejected += page.rejected.length;
      metrics.rejected.inc(labels, page.rejected.length);
      logger.warn({ kind, rejected: page.rejected.length, first: page.rejected[0]?.reason }, 'upstream rows refused');
    }
    const { out, pageSeen, hoursOut } = this.classify(run, page.rows, client.upstreamNow());
    // A day's hours before its close: a consumer that has the close has the hours before it.
    if (hoursOut.length > 0) {
      const res = await producer.send(await this.eventCodec('historyHours'), hoursOut);
      run.hoursEmitted += res.sent;
      run.rejected += res.rejected.length;
      metrics.events.inc(labels, res.sent);
    }
    if (out.length > 0) await this.send(run, out, pageSeen);
  }

  /**
   * A page's records. Rows the cycle already saw are counted and dropped, and so are sales an
   * earlier window sent; HISTORY rows become closes and hours; the other rows become records —
   * those the topic already says only on a FULL cycle, and there deferred to the cycle's end
   * (deferRepeats).
   */
  private classify(run: CycleRun, rows: readonly Emitted[], observedAt: number): PageRecords {
    const { job, kind, full, seen } = run;
    const { market } = this.options;
    const page: PageRecords = { out: [], pageSeen: [], hoursOut: [] };
    for (const row of rows) {
      const key = rowKey(kind, row);
      const e: Emitted = row;
      const before = seen.get(key);
      if (before) {
        this.countDuplicate(run, key, before, e);
        continue;
      }
      if (kind === 'SALES' && job.salesSeen.has(key)) continue;
      seen.set(key, e);
      if (kind === 'HISTORY') {
        const { point, hours } = historyRecords(market, row as RowMap['HISTORY'], observedAt);
        if (hours) page.hoursOut.push(hours);
        if (point) page.out.push(point);
        continue;
      }
      const last = job.last.get(key);
      const repeat = last !== undefined && sameRow(last, e);
      if (repeat && !full) continue;
      const event = toEvent<Kind>(kind, market, row, observedAt, run.cycleId);
      if (run.flagRecords) (event as { removals_sent?: boolean }).removals_sent = true;
      if (repeat && run.deferRepeats) {
        run.deferred.events.push(event);
        run.deferred.seen.push([key, e]);
        continue;
      }
      page.out.push(event);
      page.pageSeen.push([key, e]);
    }
    return page;
  }

  /**
   * A row the cycle saw before. An exact repeat (paging overlap) is harmless; the same item with
   * other data means we cannot tell which is true, so the cycle is not clean.
   */
  private countDuplicate(run: CycleRun, key: string, before: Emitted, row: Emitted): void {
    const { metrics, logger } = this.deps;
    if (sameRow(before, row)) {
      run.duplicates++;
      metrics.duplicates.inc(run.labels);
    } else {
      run.rejected++;
      metrics.rejected.inc(run.labels);
      logger.warn({ kind: run.kind, key }, 'conflicting duplicate row');
    }
  }

  /** Sends a page's records, or a batch of repeats; only what reached Kafka counts as said (job.last, salesSeen). */
  private async send(
    run: CycleRun,
    events: EventMap[EventKind][],
    pageSeen: readonly [string, Emitted][],
  ): Promise<void> {
    const { job, kind, delta } = run;
    let res: Awaited<ReturnType<EventProducer['send']>>;
    try {
      res = await this.deps.producer.send(run.codec, events);
    } catch (err) {
      if (delta) for (const [k, e] of pageSeen) if (!job.last.has(k)) job.unsure.set(k, e);
      throw err;
    }
    this.wrote(run, res.metadata);
    run.emitted += res.sent;
    run.rejected += res.rejected.length;
    this.deps.metrics.events.inc(run.labels, res.sent);
    if (delta)
      for (const [k, e] of pageSeen) {
        job.last.set(k, e);
        job.unsure.delete(k);
      }
    if (kind === 'SALES') for (const [k] of pageSeen) job.salesSeen.add(k);
  }

  /** Keeps, per partition of the data topic, the highest offset a send of the cycle was given. */
  private wrote(run: CycleRun, metadata: readonly RecordMetadata[]): void {
    for (const m of metadata) {
      const at = m.baseOffset ?? m.offset;
      if (m.topicName !== run.codec.topic || at === undefined) continue;
      const before = run.produced.get(m.partition);
      if (before === undefined || BigInt(at) > before) run.produced.set(m.partition, BigInt(at));
    }
  }

  /**
   * Sends the repeats a FULL cycle deferred to its end (deferRepeats). They were observed
   * whatever broke the cycle off later, so they go even then, in upstream order; their own
   * failure is the cycle's error only when it had none.
   */
  private async sendRepeats(run: CycleRun): Promise<void> {
    const { events, seen } = run.deferred;
    try {
      for (let i = 0; i < events.length; i += REPEATS_PER_SEND) {
        await this.send(run, events.slice(i, i + REPEATS_PER_SEND), seen.slice(i, i + REPEATS_PER_SEND));
      }
    } catch (err) {
      run.error ??= err;
    }
  }

  /**
   * A delta kind's removals: what the topic says (or may say: job.unsure) and the cycle did not
   * see. Only from a cycle that saw the whole upstream and refused nothing: an item missing from
   * a broken or partial answer may well still be listed.
   */
  private async sendRemovals(run: CycleRun, emptied: boolean): Promise<void> {
    const { job, kind, delta, seen } = run;
    const { market } = this.options;
    const { client, producer, metrics } = this.deps;
    if (!delta || !removalsAllowed({ error: run.error ? describe(run.error) : null, rejected: run.rejected, emptied }))
      return;
    const gone = [...new Map([...job.unsure, ...job.last])].filter(([k]) => !seen.has(k));
    const removals = gone.map(([, e]) => {
      const removal = toEvent(kind, market, removalOf(kind, e), client.upstreamNow(), run.cycleId);
      if (run.flagRecords) (removal as { removals_sent?: boolean }).removals_sent = true;
      return removal;
    });
    try {
      if (removals.length > 0) {
        const res = await producer.send(run.codec, removals);
        this.wrote(run, res.metadata);
        run.emitted += res.sent;
        metrics.events.inc(run.labels, res.sent);
      }
      for (const [k] of gone) {
        job.last.delete(k);
        job.unsure.delete(k);
      }
    } catch (err) {
      run.error = err;
    }
  }

  /** Decides the cycle's outcome, sends its marker, and reports it (metrics, log, result). */
  private async endCycle(run: CycleRun, emptied: boolean): Promise<CycleResult> {
    const { job, kind, delta, full, seen, codec } = run;
    const error = run.error ? describe(run.error) : null;
    const facts = { error, seen: seen.size, rejected: run.rejected, emptied, endOffsets: null };
    // Only a cycle that would be COMPLETE waits for end offsets (retries): the others remove
    // nothing, so their markers only say how fresh the marketplace is.
    const ends = await this.endOffsets(
      codec.topic,
      run.produced,
      cycleOutcome(facts).outcome === 'COMPLETE' ? (this.options.endOffsetAttempts ?? 3) : 1,
    );
    const { outcome, error: problem } = cycleOutcome({ ...facts, endOffsets: ends.ok ? null : ends.reason });
    if (full && outcome === 'COMPLETE') job.fullDay = run.day;
    if (delta && full && outcome === 'COMPLETE' && job.removals === 'unknown') job.removals = 'settling';
    const marker: PollCycleEvent = {
      market: this.options.market.slug,
      kind,
      cycle_id: run.cycleId,
      mode: full ? 'FULL' : 'DELTA',
      started_at: run.startedAt,
      finished_at: this.deps.client.upstreamNow(),
      items_seen: seen.size,
      events_emitted: run.emitted,
      outcome,
      error: problem,
      data_topic: codec.topic,
      end_offsets: ends.offsets,
      removals_sent: run.removalsSent,
    };
    await this.sendMarker(marker);
    this.reportCycle(run, marker);
    return { kind, marker, rejected: run.rejected, duplicates: run.duplicates };
  }

  /** A cycle's metrics and its log line, after its marker went: a warning unless COMPLETE. */
  private reportCycle(run: CycleRun, marker: PollCycleEvent): void {
    const { metrics, logger } = this.deps;
    const { kind, labels } = run;
    const { outcome } = marker;
    run.timer();
    metrics.cycles.inc({ ...labels, mode: marker.mode, outcome });
    if (outcome === 'COMPLETE') metrics.lastComplete.set(labels, Date.now() / 1000);
    const log = outcome === 'COMPLETE' ? logger.info.bind(logger) : logger.warn.bind(logger);
    log(
      {
        kind,
        cycle: run.cycleId,
        mode: marker.mode,
        outcome,
        seen: run.seen.size,
        emitted: run.emitted,
        ...(kind === 'HISTORY' ? { hoursEmitted: run.hoursEmitted } : {}),
        rejected: run.rejected,
        duplicates: run.duplicates,
        error: marker.error,
      },
      'cycle finished',
    );
  }

  private inputFor(job: Job, now: number): KindInput {
    // The window's end is fixed for the whole cycle: every page must describe the same window.
    if (job.kind === 'SALES') return { window: { from: job.salesFrom ?? now - this.options.salesLookbackMs, to: now } };
    if (job.history) {
      const today = Math.floor(now / DAY_MS);
      // Nothing due (a manual runOnce when caught up): the next day's close all the same.
      job.historyWork = job.history.next(today) ?? job.history.nextClose(today);
      const { day, closes, hourly } = job.historyWork;
      return { day, ...(hourly ? { hourly } : {}), ...(closes ? {} : { closes }) };
    }
    return {};
  }

  /** Sales continue from the newest sale seen (a minute of overlap, de-duplicated by id); history moves a day on. */
  private advanceWindows(job: Job, kind: Kind, seen: Map<string, Emitted>, error: unknown): void {
    if (kind === 'SALES' && !error) {
      let newest = job.salesFrom ?? 0;
      for (const e of seen.values()) newest = Math.max(newest, (e as RowMap['SALES']).sold_at);
      job.salesFrom = Math.max(job.salesFrom ?? 0, newest - 60_000);
      if (job.salesSeen.size > 200_000) job.salesSeen.clear();
      for (const [k, e] of seen) job.salesRecent.set(k, (e as RowMap['SALES']).sold_at);
      for (const [k, at] of job.salesRecent) if (at < job.salesFrom) job.salesRecent.delete(k);
    }
    if (job.history && job.historyWork && !error) job.history.done(job.historyWork);
  }

  private codec(kind: Kind | 'MARKER'): Promise<TopicCodec<EventKind>> {
    return this.eventCodec(kind === 'MARKER' ? 'pollCycle' : eventOf(kind));
  }

  /**
   * The serde holds each topic's codec and drops a registration that failed (the registry away),
   * so the next cycle asks again; nothing is cached here on top of it.
   */
  private eventCodec(eventKind: EventKind): Promise<TopicCodec<EventKind>> {
    return this.deps.serde.codec(`${topicFor(eventKind).name}${this.options.topicSuffix}`, eventKind);
  }

  /**
   * The data topic's high watermarks after the cycle's last send (acks=all): offsets the
   * consumer must have read before it applies this cycle's end (cycle-end.ts). Up to `attempts`
   * fetches, each bounded by kafkajs' own retries; then the marker goes without, and
   * cycleOutcome makes a cycle that would have been COMPLETE a PARTIAL one.
   */
  private async endOffsets(
    topic: string,
    produced: ReadonlyMap<number, bigint>,
    attempts: number,
  ): Promise<EndOffsets> {
    let last: EndOffsets = { ok: false, reason: 'not fetched', offsets: [] };
    const backoff = new Backoff({ baseMs: this.options.backoffBaseMs, maxMs: this.options.backoffMaxMs });
    for (let attempt = 1; attempt <= attempts; attempt++) {
      if (attempt > 1) await sleep(backoff.next());
      try {
        last = endOffsetsFrom(await this.deps.admin.fetchTopicOffsets(topic), produced);
      } catch (err) {
        last = { ok: false, reason: `fetching them failed: ${describe(err)}`, offsets: [] };
      }
      if (last.ok) return last;
      this.deps.logger.warn({ topic, attempt, attempts, reason: last.reason }, 'could not read end offsets');
    }
    return last;
  }

  private async sendMarker(marker: PollCycleEvent): Promise<void> {
    const codec = (await this.codec('MARKER')) as TopicCodec<'pollCycle'>;
    // kafkajs retried each send already; these attempts outlast a broker's leader election.
    const backoff = new Backoff({ baseMs: 500, maxMs: 4_000 });
    for (;;) {
      try {
        await this.deps.producer.send(codec, [marker]);
        return;
      } catch (err) {
        if (backoff.attempts >= 4) throw err;
        await sleep(backoff.next());
      }
    }
  }
}

function describe(err: unknown): string {
  if (err instanceof AppError) return `${err.code}: ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}

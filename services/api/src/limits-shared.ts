/**
 * Rate limits shared by the API processes of one machine without Redis: the counts live in the
 * node:cluster primary (one MemoryRateLimiter, whose `hitMany` is synchronous, so each batch is
 * counted atomically and the limits stay exact over the workers), and each worker sends it its
 * hits over the cluster's IPC channel, one message per event-loop turn with every key's batch
 * (limits-batch.ts), and awaits the answer by message id.
 *
 * Wiring: in the primary `const stop = serveSharedLimits(cluster)`, in each worker
 * `limiter: new SharedRateLimiter()`.
 *
 * The channel carries other messages too (prom-client's metric aggregation, the cluster's own):
 * ours have their own `type`, and each side ignores what is not of ours. A worker whose primary is
 * gone fails its hits rather than hang them: at once when the channel says it closed, else when no
 * answer came within `timeoutMs`.
 */
import type { RateLimiter } from './limits.js';
import { MemoryRateLimiter } from './limits.js';
import { HitCoalescer, type Batch } from './limits-batch.js';
import type { Admitted, LimitedKey, Verdict } from './limits-windows.js';
import { processChannel, type PrimaryChannel } from './ipc-channel.js';

const HIT = 'skinprices:limits:hit';
const ANSWER = 'skinprices:limits:answer';

/** One batch on the wire: the key's limits (all the primary needs of it), n and the time. */
type WireHit = [prefix: string, perSecond: number, perMinute: number, perDay: number, n: number, now: number];

export interface HitMessage {
  type: typeof HIT;
  id: number;
  hits: WireHit[];
}

/** The answer to the `HitMessage` of the same id: per hit its counts, or why none. */
type AnswerMessage =
  { type: typeof ANSWER; id: number; admitted: Admitted[] } | { type: typeof ANSWER; id: number; error: string };

const isHitMessage = (m: unknown): m is HitMessage =>
  typeof m === 'object' && m !== null && (m as HitMessage).type === HIT && Array.isArray((m as HitMessage).hits);

const isAnswer = (m: unknown): m is AnswerMessage =>
  typeof m === 'object' && m !== null && (m as AnswerMessage).type === ANSWER;

/** What the primary side needs of a cluster worker (node:cluster's `Worker` is one). */
export interface LimitsWorker {
  send(message: AnswerMessage, callback: (error: Error | null) => void): unknown;
}

/** What the primary side needs of node:cluster (the `cluster` module is one). */
export interface LimitsCluster {
  on(event: 'message', listener: (worker: LimitsWorker, message: unknown) => void): unknown;
  off(event: 'message', listener: (worker: LimitsWorker, message: unknown) => void): unknown;
}

function answer(limiter: MemoryRateLimiter, m: HitMessage): AnswerMessage {
  try {
    const admitted = m.hits.map(([prefix, perSecond, perMinute, perDay, n, now]) =>
      limiter.hitMany({ prefix, perSecond, perMinute, perDay }, n, now),
    );
    return { type: ANSWER, id: m.id, admitted };
  } catch (err) {
    return { type: ANSWER, id: m.id, error: String(err) };
  }
}

/**
 * In the cluster primary: counts the workers' hits in `limiter` and answers each message. Returns
 * the unsubscribe (the counts stay in `limiter`).
 */
export function serveSharedLimits(cluster: LimitsCluster, limiter = new MemoryRateLimiter()): () => void {
  const onMessage = (worker: LimitsWorker, message: unknown) => {
    if (!isHitMessage(message)) return;
    // A worker gone since it asked took its waiting requests with it: nobody to tell.
    worker.send(answer(limiter, message), () => {});
  };
  cluster.on('message', onMessage);
  return () => {
    cluster.off('message', onMessage);
  };
}

/** The worker's side of the IPC channel to the primary. */
export type LimitsChannel = PrimaryChannel<HitMessage>;

export interface SharedLimiterOptions {
  /** Default: this process's IPC channel (`process.send`, `process.on('message')`). */
  channel?: LimitsChannel;
  /** How long a turn's hits wait for the primary before they fail. */
  timeoutMs?: number;
}

interface Pending {
  batches: readonly Batch[];
  timer: NodeJS.Timeout;
}

/** In a cluster worker: the limits counted by the primary (`serveSharedLimits`). */
export class SharedRateLimiter implements RateLimiter {
  private readonly channel: LimitsChannel;
  private readonly timeoutMs: number;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  /** Set once the channel closed or the limiter did: every hit fails with it from then on. */
  private gone: Error | undefined;
  private readonly batches = new HitCoalescer((batches) => this.send(batches));
  private readonly unlisten: () => void;

  constructor(o: SharedLimiterOptions = {}) {
    if (!o.channel && !process.send) throw new Error('SharedRateLimiter: this process has no IPC channel');
    this.channel = o.channel ?? processChannel<HitMessage>();
    this.timeoutMs = o.timeoutMs ?? 2_000;
    this.unlisten = this.channel.listen(
      (m) => this.onMessage(m),
      () => this.end(new Error('rate limiter: the IPC channel to the cluster primary closed')),
    );
  }

  hit(key: LimitedKey, now = Date.now()): Promise<Verdict> {
    if (this.gone) return Promise.reject(this.gone);
    return this.batches.hit(key, now);
  }

  private send(batches: readonly Batch[]): void {
    if (this.gone) {
      for (const b of batches) b.fail(this.gone);
      return;
    }
    const id = ++this.nextId;
    const timer = setTimeout(() => this.settle(id, this.noAnswer()), this.timeoutMs);
    // The waiting requests keep the process alive, not this timer.
    timer.unref();
    this.pending.set(id, { batches, timer });
    const hits = batches.map((b): WireHit => [
      b.key.prefix,
      b.key.perSecond,
      b.key.perMinute,
      b.key.perDay,
      b.n,
      b.now,
    ]);
    this.channel.send({ type: HIT, id, hits }, (err) =>
      this.settle(id, new Error(`rate limiter: cannot reach the cluster primary: ${err.message}`)),
    );
  }

  private noAnswer(): Error {
    return new Error(
      `rate limiter: no answer from the cluster primary within ${this.timeoutMs} ms (is it alive, and serving the limits?)`,
    );
  }

  private onMessage(m: unknown): void {
    if (!isAnswer(m)) return;
    if ('error' in m) this.settle(m.id, new Error(`rate limiter: the cluster primary failed: ${m.error}`));
    else this.settle(m.id, m.admitted);
  }

  /** Settles the turn `id` (once: a late answer after its timeout finds nothing). */
  private settle(id: number, outcome: readonly Admitted[] | Error): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    clearTimeout(p.timer);
    if (!(outcome instanceof Error) && outcome.length !== p.batches.length)
      outcome = new Error(`rate limiter: the cluster primary answered ${outcome.length} of ${p.batches.length} hits`);
    if (outcome instanceof Error) for (const b of p.batches) b.fail(outcome);
    else p.batches.forEach((b, i) => b.settle(outcome[i]!));
  }

  private end(err: Error): void {
    this.gone ??= err;
    for (const id of [...this.pending.keys()]) this.settle(id, err);
  }

  async close(): Promise<void> {
    this.unlisten();
    this.end(new Error('rate limiter: closed'));
  }
}

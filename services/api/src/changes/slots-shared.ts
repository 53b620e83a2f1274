/**
 * Open streams per key counted over the API processes of one machine: the counts live in the
 * node:cluster primary, and each worker asks it for a slot over the cluster's IPC channel (one
 * message per stream that opens, and one when it closes), as the rate limits do (limits-shared.ts).
 * Stream slots were never in Redis: with several machines a key holds its plan's streams on each.
 *
 * Wiring: in the primary `const stop = serveSharedStreamSlots(cluster)`, in each worker
 * `streamSlots: new SharedStreamSlots()`.
 *
 * The primary counts per key and per worker, so a worker that exits gives back every slot it held
 * (its streams died with it). Our messages have their own `type`; each side ignores the rest. A
 * worker whose primary is gone fails take() rather than hang it (the route answers 503): at once
 * when the channel says it closed, else when no answer came within `timeoutMs`.
 */
import { StreamSlots, type StreamSlotCounter } from './waker.js';
import { processChannel, type PrimaryChannel } from '../ipc-channel.js';

const TAKE = 'skinprices:streams:take';
const GIVE = 'skinprices:streams:give';
const GRANT = 'skinprices:streams:grant';

interface TakeMessage {
  type: typeof TAKE;
  id: number;
  keyId: string;
  limit: number;
}

interface GiveMessage {
  type: typeof GIVE;
  keyId: string;
}

/** A worker's messages to the primary. */
type SlotsRequest = TakeMessage | GiveMessage;

/** The answer to the `TakeMessage` of the same id. */
interface GrantMessage {
  type: typeof GRANT;
  id: number;
  ok: boolean;
}

const isTake = (m: unknown): m is TakeMessage =>
  typeof m === 'object' &&
  m !== null &&
  (m as TakeMessage).type === TAKE &&
  typeof (m as TakeMessage).id === 'number' &&
  typeof (m as TakeMessage).keyId === 'string' &&
  typeof (m as TakeMessage).limit === 'number';

const isGive = (m: unknown): m is GiveMessage =>
  typeof m === 'object' &&
  m !== null &&
  (m as GiveMessage).type === GIVE &&
  typeof (m as GiveMessage).keyId === 'string';

const isGrant = (m: unknown): m is GrantMessage =>
  typeof m === 'object' &&
  m !== null &&
  (m as GrantMessage).type === GRANT &&
  typeof (m as GrantMessage).id === 'number';

/** What the primary side needs of a cluster worker (node:cluster's `Worker` is one). */
export interface SlotsWorker {
  send(message: GrantMessage, callback: (error: Error | null) => void): unknown;
}

/** What the primary side needs of node:cluster (the `cluster` module is one). */
export interface SlotsCluster {
  on(event: 'message', listener: (worker: SlotsWorker, message: unknown) => void): unknown;
  on(event: 'exit', listener: (worker: SlotsWorker) => void): unknown;
  off(event: 'message', listener: (worker: SlotsWorker, message: unknown) => void): unknown;
  off(event: 'exit', listener: (worker: SlotsWorker) => void): unknown;
}

/**
 * In the cluster primary: one count per key over every worker, and what each worker holds of it,
 * given back when the worker exits. Returns the unsubscribe.
 */
export function serveSharedStreamSlots(cluster: SlotsCluster): () => void {
  const total = new StreamSlots();
  const held = new Map<SlotsWorker, Map<string, number>>();
  const exited = new WeakSet<SlotsWorker>();
  const onMessage = (worker: SlotsWorker, m: unknown) => {
    if (isTake(m)) {
      // A take that arrives after its worker's exit would hold a slot nobody gives back.
      const ok = !exited.has(worker) && total.takeNow(m.keyId, m.limit);
      if (ok) {
        const mine = held.get(worker) ?? new Map<string, number>();
        held.set(worker, mine.set(m.keyId, (mine.get(m.keyId) ?? 0) + 1));
      }
      // A worker gone since it asked: its exit gives the slot back.
      worker.send({ type: GRANT, id: m.id, ok }, () => {});
    } else if (isGive(m)) {
      const mine = held.get(worker);
      const n = mine?.get(m.keyId) ?? 0;
      // Only what this worker holds: a stray give must not free another worker's slot.
      if (!mine || n === 0) return;
      if (n === 1) mine.delete(m.keyId);
      else mine.set(m.keyId, n - 1);
      total.give(m.keyId);
    }
  };
  const onExit = (worker: SlotsWorker) => {
    exited.add(worker);
    for (const [keyId, n] of held.get(worker) ?? []) for (let i = 0; i < n; i++) total.give(keyId);
    held.delete(worker);
  };
  cluster.on('message', onMessage);
  cluster.on('exit', onExit);
  return () => {
    cluster.off('message', onMessage);
    cluster.off('exit', onExit);
  };
}

/** The worker's side of the IPC channel to the primary. */
export type SlotsChannel = PrimaryChannel<SlotsRequest>;

export interface SharedStreamSlotsOptions {
  /** Default: this process's IPC channel (`process.send`, `process.on('message')`). */
  channel?: SlotsChannel;
  /** How long a take() waits for the primary before it fails. */
  timeoutMs?: number;
}

interface Pending {
  resolve: (ok: boolean) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

/** In a cluster worker: the open streams counted by the primary (`serveSharedStreamSlots`). */
export class SharedStreamSlots implements StreamSlotCounter {
  private readonly channel: SlotsChannel;
  private readonly timeoutMs: number;
  private readonly pending = new Map<number, Pending>();
  /** Takes that timed out, by id: a slot the primary grants them late is given back at once. */
  private readonly abandoned = new Map<number, string>();
  private nextId = 0;
  /** Set once the channel closed or this did: every take fails with it from then on. */
  private gone: Error | undefined;
  private readonly unlisten: () => void;

  constructor(o: SharedStreamSlotsOptions = {}) {
    if (!o.channel && !process.send) throw new Error('SharedStreamSlots: this process has no IPC channel');
    this.channel = o.channel ?? processChannel<SlotsRequest>();
    this.timeoutMs = o.timeoutMs ?? 2_000;
    this.unlisten = this.channel.listen(
      (m) => this.onMessage(m),
      () => this.end(new Error('stream slots: the IPC channel to the cluster primary closed')),
    );
  }

  take(keyId: string, limit: number): Promise<boolean> {
    if (this.gone) return Promise.reject(this.gone);
    const id = ++this.nextId;
    return new Promise<boolean>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.abandoned.set(id, keyId);
        this.settle(
          id,
          new Error(`stream slots: no answer from the cluster primary within ${this.timeoutMs} ms (is it alive?)`),
        );
      }, this.timeoutMs);
      // The waiting request keeps the process alive, not this timer.
      timer.unref();
      this.pending.set(id, { resolve, reject, timer });
      this.channel.send({ type: TAKE, id, keyId, limit }, (err) =>
        this.settle(id, new Error(`stream slots: cannot reach the cluster primary: ${err.message}`)),
      );
    });
  }

  /** Fire and forget: with the channel gone, so is the primary's count (or it frees ours at our exit). */
  give(keyId: string): void {
    if (this.gone) return;
    this.channel.send({ type: GIVE, keyId }, () => {});
  }

  private onMessage(m: unknown): void {
    if (!isGrant(m)) return;
    const late = this.abandoned.get(m.id);
    if (late === undefined) return this.settle(m.id, m.ok);
    this.abandoned.delete(m.id);
    if (m.ok) this.give(late);
  }

  /** Settles the take `id` (once: a late answer after its timeout finds nothing pending). */
  private settle(id: number, outcome: boolean | Error): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    clearTimeout(p.timer);
    if (outcome instanceof Error) p.reject(outcome);
    else p.resolve(outcome);
  }

  private end(err: Error): void {
    this.gone ??= err;
    this.abandoned.clear();
    for (const id of [...this.pending.keys()]) this.settle(id, err);
  }

  close(): void {
    this.unlisten();
    this.end(new Error('stream slots: closed'));
  }
}

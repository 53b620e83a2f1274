import cluster, { type Worker } from 'node:cluster';
import { EventEmitter, once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { serveSharedStreamSlots, SharedStreamSlots, type SlotsChannel, type SlotsWorker } from './slots-shared.js';
import { takeMany } from './slots-shared-worker.js';
import { StreamSlots } from './waker.js';

/** Messages cross a real IPC channel as JSON, a turn later: so do they here. */
const overIpc = (deliver: () => void) => setImmediate(deliver);
const copy = <T>(m: T): T => JSON.parse(JSON.stringify(m)) as T;
const turn = () => new Promise((resolve) => setImmediate(resolve));

/**
 * An in-memory cluster: `primary` stands for node:cluster in the primary, each `worker()` for a
 * worker with its IPC channel to the primary: `deliver` hands it a message as from the primary,
 * `exit()` says it exited. The primary's answers reach it `answerDelayMs` late when set.
 */
function memoryCluster() {
  const primary = new EventEmitter();
  const worker = (o: { timeoutMs?: number; answerDelayMs?: number } = {}) => {
    const listeners = new Set<(m: unknown) => void>();
    const closers = new Set<() => void>();
    const deliver = (m: unknown) => listeners.forEach((l) => l(copy(m)));
    const later = (f: () => void) => (o.answerDelayMs ? setTimeout(f, o.answerDelayMs) : overIpc(f));
    const handle: SlotsWorker = { send: (m, callback) => later(() => (deliver(m), callback(null))) };
    const channel: SlotsChannel = {
      send: (m) => overIpc(() => primary.emit('message', handle, copy(m))),
      listen(onMessage, onClosed) {
        listeners.add(onMessage);
        closers.add(onClosed);
        return () => (listeners.delete(onMessage), closers.delete(onClosed));
      },
    };
    return {
      handle,
      deliver,
      slots: new SharedStreamSlots({ channel, timeoutMs: o.timeoutMs ?? 1_000 }),
      exit: () => {
        closers.forEach((c) => c());
        primary.emit('exit', handle, 0, null);
      },
    };
  };
  return { primary, worker };
}

/** A channel to nowhere: sends vanish (or fail); `close()` says the channel closed. */
function deadChannel(sendFails = false) {
  let closed = () => {};
  const channel: SlotsChannel = {
    send: (_m, failed) => sendFails && failed(new Error('channel closed')),
    listen(_onMessage, onClosed) {
      closed = onClosed;
      return () => {};
    },
  };
  return { channel, close: () => closed() };
}

const count = (took: boolean[]) => took.filter(Boolean).length;

describe('StreamSlots in one process', () => {
  it('takes up to the limit per key, and gives back', async () => {
    const s = new StreamSlots();
    expect(await takeMany(s, 'k', 2, 3)).toEqual([true, true, false]);
    expect(await s.take('j', 2)).toBe(true);
    s.give('k');
    expect(await s.take('k', 2)).toBe(true);
    expect(await s.take('k', 2)).toBe(false);
    expect(await s.take('basic', 0)).toBe(false);
  });
});

describe('SharedStreamSlots over an in-memory channel', () => {
  it("two workers get exactly the plan's limit of streams between them", async () => {
    const c = memoryCluster();
    const stop = serveSharedStreamSlots(c.primary);
    const [a, b] = [c.worker(), c.worker()];
    const took = await Promise.all([takeMany(a.slots, 'pro', 2, 5), takeMany(b.slots, 'pro', 2, 5)]);
    expect(count(took.flat())).toBe(2);
    const ent = await Promise.all([takeMany(a.slots, 'ent', 10, 8), takeMany(b.slots, 'ent', 10, 8)]);
    expect(count(ent.flat())).toBe(10);
    // A slot given back by either is the other's to take.
    const holder = count(took[0]!) > 0 ? a : b;
    const other = holder === a ? b : a;
    holder.slots.give('pro');
    await turn();
    expect(await other.slots.take('pro', 2)).toBe(true);
    expect(await holder.slots.take('pro', 2)).toBe(false);
    stop();
  });

  it("a worker's exit gives back every slot it held, and only its own", async () => {
    const c = memoryCluster();
    const stop = serveSharedStreamSlots(c.primary);
    const [a, b] = [c.worker(), c.worker()];
    expect(await takeMany(a.slots, 'k', 10, 7)).toEqual(Array(7).fill(true));
    expect(await takeMany(b.slots, 'k', 10, 5)).toEqual([true, true, true, false, false]);
    expect(await a.slots.take('j', 2)).toBe(true);
    a.exit();
    // b's three stay held: seven more fit, not ten.
    expect(count(await takeMany(b.slots, 'k', 10, 10))).toBe(7);
    expect(await takeMany(b.slots, 'j', 2, 2)).toEqual([true, true]);
    stop();
  });

  it("a give for a slot the worker does not hold frees nobody's", async () => {
    const c = memoryCluster();
    const stop = serveSharedStreamSlots(c.primary);
    const [a, b] = [c.worker(), c.worker()];
    expect(await takeMany(a.slots, 'k', 2, 2)).toEqual([true, true]);
    b.slots.give('k');
    await turn();
    expect(await b.slots.take('k', 2)).toBe(false);
    stop();
  });

  it('a take that arrives after its worker exited holds nothing', async () => {
    const c = memoryCluster();
    const stop = serveSharedStreamSlots(c.primary);
    const a = c.worker();
    const answered: unknown[] = [];
    const ghost: SlotsWorker = { send: (m) => answered.push(m) };
    c.primary.emit('exit', ghost, 0, null);
    c.primary.emit('message', ghost, { type: 'skinprices:streams:take', id: 1, keyId: 'k', limit: 1 });
    expect(answered).toEqual([{ type: 'skinprices:streams:grant', id: 1, ok: false }]);
    expect(await a.slots.take('k', 1)).toBe(true);
    stop();
  });

  it('ignores messages that are not its own, on both sides', async () => {
    const c = memoryCluster();
    const stop = serveSharedStreamSlots(c.primary);
    const answered: unknown[] = [];
    const worker: SlotsWorker = { send: (m) => answered.push(m) };
    c.primary.emit('message', worker, { type: 'prom-client:getMetricsReq', requestId: 1 });
    c.primary.emit('message', worker, { type: 'skinprices:limits:hit', id: 1, hits: [] });
    c.primary.emit('message', worker, { type: 'skinprices:streams:take', id: 1, keyId: 7 }); // malformed
    c.primary.emit('message', worker, 'hello');
    expect(answered).toEqual([]);
    const a = c.worker();
    const pending = a.slots.take('k', 1);
    a.deliver({ type: 'prom-client:getMetricsRes', id: 1 });
    a.deliver({ type: 'skinprices:limits:answer', id: 1, admitted: [] });
    a.deliver(null);
    a.deliver({ type: 'skinprices:streams:grant', id: 99, ok: false }); // nobody asked
    expect(await pending).toBe(true);
    stop();
  });

  it('a slot granted after its take gave up is given back', async () => {
    const c = memoryCluster();
    const stop = serveSharedStreamSlots(c.primary);
    const slow = c.worker({ timeoutMs: 50, answerDelayMs: 150 });
    await expect(slow.slots.take('k', 1)).rejects.toThrow(/no answer from the cluster primary within 50 ms/);
    const other = c.worker();
    expect(await other.slots.take('k', 1)).toBe(false); // the primary counted it
    await new Promise((resolve) => setTimeout(resolve, 200)); // the late grant, and the give it causes
    expect(await other.slots.take('k', 1)).toBe(true);
    stop();
  });

  it('after unsubscribing, the primary answers no more', async () => {
    const c = memoryCluster();
    serveSharedStreamSlots(c.primary)();
    expect(c.primary.listenerCount('message') + c.primary.listenerCount('exit')).toBe(0);
    await expect(c.worker({ timeoutMs: 50 }).slots.take('k', 1)).rejects.toThrow(/no answer/);
  });
});

describe('SharedStreamSlots without its primary', () => {
  it('fails a take when no answer comes in time, not hang it', async () => {
    const s = new SharedStreamSlots({ channel: deadChannel().channel, timeoutMs: 100 });
    const started = Date.now();
    await expect(s.take('k', 2)).rejects.toThrow(/no answer from the cluster primary within 100 ms/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(90);
  });

  it('fails waiting takes at once when the channel closes, and every take after', async () => {
    const dead = deadChannel();
    const s = new SharedStreamSlots({ channel: dead.channel, timeoutMs: 60_000 });
    const waiting = s.take('k', 2);
    dead.close();
    await expect(waiting).rejects.toThrow(/IPC channel to the cluster primary closed/);
    await expect(s.take('k', 2)).rejects.toThrow(/IPC channel to the cluster primary closed/);
    s.give('k'); // nowhere to send: a no-op, not a throw
  });

  it('fails a take that cannot be sent', async () => {
    const s = new SharedStreamSlots({ channel: deadChannel(true).channel, timeoutMs: 60_000 });
    await expect(s.take('k', 2)).rejects.toThrow(/cannot reach the cluster primary: channel closed/);
  });

  it('close fails what waits, and every take after', async () => {
    const s = new SharedStreamSlots({ channel: deadChannel().channel, timeoutMs: 60_000 });
    const waiting = s.take('k', 2);
    s.close();
    await expect(waiting).rejects.toThrow(/closed/);
    await expect(s.take('k', 2)).rejects.toThrow(/closed/);
  });
});

/** The next message of `type` from `worker`. */
async function nextMessage<T>(worker: Worker, type: string): Promise<T> {
  for (;;) {
    const [m] = (await once(worker, 'message')) as [{ type?: string } & T];
    if (m.type === type) return m;
  }
}

describe('SharedStreamSlots in real cluster workers', () => {
  it("two forked workers get exactly the limit between them, and one's exit frees its slots", async () => {
    cluster.setupPrimary({
      exec: fileURLToPath(new URL('./slots-shared-worker.ts', import.meta.url)),
      execArgv: ['--import', 'tsx'],
    });
    const stop = serveSharedStreamSlots(cluster);
    const workers = [cluster.fork(), cluster.fork()];
    const take = async (w: Worker, n: number) => {
      w.send({ type: 'test:take', keyId: `ipc${process.pid}`, limit: 3, n });
      const a = await nextMessage<{ took?: boolean[]; error?: string }>(w, 'test:took');
      expect(a.error).toBeUndefined();
      return a.took!;
    };
    try {
      await Promise.all(workers.map((w) => nextMessage(w, 'test:ready')));
      const [a, b] = workers as [Worker, Worker];
      const both = await Promise.all([take(a, 2), take(b, 2)]);
      expect(count(both.flat())).toBe(3);
      const heldByA = count(both[0]!);
      a.kill();
      await once(a, 'exit');
      expect(count(await take(b, 3))).toBe(heldByA);
    } finally {
      stop();
      for (const w of workers) if (!w.isDead()) w.kill();
    }
  }, 30_000);
});

import cluster, { type Worker } from 'node:cluster';
import { EventEmitter, once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { hammer, type HammerPlan, type Tally } from './limits-shared-hammer.js';
import {
  serveSharedLimits,
  SharedRateLimiter,
  type HitMessage,
  type LimitsChannel,
  type LimitsWorker,
} from './limits-shared.js';

/** Messages cross a real IPC channel as JSON, a turn later: so do they here. */
const overIpc = (deliver: () => void) => setImmediate(deliver);
const copy = <T>(m: T): T => JSON.parse(JSON.stringify(m)) as T;

/**
 * An in-memory cluster: `cluster` stands for node:cluster in the primary, each `channel()` for a
 * worker's IPC channel to it. `sent` records what the workers sent.
 */
function memoryCluster() {
  const primary = new EventEmitter();
  const sent: HitMessage[] = [];
  const closers = new Set<() => void>();
  const channel = (): LimitsChannel => {
    const listeners = new Set<(m: unknown) => void>();
    const worker: LimitsWorker = {
      send: (m, callback) => overIpc(() => (listeners.forEach((l) => l(copy(m))), callback(null))),
    };
    return {
      send(m) {
        sent.push(copy(m));
        overIpc(() => primary.emit('message', worker, copy(m)));
      },
      listen(onMessage, onClosed) {
        listeners.add(onMessage);
        closers.add(onClosed);
        return () => (listeners.delete(onMessage), closers.delete(onClosed));
      },
    };
  };
  return { primary, channel, sent, closeAll: () => closers.forEach((c) => c()) };
}

/** A channel to nowhere: sends vanish; `close()` says the channel closed. */
function deadChannel(sendFails = false) {
  let closed = () => {};
  const channel: LimitsChannel = {
    send: (_m, failed) => sendFails && failed(new Error('channel closed')),
    listen(_onMessage, onClosed) {
      closed = onClosed;
      return () => {};
    },
  };
  return { channel, close: () => closed() };
}

const DAY = Date.UTC(2030, 0, 1); // the start of a day, so of a minute and a second too
const key = (prefix: string, perSecond: number, perMinute: number, perDay: number) => ({
  prefix,
  perSecond,
  perMinute,
  perDay,
});

/** Three keys each limited by one window, hammered 20 turns × 10 hits from each side. */
const plan = (tag: string): HammerPlan => ({
  keys: [
    { key: key(`${tag}-s`, 37, 1e6, 1e9), start: DAY + 500, stepMs: 0 },
    { key: key(`${tag}-m`, 1e6, 53, 1e9), start: DAY, stepMs: 1_000 },
    { key: key(`${tag}-d`, 1e6, 1e6, 71), start: DAY, stepMs: 60_000 },
  ],
  turns: 20,
  perTurn: 10,
});

/** The tallies of both sides summed: 400 hits per key, exactly each window's limit admitted. */
function expectExact(tag: string, tallies: Tally[]) {
  const sum = (prefix: string) =>
    tallies.reduce(
      (acc, t) => ({
        ok: acc.ok + (t[prefix]?.ok ?? 0),
        second: acc.second + (t[prefix]?.second ?? 0),
        minute: acc.minute + (t[prefix]?.minute ?? 0),
        day: acc.day + (t[prefix]?.day ?? 0),
      }),
      { ok: 0, second: 0, minute: 0, day: 0 },
    );
  expect(sum(`${tag}-s`)).toEqual({ ok: 37, second: 363, minute: 0, day: 0 });
  expect(sum(`${tag}-m`)).toEqual({ ok: 53, second: 0, minute: 347, day: 0 });
  expect(sum(`${tag}-d`)).toEqual({ ok: 71, second: 0, minute: 0, day: 329 });
}

describe('SharedRateLimiter over an in-memory channel', () => {
  it("two workers hammering the same keys get exactly each window's limit between them", async () => {
    const c = memoryCluster();
    const stop = serveSharedLimits(c.primary);
    const workers = [new SharedRateLimiter({ channel: c.channel() }), new SharedRateLimiter({ channel: c.channel() })];
    const tallies = await Promise.all(workers.map((w) => hammer(w, plan('mem'))));
    expectExact('mem', tallies);
    // One message per worker per turn, each with the turn's three batches.
    expect(c.sent).toHaveLength(40);
    for (const m of c.sent) expect(m.hits.map((h) => h[4])).toEqual([10, 10, 10]);
    stop();
  });

  it('a turn is one message, with one batch per key', async () => {
    const c = memoryCluster();
    const stop = serveSharedLimits(c.primary);
    const l = new SharedRateLimiter({ channel: c.channel() });
    const keys = [key('a', 10, 100, 1_000), key('b', 10, 100, 1_000)];
    const got = await Promise.all(Array.from({ length: 50 }, (_, i) => l.hit(keys[i % 2]!, DAY)));
    expect(c.sent).toEqual([
      {
        type: 'skinprices:limits:hit',
        id: 1,
        hits: [
          ['a', 10, 100, 1_000, 25, DAY],
          ['b', 10, 100, 1_000, 25, DAY],
        ],
      },
    ]);
    expect(got.filter((v) => v.ok)).toHaveLength(20);
    expect(got[20]).toEqual({ ok: false, window: 'second', retryAfterS: 1 });
    stop();
  });

  it('ignores messages that are not its own, on both sides', async () => {
    const c = memoryCluster();
    const stop = serveSharedLimits(c.primary);
    const answered: unknown[] = [];
    const worker: LimitsWorker = { send: (m) => answered.push(m) };
    // prom-client's aggregation asks the workers over the same channel.
    c.primary.emit('message', worker, { type: 'prom-client:getMetricsReq', requestId: 1 });
    c.primary.emit('message', worker, 'hello');
    expect(answered).toEqual([]);
    let deliver: (m: unknown) => void = () => {};
    const channel = c.channel();
    const l = new SharedRateLimiter({
      channel: { send: channel.send, listen: (on, closed) => channel.listen((deliver = on), closed) },
    });
    const pending = l.hit(key('k', 1, 1, 1), DAY);
    deliver({ type: 'prom-client:getMetricsRes', id: 1 });
    deliver(null);
    deliver({ type: 'skinprices:limits:answer', id: 99, admitted: [[0, 0, 0]] }); // nobody asked
    expect(await pending).toEqual({ ok: true });
    stop();
  });

  it('after unsubscribing, the primary answers no more', async () => {
    const c = memoryCluster();
    serveSharedLimits(c.primary)();
    const l = new SharedRateLimiter({ channel: c.channel(), timeoutMs: 50 });
    await expect(l.hit(key('k', 1, 1, 1), DAY)).rejects.toThrow(/no answer from the cluster primary within 50 ms/);
  });
});

describe('SharedRateLimiter without its primary', () => {
  it('fails the hits when no answer comes in time, not hang them', async () => {
    const l = new SharedRateLimiter({ channel: deadChannel().channel, timeoutMs: 100 });
    const started = Date.now();
    const all = await Promise.allSettled([l.hit(key('k', 1, 1, 1)), l.hit(key('j', 1, 1, 1))]);
    expect(all.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(String((all[0] as PromiseRejectedResult).reason)).toMatch(/no answer from the cluster primary/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(90);
  });

  it('fails waiting hits at once when the channel closes, and every hit after', async () => {
    const dead = deadChannel();
    const l = new SharedRateLimiter({ channel: dead.channel, timeoutMs: 60_000 });
    const waiting = l.hit(key('k', 1, 1, 1));
    await new Promise((resolve) => setImmediate(resolve)); // the turn is sent
    dead.close();
    await expect(waiting).rejects.toThrow(/IPC channel to the cluster primary closed/);
    await expect(l.hit(key('k', 1, 1, 1))).rejects.toThrow(/IPC channel to the cluster primary closed/);
  });

  it('fails the hits of a turn that cannot be sent', async () => {
    const l = new SharedRateLimiter({ channel: deadChannel(true).channel, timeoutMs: 60_000 });
    await expect(l.hit(key('k', 1, 1, 1))).rejects.toThrow(/cannot reach the cluster primary: channel closed/);
  });

  it('close fails what waits, and every hit after', async () => {
    const l = new SharedRateLimiter({ channel: deadChannel().channel, timeoutMs: 60_000 });
    const waiting = l.hit(key('k', 1, 1, 1));
    await new Promise((resolve) => setImmediate(resolve));
    await l.close();
    await expect(waiting).rejects.toThrow(/closed/);
    await expect(l.hit(key('k', 1, 1, 1))).rejects.toThrow(/closed/);
  });
});

/** The next message of `type` from `worker`. */
async function nextMessage<T>(worker: Worker, type: string): Promise<T> {
  for (;;) {
    const [m] = (await once(worker, 'message')) as [{ type?: string } & T];
    if (m.type === type) return m;
  }
}

describe('SharedRateLimiter in real cluster workers', () => {
  it("two forked workers hammering the same keys get exactly each window's limit between them", async () => {
    cluster.setupPrimary({
      exec: fileURLToPath(new URL('./limits-shared-hammer.ts', import.meta.url)),
      execArgv: ['--import', 'tsx'],
    });
    const stop = serveSharedLimits(cluster);
    const workers = [cluster.fork(), cluster.fork()];
    try {
      await Promise.all(workers.map((w) => nextMessage(w, 'test:ready')));
      const tag = `ipc${process.pid}`;
      const answers = await Promise.all(
        workers.map((w) => {
          w.send({ type: 'test:hammer', plan: plan(tag) });
          return nextMessage<{ tally?: Tally; error?: string }>(w, 'test:tally');
        }),
      );
      expect(answers.map((a) => a.error)).toEqual([undefined, undefined]);
      expectExact(
        tag,
        answers.map((a) => a.tally!),
      );
    } finally {
      stop();
      for (const w of workers) w.kill();
    }
  }, 30_000);
});

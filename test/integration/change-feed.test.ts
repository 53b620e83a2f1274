/**
 * Following changes over HTTP on a real pipeline (simulator → poller → Kafka → materializer →
 * PostgreSQL → outbox → price_change_log → API on a loopback port):
 * - pages of GET /v1/prices/changes, walked with a small limit while new changes arrive, hold
 *   every committed change exactly once, in commit order, equal to what price-changes.v1 carries;
 * - a stream subscriber that disconnects mid-way and reconnects with Last-Event-ID (as EventSource
 *   does) sees every change exactly once, including those committed while it was away;
 * - curl -N reads the stream as a customer would;
 * - cursors that cannot continue without a gap are refused (410), garbage is a 400, and a key
 *   holds only its plan's number of streams.
 */
import { execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { topicFor } from '@skinprices/events';
import type { Poller } from '@skinprices/poller';
import type { Pool } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  projectTopics,
  readTopic,
  startMaterializer,
  startOutbox,
  startPoller,
  startSimulator,
  untilApplied,
  type Sim,
} from '../support/pipeline.js';
import { startApi } from '../support/api.js';
import { TestStack } from '../support/stack.js';

interface Change {
  cursor: string;
  market: string;
  market_hash_name: string;
  phase: string;
  new_price: string | null;
  new_count: number | null;
  observed_at: string;
}

/** One SSE event as a client parses it (the fields this test uses). */
interface SseEvent {
  id?: string;
  event: string;
  data: string;
}

/** Parses text/event-stream chunks into events (comments skipped), as the SSE spec describes. */
function sseParser(onEvent: (e: SseEvent) => void): (chunk: string) => void {
  let buffer = '';
  return (chunk) => {
    buffer += chunk;
    let cut: number;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const e: SseEvent = { event: 'message', data: '' };
      let any = false;
      for (const line of block.split('\n')) {
        if (line.startsWith(':') || line === '') continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'id') e.id = value;
        else if (field === 'event') e.event = value;
        else if (field === 'data') e.data += (e.data ? '\n' : '') + value;
        else continue;
        any = true;
      }
      if (any && e.event !== 'message') onEvent(e);
    }
  };
}

describe('the HTTP change feed and stream', () => {
  const stack = new TestStack();
  let sim: Sim;
  let suffix: string;
  let pool: Pool;
  let origin: string;
  let poller: Poller;
  const keys: Record<'basic' | 'pro', string> = { basic: '', pro: '' };

  /** Moves the simulated market on and waits until its changes are committed and logged. */
  async function round(hours = 1): Promise<void> {
    await sim.control('POST', '/_sim/clock', { advanceMs: hours * 3_600_000 });
    await untilApplied(pool, (await poller.runOnce('LISTINGS')).marker.cycle_id, 60_000);
    for (let i = 0; ; i++) {
      const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM price_change_outbox');
      if (rows[0]?.n === 0) return;
      if (i > 300) throw new Error('the outbox did not drain');
      await sleep(100);
    }
  }

  const logRows = async (): Promise<{ seq: string; market_hash_name: string; new_price: string | null }[]> =>
    (
      await pool.query<{ seq: string; market_hash_name: string; new_price: string | null }>(
        'SELECT seq, market_hash_name, new_price::text FROM price_change_log ORDER BY seq',
      )
    ).rows;
  const seqOf = (cursor: string) => cursor.split('-')[1] as string;

  /** A GET as a well-behaved client makes it: a 429 (10 requests a second per key) waits its Retry-After. */
  const get = async (path: string, key = keys.basic, headers: Record<string, string> = {}) => {
    for (;;) {
      const res = await fetch(`${origin}${path}`, { headers: { 'x-api-key': key, ...headers } });
      const body = (await res.json()) as Record<string, unknown>;
      if (res.status === 429 && (body.error as { code: string }).code === 'rate_limited') {
        await sleep(Number(res.headers.get('retry-after') ?? 1) * 1000);
        continue;
      }
      return { status: res.status, body };
    }
  };

  beforeAll(async () => {
    sim = await startSimulator(stack, 40);
    suffix = await projectTopics(stack);
    const read = await stack.schema();
    pool = read.pool;
    await startMaterializer(stack, suffix, pool);
    await startOutbox(stack, suffix, pool);
    poller = (await startPoller(stack, sim, 'cn-b', suffix)).poller;
    // No notifications here: streams find new changes by looking every 100 ms.
    const api = await startApi(stack, pool, {
      plans: ['basic', 'pro'],
      customer: 'feed.example',
      listen: true,
      deps: { changePollMs: 100 },
    });
    origin = api.origin as string;
    keys.basic = api.keys.basic;
    keys.pro = api.keys.pro;
    await round(0);
  }, 180_000);
  afterAll(() => stack.cleanup());

  it('pages hold every committed change once, in commit order, equal to price-changes.v1', async () => {
    const seen: Change[] = [];
    let cursor: string | undefined;
    let pages = 0;
    const walk = async () => {
      for (;;) {
        const res = await get(`/v1/prices/changes?limit=7${cursor ? `&since=${cursor}` : ''}`);
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        seen.push(...(res.body.data as Change[]));
        cursor = res.body.next_cursor as string;
        pages++;
        if (!res.body.has_more) return;
      }
    };
    await walk();
    // Changes arrive between walks: continuing from next_cursor yields only the new ones.
    await round();
    await walk();
    await round();
    await walk();
    const log = await logRows();
    expect(seen.map((c) => seqOf(c.cursor))).toEqual(log.map((r) => r.seq));
    expect(log.length).toBeGreaterThan(40);
    expect(pages).toBeGreaterThanOrEqual(Math.ceil(log.length / 7));
    expect(seen.map((c) => [c.market_hash_name, c.new_price])).toEqual(
      log.map((r) => [r.market_hash_name, r.new_price]),
    );

    // The Kafka topic carries the same changes (the outbox publishes exactly the logged rows).
    const topic = `${topicFor('priceChange').name}${suffix}`;
    const events = await readTopic(stack, topic, 'priceChange', (e) => e.length >= log.length);
    const key = (c: {
      market: string;
      market_hash_name: string;
      phase: string;
      new_price: string | null;
      observed_at: string | number;
    }) => `${c.market}|${c.market_hash_name}|${c.phase}|${c.new_price}|${new Date(c.observed_at).toISOString()}`;
    expect(events.map(key).sort()).toEqual(seen.map(key).sort());
  }, 120_000);

  it('a stream subscriber that disconnects and resumes with Last-Event-ID sees every change exactly once', async () => {
    const start = (await get('/v1/prices/changes?since=now')).body.next_cursor as string;
    const received: SseEvent[] = [];
    const follow = async (headers: Record<string, string>, until: (n: number) => boolean): Promise<void> => {
      const ctl = new AbortController();
      const res = await fetch(`${origin}/v1/prices/stream`, {
        headers: { 'x-api-key': keys.pro, accept: 'text/event-stream', ...headers },
        signal: ctl.signal,
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
      const parse = sseParser((e) => received.push(e));
      const decoder = new TextDecoder();
      const deadline = setTimeout(() => ctl.abort(), 60_000);
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          parse(decoder.decode(chunk, { stream: true }));
          if (until(received.length)) break;
        }
      } catch (err) {
        if (!ctl.signal.aborted) throw err;
      } finally {
        clearTimeout(deadline);
        ctl.abort();
      }
    };

    // First connection: from the cursor taken before the changes; leave after part of them.
    const rounds = Promise.all([round(), sleep(0)]).then(() => round());
    await follow({ 'last-event-id': start }, (n) => n >= 25);
    await rounds;
    const firstPart = received.length;
    // While disconnected, more changes commit.
    await round();
    const head = await logRows();
    const target = head.filter((r) => BigInt(r.seq) > BigInt(seqOf(start))).length;
    expect(target).toBeGreaterThan(firstPart);
    // Reconnect as EventSource does: Last-Event-ID = the id of the last event received.
    await follow({ 'last-event-id': received.at(-1)?.id as string }, (n) => n >= target);
    expect(received.every((e) => e.event === 'change')).toBe(true);
    const seqs = received.map((e) => seqOf(e.id as string));
    expect(new Set(seqs).size).toBe(seqs.length);
    expect(seqs).toEqual(head.filter((r) => BigInt(r.seq) > BigInt(seqOf(start))).map((r) => r.seq));
    for (const e of received) expect(seqOf((JSON.parse(e.data) as Change).cursor)).toBe(seqOf(e.id as string));
  }, 180_000);

  it('curl -N reads the stream as a customer would', async () => {
    const log = await logRows();
    const since = `${((await get('/v1/prices/changes?since=now')).body.next_cursor as string).split('-')[0]}-${log.at(-5)?.seq}`;
    const out = await new Promise<string>((resolve) => {
      execFile(
        'curl',
        ['-sS', '-N', '-m', '3', '-H', `x-api-key: ${keys.pro}`, `${origin}/v1/prices/stream?since=${since}`],
        { encoding: 'utf8' },
        (_err, stdout) => resolve(stdout),
      );
    });
    const events: SseEvent[] = [];
    sseParser((e) => events.push(e))(out);
    expect(out).toMatch(/^retry: 2000\n/);
    expect(events.map((e) => seqOf(e.id as string))).toEqual(log.slice(-4).map((r) => r.seq));
  }, 30_000);

  it('refuses cursors that cannot continue without a gap, garbage, and streams beyond the plan', async () => {
    const head = (await get('/v1/prices/changes?since=now')).body;
    expect(head.data).toEqual([]);
    const epoch = (head.next_cursor as string).split('-')[0];
    // Another log's cursor (a rebuilt read model): 410, never a silent restart.
    const foreign = await get('/v1/prices/changes?since=0123456789ab-5');
    expect(foreign.status).toBe(410);
    expect((foreign.body.error as { code: string }).code).toBe('cursor_expired');
    // Retention overtook the cursor: 410.
    await pool.query('UPDATE price_change_log_state SET pruned_through = 3');
    const old = await get(`/v1/prices/changes?since=${epoch}-2`);
    expect(old.status).toBe(410);
    expect((await get(`/v1/prices/changes?since=${epoch}-3`)).status).toBe(200);
    await pool.query('UPDATE price_change_log_state SET pruned_through = 0');
    for (const bad of ['abc', `${epoch}-x`, `${epoch}-99999999999`, '-1'])
      expect((await get(`/v1/prices/changes?since=${encodeURIComponent(bad)}`)).status, bad).toBe(400);
    expect((await get('/v1/prices/changes?limit=0')).status).toBe(400);
    expect((await get('/v1/prices/changes?markets=nowhere')).status).toBe(400);
    // The stream needs pro; a pro key holds two at once.
    const basic = await fetch(`${origin}/v1/prices/stream`, { headers: { 'x-api-key': keys.basic } });
    expect(basic.status).toBe(403);
    const ctl = new AbortController();
    const open = await Promise.all(
      [0, 1].map(() => fetch(`${origin}/v1/prices/stream`, { headers: { 'x-api-key': keys.pro }, signal: ctl.signal })),
    );
    expect(open.map((r) => r.status)).toEqual([200, 200]);
    const third = await fetch(`${origin}/v1/prices/stream`, { headers: { 'x-api-key': keys.pro } });
    expect(third.status).toBe(429);
    expect(((await third.json()) as { error: { code: string } }).error.code).toBe('too_many_streams');
    ctl.abort();
    // A slot is given back when its client leaves.
    for (let i = 0; ; i++) {
      const again = await fetch(`${origin}/v1/prices/stream`, { headers: { 'x-api-key': keys.pro } });
      if (again.status === 200) {
        await again.body?.cancel();
        break;
      }
      if (i > 50) throw new Error(`slots were not given back: ${again.status}`);
      await sleep(100);
    }
  }, 60_000);

  it('answers 503, not 500, when open streams cannot be counted (a cluster primary gone)', async () => {
    const other = await startApi(stack, pool, {
      plans: ['pro'],
      customer: 'slots.example',
      listen: true,
      deps: { streamSlots: { take: () => Promise.reject(new Error('no primary')), give: () => undefined } },
    });
    const res = await fetch(`${other.origin}/v1/prices/stream`, { headers: { 'x-api-key': other.keys.pro } });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_available');
  });

  it('closing the API ends its open streams instead of waiting on them', async () => {
    const other = await startApi(stack, pool, { plans: ['pro'], customer: 'shutdown.example', listen: true });
    const res = await fetch(`${other.origin}/v1/prices/stream`, { headers: { 'x-api-key': other.keys.pro } });
    expect(res.status).toBe(200);
    const t0 = Date.now();
    const ended = res.text().then((text) => ({ text, ms: Date.now() - t0 }));
    // Without preClose the close would wait on the stream for ever; the keep-alive socket the
    // client holds afterwards is its own to close (undici: 4 s), so close() itself may take that.
    await other.app.close();
    const { text, ms } = await ended;
    expect(ms).toBeLessThan(1_000);
    // The client sees the stream end (EventSource would reconnect to another API process).
    expect(text).toMatch(/^retry: 2000\n/);
  }, 30_000);
});

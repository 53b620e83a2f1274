/**
 * A SIGTERM ends the API within seconds, also right after load: the keep-alive connections its
 * clients hold idle (a load balancer's pool, an HTTP agent) are closed, an open change stream
 * ends, and the requests in flight at the signal are answered in full.
 *
 * Root cause guarded: `http.Server.close()` stops accepting and closes the connections idle at
 * that moment, then waits for every other one. A connection whose response was in flight at the
 * signal (a request being served, a change stream) stayed open after that response, idle, until
 * the server's keep-alive timeout (72 s); the shutdown waited on it into its 30 s deadline and
 * exited 1.
 */
import { Agent, request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { API_MIGRATIONS_DIR, KeyStore } from '@skinprices/api';
import { MIGRATIONS_DIR } from '@skinprices/materializer';
import { waitForUrl } from '@skinprices/runtime';
import { migrate } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startService, type Service } from '../support/services.js';
import { TestStack } from '../support/stack.js';

const MARKET = 'eu-a';
const ROWS = 3_000;
const CONNECTIONS = 8;
const LOAD_MS = 3_000;
/** A request sent this close to the signal may cross the server's close of its idle connection. */
const RACE_MS = 20;
/** How long a stop after load may take: the drain of what is in flight, not a timeout. */
const STOP_WITHIN_MS = 5_000;

/** A GET through `agent` (its keep-alive connections); resolves with the status once the body is read. */
function get(agent: Agent, port: number, path: string, key: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      { agent, host: '127.0.0.1', port, path, headers: { 'x-api-key': key, 'accept-encoding': 'gzip' } },
      (res) => {
        res.resume();
        res.once('end', () => resolve(res.statusCode ?? 0));
        res.once('error', reject);
      },
    );
    req.once('error', reject);
    req.end();
  });
}

/** A POST whose body arrives in two parts: in flight (headers read, body pending) across the signal. */
function slowPost(port: number, key: string): { socket: Socket; finish: () => void; answer: Promise<string> } {
  const body = JSON.stringify({ items: ['Stop 00001', 'Stop 00002'] });
  const cut = Math.floor(body.length / 2);
  const socket = connect(port, '127.0.0.1');
  socket.write(
    `POST /v1/prices/latest HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nx-api-key: ${key}\r\n` +
      `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, cut)}`,
  );
  let text = '';
  socket.on('data', (c: Buffer) => void (text += c.toString()));
  const answer = new Promise<string>((resolve, reject) => {
    socket.once('close', () => resolve(text));
    socket.once('error', reject);
  });
  return { socket, finish: () => void socket.write(body.slice(cut)), answer };
}

describe('stopping the API', () => {
  const stack = new TestStack();
  let api: Service;
  let port: number;
  let metricsPort: number;
  let origin: string;
  let key: string;

  beforeAll(async () => {
    const readModel = await stack.schema();
    await migrate(readModel.pool, MIGRATIONS_DIR);
    await readModel.pool.query(
      `INSERT INTO listings_current (market, market_hash_name, phase, currency, price, count, observed_at, changed_at, cycle_id)
       SELECT $1, 'Stop ' || lpad(i::text, 5, '0'), '', 'EUR', 10 + i, 1 + i % 7, now(), now(), 'c1'
       FROM generate_series(0, $2 - 1) i`,
      [MARKET, ROWS],
    );
    const keys = await stack.schema();
    await migrate(keys.pool, API_MIGRATIONS_DIR);
    key = (
      await new KeyStore(keys.pool).create({
        customer: 'stop@test.example',
        plan: 'pro',
        perSecond: 100_000,
        perMinute: 1_000_000,
      })
    ).secret;
    port = await freePort();
    metricsPort = await freePort();
    api = startService('api', 'services/api/src/main.ts', {
      DATABASE_URL: stack.env.databaseUrl,
      DATABASE_SCHEMA: readModel.name,
      KEYS_SCHEMA: keys.name,
      API_HOST: '127.0.0.1',
      API_PORT: String(port),
      METRICS_PORT: String(metricsPort),
      LOG_LEVEL: 'info',
      // API_PROCESSES left at its default, as deployed: the SIGTERM goes to the cluster primary,
      // which stops its workers (each one's drain is what this guards) and serves the metrics.
    });
    stack.defer(async () => void (await api.stop()));
    origin = `http://127.0.0.1:${port}`;
    await waitForUrl(`${origin}/openapi.json`, 120_000, 200).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${api.output()}`);
    });
  }, 180_000);
  afterAll(() => stack.cleanup());

  it('exits 0 within seconds of SIGTERM after load, answering what is in flight', async () => {
    // Clients keep their connections as a load balancer does: open, and idle between requests.
    const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS });
    stack.defer(async () => agent.destroy());
    const paths = [`/v1/prices/${MARKET}`, '/v1/prices/latest', `/v1/prices/search?market_hash_name=Stop%2000042`];
    // Each body built once first: the load is served from the caches, so what is in flight at
    // the signal is an ordinary request, not a first build (seconds on a busy machine).
    for (const path of paths) expect(await get(agent, port, path, key), path).toBe(200);
    let signalledAt = 0;
    const loadEnd = performance.now() + LOAD_MS;
    // By when each request was sent: well before the signal (the server had it: it must be
    // answered), or after (on a connection the server may be closing as idle: refused, or reset
    // when it crossed the close, which a client retries elsewhere as for any keep-alive reuse).
    const sentBefore: (number | string)[] = [];
    const sentAfter: (number | string)[] = [];
    const worker = async (w: number): Promise<void> => {
      for (let i = 0; ; i++) {
        const sentAt = performance.now();
        const record = (result: number | string): void =>
          void (signalledAt === 0 || sentAt < signalledAt - RACE_MS ? sentBefore : sentAfter).push(result);
        try {
          const status = await get(agent, port, paths[(w + i) % paths.length] as string, key);
          record(status);
          if (status !== 200) return;
        } catch (err) {
          record((err as { code?: string }).code ?? String(err));
          return;
        }
        // After the full load, requests come with pauses, so that at the signal some connections
        // are busy and most sit idle.
        if (performance.now() > loadEnd) await sleep(50 + w * 40);
      }
    };
    const load = Promise.all(Array.from({ length: CONNECTIONS }, (_, w) => worker(w)));

    // A connection that has not sent a byte (a pool's spare, a browser's preconnect): Node counts
    // it as a request starting, and server.close() would wait for it.
    // The same on the metrics listener, beside a scraper's keep-alive connection.
    const unused = [port, metricsPort].map((p) => {
      const socket = connect(p, '127.0.0.1');
      socket.on('error', () => undefined);
      return new Promise<void>((resolve) => socket.once('close', () => resolve()));
    });
    expect(await get(agent, metricsPort, '/metrics', key)).toBe(200);
    // An open change stream, and a request in flight (its body half sent) at the signal.
    const stream = await fetch(`${origin}/v1/prices/stream`, {
      headers: { 'x-api-key': key, accept: 'text/event-stream' },
    });
    expect(stream.status).toBe(200);
    const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('retry:');
    const streamEnded = (async () => {
      while (!(await reader.read()).done);
      return performance.now();
    })();
    const post = slowPost(port, key);
    await sleep(LOAD_MS + 300);

    const exited = new Promise<number | null>((r) => api.child.once('exit', (code) => r(code)));
    signalledAt = performance.now();
    api.child.kill('SIGTERM');
    await sleep(300);
    post.finish();
    const code = await Promise.race([exited, sleep(40_000).then(() => 'still running' as const)]);
    const stopMs = performance.now() - signalledAt;
    const stopped = `exit ${String(code)} ${Math.round(stopMs)} ms after SIGTERM`;
    expect(code, `${stopped}\n${api.output()}`).toBe(0);
    expect(stopMs, `${stopped}\n${api.output()}`).toBeLessThan(STOP_WITHIN_MS);

    await load;
    expect(sentBefore.length).toBeGreaterThanOrEqual(CONNECTIONS * 2);
    expect(new Set(sentBefore)).toEqual(new Set([200]));
    expect(sentAfter.filter((s) => s !== 200 && s !== 'ECONNREFUSED' && s !== 'ECONNRESET')).toEqual([]);
    // The request in flight at the signal is answered in full, and its connection then closed.
    const answer = await post.answer;
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer.toLowerCase()).toContain('connection: close');
    expect(answer).toContain('{"items":{"Stop 00001":{"eu-a":{"price":"11.00"');
    await Promise.all(unused);
    // The stream ended (cleanly) well before the process did.
    expect((await streamEnded) - signalledAt).toBeLessThan(stopMs);
  }, 90_000);
});

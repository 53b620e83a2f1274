/**
 * The soak's HTTP client: node:http on kept-alive connections, as a customer's client pools them,
 * timing each request from its send to the last byte of the answer (compressed bytes are not
 * inflated: the latency is the server's and the network's, not this process's gunzip).
 */
import { Agent, request as httpRequest } from 'node:http';
import { performance } from 'node:perf_hooks';

export interface Req {
  method: 'GET' | 'POST';
  /** Path and query. */
  path: string;
  /** Sent as JSON. */
  body?: unknown;
  /** Ask for gzip (the lists and the catalogue, as docs/api.md advises). */
  gzip?: boolean;
}

export interface Answer {
  /** The HTTP status, or why there was none: `timeout`, `ECONNRESET`, … */
  status: number | string;
  ms: number;
  bytes: number;
  body: Buffer;
  headers: Record<string, string | string[] | undefined>;
}

// Enough sockets that a slow export does not queue the requests behind it: the mix is open-loop.
const agent = new Agent({ keepAlive: true, maxSockets: 32 });

export function send(base: string, key: string, req: Req, timeoutMs = 30_000): Promise<Answer> {
  const body = req.body === undefined ? undefined : Buffer.from(JSON.stringify(req.body));
  const t0 = performance.now();
  return new Promise((resolve) => {
    let settled = false;
    const done = (a: Omit<Answer, 'ms'>) => {
      if (settled) return;
      settled = true;
      resolve({ ...a, ms: performance.now() - t0 });
    };
    const r = httpRequest(
      `${base}${req.path}`,
      {
        method: req.method,
        agent,
        headers: {
          'x-api-key': key,
          ...(req.gzip ? { 'accept-encoding': 'gzip' } : {}),
          ...(body ? { 'content-type': 'application/json', 'content-length': body.length } : {}),
        },
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const b = Buffer.concat(chunks);
          done({ status: res.statusCode ?? 'no status', bytes: b.length, body: b, headers: res.headers });
        });
        res.on('error', (err: NodeJS.ErrnoException) => done(failure(err.code ?? 'aborted')));
      },
    );
    r.on('timeout', () => {
      r.destroy();
      done(failure('timeout'));
    });
    r.on('error', (err: NodeJS.ErrnoException) => done(failure(err.code ?? err.message)));
    r.end(body);
  });
}

const failure = (status: string): Omit<Answer, 'ms'> => ({ status, bytes: 0, body: Buffer.alloc(0), headers: {} });

/** GET a JSON answer; undefined unless 200. */
export async function getJson<T>(base: string, key: string, path: string): Promise<T | undefined> {
  const a = await send(base, key, { method: 'GET', path });
  return a.status === 200 ? (JSON.parse(a.body.toString('utf8')) as T) : undefined;
}

/** Closes the kept-alive connections, so the process can exit. */
export function closeConnections(): void {
  agent.destroy();
}

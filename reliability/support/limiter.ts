/**
 * The per-key limit (10 requests per second window, spec section 8) under 200 concurrent requests
 * per key. The limiter counts per fixed window, Math.floor(now / 1000) on the server; the server
 * and this client share the machine's clock, so a request whose send and answer fall in the same
 * second of that clock was counted in that window. A burst is fired right after a second starts;
 * when every one of its requests was sent and answered within that second (a "one-window burst"),
 * exactly `limit` must have been let through. A burst that spilled into the next second is still
 * checked: no window may have let through more than the limit among the requests known to be in it,
 * and the whole burst no more than the limit times the windows it touched.
 */
import { Agent, request } from 'node:http';
import { sleep } from './harness.js';

interface BurstResult {
  key: number;
  /** The APIs the burst was spread over (more than one: limits shared through Redis). */
  apis: number;
  requests: number;
  accepted: number;
  rejected: number;
  /** Rejections not in the expected form: 429, code rate_limited, with Retry-After. */
  bad_rejections: number;
  /** Answers other than the endpoint's own and 429 (a 5xx, a refused connection …). */
  other: number;
  windows: number;
  /** Per second window (epoch seconds): requests let through among those known to be in it. */
  accepted_in_window: Record<string, number>;
  ms: number;
  verdict: 'exact' | 'not exact' | 'spilled, within bounds' | 'spilled, over the limit';
}

export interface LimiterResult {
  limit: number;
  per_burst: number;
  bursts: BurstResult[];
  one_window_bursts: number;
  exact: boolean;
}

interface Sample {
  t0: number;
  t1: number;
  status: number;
  ok429: boolean;
}

function get(agent: Agent, url: URL, key: string | undefined): Promise<Sample> {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const req = request(url, { agent, method: 'GET', headers: key ? { 'x-api-key': key } : {} }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        let ok429 = false;
        if (res.statusCode === 429) {
          try {
            const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: { code?: string } };
            ok429 = body.error?.code === 'rate_limited' && res.headers['retry-after'] !== undefined;
          } catch {
            ok429 = false;
          }
        }
        resolve({ t0, t1: Date.now(), status: res.statusCode ?? 0, ok429 });
      });
    });
    req.on('error', () => resolve({ t0, t1: Date.now(), status: 0, ok429: false }));
    req.end();
  });
}

/**
 * `bursts` bursts of `perBurst` concurrent GETs of `path`, key after key, each on sockets opened
 * beforehand (so connecting is not part of the burst), spread evenly over `apiUrls`.
 */
export async function limiterBursts(opts: {
  apiUrls: readonly string[];
  keys: readonly string[];
  bursts: number;
  perBurst: number;
  limit: number;
  path: string;
}): Promise<LimiterResult> {
  const agents = opts.apiUrls.map(() => new Agent({ keepAlive: true, maxSockets: opts.perBurst }));
  try {
    // Open the sockets: an unknown path needs no key and is not limited.
    await Promise.all(
      Array.from({ length: opts.perBurst }, (_, i) =>
        get(
          agents[i % agents.length] as Agent,
          new URL('/_chaos_warm', opts.apiUrls[i % opts.apiUrls.length]),
          undefined,
        ),
      ),
    );
    const bursts: BurstResult[] = [];
    for (let b = 0; b < opts.bursts; b++) {
      const k = b % opts.keys.length;
      // Start just after a second begins, so most bursts fit in one window.
      await sleep(1_000 - (Date.now() % 1_000) + 20);
      const samples = await Promise.all(
        Array.from({ length: opts.perBurst }, (_, i) =>
          get(
            agents[i % agents.length] as Agent,
            new URL(opts.path, opts.apiUrls[i % opts.apiUrls.length]),
            opts.keys[k] as string,
          ),
        ),
      );
      const win = (t: number) => Math.floor(t / 1_000);
      const first = Math.min(...samples.map((s) => win(s.t0)));
      const last = Math.max(...samples.map((s) => win(s.t1)));
      const passed = samples.filter((s) => s.status !== 429 && s.status !== 0);
      const acceptedIn: Record<string, number> = {};
      for (const s of passed) if (win(s.t0) === win(s.t1)) acceptedIn[win(s.t0)] = (acceptedIn[win(s.t0)] ?? 0) + 1;
      const windows = last - first + 1;
      const verdict: BurstResult['verdict'] =
        windows === 1
          ? passed.length === opts.limit
            ? 'exact'
            : 'not exact'
          : passed.length <= opts.limit * windows && Object.values(acceptedIn).every((n) => n <= opts.limit)
            ? 'spilled, within bounds'
            : 'spilled, over the limit';
      bursts.push({
        key: k,
        apis: opts.apiUrls.length,
        requests: samples.length,
        accepted: passed.length,
        rejected: samples.filter((s) => s.status === 429).length,
        bad_rejections: samples.filter((s) => s.status === 429 && !s.ok429).length,
        other: samples.filter((s) => s.status === 0 || s.status >= 500).length,
        windows,
        accepted_in_window: acceptedIn,
        ms: Math.max(...samples.map((s) => s.t1)) - Math.min(...samples.map((s) => s.t0)),
        verdict,
      });
    }
    const oneWindow = bursts.filter((b) => b.windows === 1);
    return {
      limit: opts.limit,
      per_burst: opts.perBurst,
      bursts,
      one_window_bursts: oneWindow.length,
      exact:
        oneWindow.length > 0 &&
        bursts.every(
          (b) =>
            (b.verdict === 'exact' || b.verdict === 'spilled, within bounds') &&
            b.bad_rejections === 0 &&
            b.other === 0,
        ),
    };
  } finally {
    for (const a of agents) a.destroy();
  }
}

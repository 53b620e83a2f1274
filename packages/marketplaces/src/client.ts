/**
 * HTTP to one upstream marketplace: undici keep-alive pool, a connect/headers/body timeout and
 * an overall deadline per request (a slow-drip body must not hold a poll cycle forever), and
 * every failure turned into an AppError whose `retryable` flag the poller acts on.
 */
import { promisify } from 'node:util';
import { brotliDecompress, gunzip, inflate } from 'node:zlib';
import { AppError } from '@skinprices/domain';
import { type Dispatcher, Pool } from 'undici';

type Decoder = (buf: Buffer, o: { maxOutputLength: number }, cb: (err: Error | null, out: Buffer) => void) => void;
const decoder = (fn: Decoder) => promisify(fn) as (buf: Buffer, o: { maxOutputLength: number }) => Promise<Buffer>;
const DECODERS: Record<string, (buf: Buffer, o: { maxOutputLength: number }) => Promise<Buffer>> = {
  br: decoder(brotliDecompress),
  gzip: decoder(gunzip),
  deflate: decoder(inflate),
};

/** What every AppError of a request carries in its details. */
type RequestDetails = { market: string; path: string };

export type ResponseHeaders = Readonly<Record<string, string | string[] | undefined>>;

export interface UpstreamClientOptions {
  baseUrl: string;
  /** For errors and logs. */
  market: string;
  /** Connections kept open to the upstream. @default 4 */
  connections?: number;
  /** Time to connect and receive response headers. @default 10000 */
  headersTimeoutMs?: number;
  /** Whole request including the body. @default 30000 */
  deadlineMs?: number;
  /** Refuse bodies larger than this. @default 256 MiB */
  maxBodyBytes?: number;
  /**
   * Sent with every request besides `accept: application/json`: an upstream's Authorization, or
   * `accept-encoding: br` where it requires Brotli. A compressed answer (br, gzip, deflate) is
   * decoded here, within `maxBodyBytes` of decoded size. Values are never logged.
   */
  headers?: Record<string, string>;
  /** Called after every request (metrics). */
  onResponse?: (info: { path: string; status: number | 'error'; ms: number }) => void;
}

/** Longest Retry-After we honour: past it the circuit breaker, not one request, should decide. */
const MAX_RETRY_AFTER_MS = 10 * 60_000;

/** Retry-After as seconds or an HTTP date → milliseconds from now (never negative, capped). */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = (Array.isArray(value) ? value[0] : value)?.trim();
  if (v === undefined || v === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(v)) return Math.min(MAX_RETRY_AFTER_MS, Math.round(Number(v) * 1000));
  // Only a real HTTP date (IMF-fixdate): Date.parse alone reads '-1' or 'x 2099' as dates.
  if (!/^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/.test(v)) return undefined;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.min(MAX_RETRY_AFTER_MS, Math.max(0, at - now));
}

export class UpstreamClient {
  private readonly pool: Pool;
  private readonly origin: string;
  private readonly prefix: string;

  constructor(private readonly options: UpstreamClientOptions) {
    const url = new URL(options.baseUrl);
    this.origin = url.origin;
    this.prefix = url.pathname.replace(/\/+$/, '');
    this.pool = new Pool(this.origin, {
      connections: options.connections ?? 4,
      keepAliveTimeout: 30_000,
      headersTimeout: options.headersTimeoutMs ?? 10_000,
      bodyTimeout: options.headersTimeoutMs ?? 10_000,
      connectTimeout: options.headersTimeoutMs ?? 10_000,
    });
  }

  /** upstream clock − our clock, from the last response's Date header (ms). */
  private skewMs = 0;
  private clockSeen = false;

  /** Whether a response has shown the upstream's clock yet. */
  get hasClock(): boolean {
    return this.clockSeen;
  }

  /**
   * Learns the upstream's clock from one cheap request before anything depends on it (which
   * day's history to ask for). Any answer carries a Date header, even a 404.
   */
  async syncClock(): Promise<void> {
    const res = await this.pool.request({ method: 'GET', path: `${this.prefix}/`, signal: AbortSignal.timeout(5_000) });
    await res.body.dump();
    this.noteDate(res.headers.date);
  }

  private noteDate(header: string | string[] | undefined): void {
    const date = Date.parse(String(header ?? ''));
    if (Number.isNaN(date)) return;
    const skew = date - Date.now();
    // Date has whole seconds: only a skew beyond rounding is taken as a different clock.
    this.skewMs = Math.abs(skew) < 2_000 ? 0 : skew;
    this.clockSeen = true;
  }

  private readonly headerListeners = new Set<(headers: ResponseHeaders) => void>();

  /** Called with every response's headers (an adapter's rate-limit headers); returns an unsubscribe. */
  onHeaders(listener: (headers: ResponseHeaders) => void): () => void {
    this.headerListeners.add(listener);
    return () => this.headerListeners.delete(listener);
  }

  get market(): string {
    return this.options.market;
  }

  /**
   * Now by the upstream's clock: our time plus the skew its `Date` headers showed. Observation
   * times and time windows (sales since …) must be in the upstream's time, which for a simulator
   * running accelerated is far from ours.
   */
  upstreamNow(): number {
    // Monotonic: the skew is re-learnt from whole-second Date headers on every response, so the
    // raw sum can step back by up to a second, and a cycle's rows would look older than its start.
    this.lastNow = Math.max(this.lastNow, Date.now() + this.skewMs);
    return this.lastNow;
  }
  private lastNow = 0;

  async getJson(
    path: string,
    query: Record<string, string | number | undefined> = {},
    signal?: AbortSignal,
  ): Promise<unknown> {
    const deadline = AbortSignal.timeout(this.options.deadlineMs ?? 30_000);
    const abort = signal ? AbortSignal.any([deadline, signal]) : deadline;
    const started = performance.now();
    const details = { market: this.options.market, path };
    let status: number | 'error' = 'error';
    try {
      const res = await this.pool.request({
        method: 'GET',
        path: this.fullPath(path, query),
        signal: abort,
        headers: { ...this.options.headers, accept: 'application/json' },
      });
      status = res.statusCode;
      this.noteDate(res.headers.date);
      for (const listener of this.headerListeners) listener(res.headers);
      await this.rejectStatus(res, path, details);
      return await this.readJson(res, path, details);
    } catch (err) {
      throw this.failure(err, path, details, signal);
    } finally {
      this.options.onResponse?.({ path, status, ms: performance.now() - started });
    }
  }

  /** The request's path: the base URL's path, the route, and the query's defined parameters. */
  private fullPath(path: string, query: Record<string, string | number | undefined>): string {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined) qs.set(k, String(v));
    return `${this.prefix}${path}${qs.size > 0 ? `?${qs.toString()}` : ''}`;
  }

  /**
   * Throws for any status but 200, its body drained so the connection goes back to the pool: 429
   * is rate limited (with the Retry-After it asked for), 5xx unavailable, anything else rejected.
   */
  private async rejectStatus(res: Dispatcher.ResponseData, path: string, details: RequestDetails): Promise<void> {
    if (res.statusCode === 200) return;
    await res.body.dump();
    if (res.statusCode === 429) {
      const retryAfterMs = parseRetryAfter(res.headers['retry-after']);
      throw new AppError('upstream_rate_limited', `${this.options.market}: 429 on ${path}`, {
        details: { ...details, retryAfterMs },
      });
    }
    const code = res.statusCode >= 500 ? 'upstream_unavailable' : 'upstream_rejected';
    throw new AppError(code, `${this.options.market}: HTTP ${res.statusCode} on ${path}`, {
      details: { ...details, status: res.statusCode },
    });
  }

  /**
   * A 200's body read, decoded and parsed as JSON. A body announced past `maxBodyBytes` is left
   * unread; one that is not JSON is malformed.
   */
  private async readJson(res: Dispatcher.ResponseData, path: string, details: RequestDetails): Promise<unknown> {
    const length = Number(res.headers['content-length'] ?? 0);
    const max = this.options.maxBodyBytes ?? 256 * 1024 * 1024;
    if (length > max) {
      await res.body.dump();
      throw new AppError('upstream_malformed', `${this.options.market}: body of ${length} bytes on ${path}`, {
        details,
        retryable: false,
      });
    }
    const text = await this.decode(
      res.headers['content-encoding'],
      Buffer.from(await res.body.arrayBuffer()),
      max,
      path,
    );
    try {
      return JSON.parse(text) as unknown;
    } catch (err) {
      throw new AppError('upstream_malformed', `${this.options.market}: body of ${path} is not JSON (${String(err)})`, {
        cause: err,
        details,
      });
    }
  }

  /**
   * What a request's failure is as an AppError: one already is; the caller's signal makes it
   * cancelled; a deadline or an undici timeout a timeout; anything else the upstream unavailable.
   */
  private failure(err: unknown, path: string, details: RequestDetails, signal: AbortSignal | undefined): AppError {
    if (err instanceof AppError) return err;
    if (signal?.aborted)
      return new AppError('cancelled', `${this.options.market}: request cancelled`, {
        cause: err,
        details,
        retryable: false,
      });
    const name = (err as { name?: string; code?: string }).name ?? '';
    const code = (err as { code?: string }).code ?? '';
    if (name === 'TimeoutError' || name === 'AbortError' || (code.startsWith('UND_ERR_') && code.includes('TIMEOUT'))) {
      return new AppError('upstream_timeout', `${this.options.market}: ${path} timed out`, { cause: err, details });
    }
    // Connection refused or reset, a body cut short (truncated): transient.
    return new AppError('upstream_unavailable', `${this.options.market}: ${path} failed: ${String(err)}`, {
      cause: err,
      details,
    });
  }

  /** The body as text, decoded from its content-encoding; a body that will not decode is malformed. */
  private async decode(
    encoding: string | string[] | undefined,
    raw: Buffer,
    max: number,
    path: string,
  ): Promise<string> {
    const name = String(encoding ?? 'identity')
      .trim()
      .toLowerCase();
    if (name === 'identity' || name === '') return raw.toString('utf8');
    const decoder = DECODERS[name];
    const details = { market: this.options.market, path, encoding: name };
    if (!decoder)
      throw new AppError(
        'upstream_malformed',
        `${this.options.market}: unknown content-encoding '${name}' on ${path}`,
        {
          details,
          retryable: false,
        },
      );
    try {
      return (await decoder(raw, { maxOutputLength: max })).toString('utf8');
    } catch (err) {
      // A cut-short stream is transient (retry); a body past the limit is not.
      const tooBig = (err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE';
      throw new AppError(
        'upstream_malformed',
        `${this.options.market}: ${name} body of ${path} does not decode (${String(err)})`,
        {
          cause: err,
          details,
          retryable: !tooBig,
        },
      );
    }
  }

  async close(): Promise<void> {
    await this.pool.close();
  }
}

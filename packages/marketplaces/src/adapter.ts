import type { UpstreamClient } from './client.js';
import type { Kind, Page } from './rows.js';

export interface FetchContext {
  client: UpstreamClient;
  market: string;
  /** Aborts the cycle (shutdown). */
  signal?: AbortSignal;
  /**
   * Runs one upstream request with the poller's retry, backoff and rate limiting; adapters call
   * it for every page so that a retried page does not restart the cycle.
   */
  request: <T>(fn: () => Promise<T>) => Promise<T>;
}

export interface SalesWindow {
  /** Epoch ms by the upstream's clock, inclusive; absent: the upstream's default look-back. */
  from?: number;
  /** Epoch ms, exclusive; absent: the upstream's now. */
  to?: number;
}

/** Extra input some kinds need: the sales window, the history day. */
export interface KindInput {
  window?: SalesWindow;
  /** UTC day (days since epoch) for HISTORY. */
  day?: number;
  /** HISTORY: also the day's hourly candles, where the format has them. */
  hourly?: boolean;
  /** HISTORY: the day's closes too (false: the hourly candles only, in rows without a close). @default true */
  closes?: boolean;
}

/**
 * What an upstream documents about how often it may be asked. The poller's token bucket runs at
 * the stricter of this and its own configuration (UPSTREAM_RPS), so a deployment cannot
 * accidentally poll a real marketplace faster than it allows.
 */
export interface UpstreamLimits {
  /** Sustained rate (Skinport: 8 per 5 min = 0.0267/s). */
  requestsPerSecond: number;
  /** Requests allowed at once before the sustained rate applies. */
  burst: number;
  /**
   * Wait after a 429 that carries no Retry-After (Steam sends none): an exponential backoff from
   * 250 ms would walk straight back into the ban. Absent: the poller's ordinary backoff.
   */
  bare429BackoffMs?: number;
  /**
   * Reads an upstream's rate-limit headers (CSFloat: x-ratelimit-remaining / -reset) after every
   * response: the epoch ms before which no further request should be sent, or undefined.
   */
  pauseFromHeaders?: (
    headers: Readonly<Record<string, string | string[] | undefined>>,
    now: number,
  ) => number | undefined;
}

/** What a deployment gives an adapter that needs it; never logged. */
export interface Credentials {
  apiKey?: string;
}

/**
 * One adapter per upstream format. `pages` yields normalised pages in upstream order; an error
 * it throws ends the cycle (the poller marks it PARTIAL or FAILED). Adapters that must see every
 * page before they can say anything true (lowest price from raw listings) yield once at the end.
 */
export interface Adapter {
  readonly format: string;
  readonly kinds: readonly Kind[];
  /** Documented limits of the real upstream; absent for the simulator-only formats. */
  readonly limits?: UpstreamLimits;
  /** The format cannot be polled without a key (CSFloat): the poller refuses to start without one. */
  readonly needsApiKey?: boolean;
  /** Headers every request carries (Authorization, Accept-Encoding: br). */
  requestHeaders?(credentials: Credentials): Record<string, string>;
  pages<K extends Kind>(kind: K, ctx: FetchContext, input: KindInput): AsyncGenerator<Page<K>>;
}

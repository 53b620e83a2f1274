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
}

/**
 * One adapter per upstream format. `pages` yields normalised pages in upstream order; an error
 * it throws ends the cycle (the poller marks it PARTIAL or FAILED). Adapters that must see every
 * page before they can say anything true (lowest price from raw listings) yield once at the end.
 */
export interface Adapter {
  readonly format: string;
  readonly kinds: readonly Kind[];
  pages<K extends Kind>(kind: K, ctx: FetchContext, input: KindInput): AsyncGenerator<Page<K>>;
}

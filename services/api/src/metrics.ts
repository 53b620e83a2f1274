/** Prometheus metrics of one API process (a registry per instance: tests build several apps). */
import { serveMetrics, type MetricsServer } from '@skinprices/runtime';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** A cache's own counters; patched list bodies also count how they were refreshed. */
interface CacheStats {
  hits: number;
  misses: number;
  patches?: number;
  rebuilds?: number;
  rowsPatched?: number;
  rowsUnchanged?: number;
}

export class ApiMetrics {
  readonly registry = new Registry();
  readonly requests = new Histogram({
    name: 'api_request_duration_seconds',
    help: 'Time from request to the last byte of the answer, by route pattern, method and status',
    labelNames: ['route', 'method', 'status'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });
  readonly authFailures = new Counter({
    name: 'api_auth_failures_total',
    help: 'Requests refused for their key (missing, invalid, disabled, expired) or because their address failed too often (throttled)',
    labelNames: ['reason'],
    registers: [this.registry],
  });
  readonly rateLimited = new Counter({
    name: 'api_rate_limited_total',
    help: 'Requests refused by a key limit, by window',
    labelNames: ['window'],
    registers: [this.registry],
  });
  /**
   * How long a patched list took to follow its data (the read, the recompression, the assembly),
   * and how many rows it read: where a price change waits between its commit and the answer.
   */
  readonly listRefresh = new Histogram({
    name: 'api_list_body_refresh_seconds',
    help: 'Refreshes of patched list bodies by how: patch (the changed rows), or a rebuild from every row because nothing was cached (first), anything may have changed (reset) or a patch was refused (refused)',
    labelNames: ['how'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly listRefreshRows = new Histogram({
    name: 'api_list_body_refresh_rows',
    help: 'Rows read by a refresh of a patched list body, by how (see api_list_body_refresh_seconds)',
    labelNames: ['how'],
    buckets: [1, 10, 100, 1_000, 10_000, 100_000],
    registers: [this.registry],
  });
  /** The caches whose own counters are reported at scrape time (they count without knowing of Prometheus). */
  private caches: Record<string, { stats: CacheStats }> = {};

  constructor() {
    // Resident memory, heap and external bytes, event-loop lag, GC: what the memory budget and an
    // operator's alerts are read from.
    collectDefaultMetrics({ register: this.registry });
    const caches = () => this.caches;
    new Gauge({
      name: 'api_cache_lookups',
      help: 'Cache lookups since start, by cache and result (hit: served cached bytes; miss: built or loaded)',
      labelNames: ['cache', 'result'],
      registers: [this.registry],
      // prom-client calls collect() on every scrape.
      collect() {
        for (const [name, c] of Object.entries(caches())) {
          this.set({ cache: name, result: 'hit' }, c.stats.hits);
          this.set({ cache: name, result: 'miss' }, c.stats.misses);
        }
      },
    });
    new Gauge({
      name: 'api_list_body_refreshes',
      help: 'Refreshes of patched list bodies since start, by cache and how (patch: the changed rows only; rebuild: every row)',
      labelNames: ['cache', 'how'],
      registers: [this.registry],
      collect() {
        for (const [name, c] of Object.entries(caches())) {
          if (c.stats.patches === undefined) continue;
          this.set({ cache: name, how: 'patch' }, c.stats.patches);
          this.set({ cache: name, how: 'rebuild' }, c.stats.rebuilds ?? 0);
        }
      },
    });
    new Gauge({
      name: 'api_list_body_patched_rows',
      help: 'Rows read by patches of list bodies since start, by cache and result (changed: rewritten, added or removed; unchanged: the same JSON as held, nothing recompressed)',
      labelNames: ['cache', 'result'],
      registers: [this.registry],
      collect() {
        for (const [name, c] of Object.entries(caches())) {
          if (c.stats.rowsPatched === undefined) continue;
          const unchanged = c.stats.rowsUnchanged ?? 0;
          this.set({ cache: name, result: 'changed' }, c.stats.rowsPatched - unchanged);
          this.set({ cache: name, result: 'unchanged' }, unchanged);
        }
      },
    });
  }

  watchCaches(caches: Record<string, { stats: CacheStats }>): void {
    this.caches = caches;
  }

  /** Serves /metrics on its own listener; port 0 picks a free port. */
  serve(host: string, port: number): Promise<MetricsServer> {
    return serveMetrics(this.registry, host, port);
  }
}

/** Prometheus metrics of one API process (a registry per instance: tests build several apps). */
import { serveMetrics, type MetricsServer } from '@skinprices/runtime';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { StatusReport } from './status.js';

/** A cache's own counters; patched list bodies also count how they were refreshed. */
interface CacheStats {
  hits: number;
  misses: number;
  patches?: number;
  rebuilds?: number;
  rowsPatched?: number;
  rowsUnchanged?: number;
}

/** The database's replication state as /v1/status reports it (null fields on a primary). */
interface DatabaseStatus {
  role: string;
  replay_lag_seconds: number | null;
  replay_lag_bytes: number | null;
  receiving: boolean | null;
  /** lagging: further behind than REPLICA_MAX_LAG_S, behind by an unknown time, or receiving nothing. */
  status?: string;
}

/**
 * A standby that lags judges the pipeline from a view that stopped: its heartbeats look as fresh
 * as when its replay stalled. Its pipeline series are left out, so the alerts' max and min over
 * every API process read the processes that see the present (its lag has alerts of its own).
 */
const seesPresent = (r: ObservedStatus) => r.database?.status !== 'lagging';

/** What the status gauges read from a status report; `database` where the report has it. */
type ObservedStatus = Pick<StatusReport, 'now' | 'markets' | 'pipeline' | 'dead_letters'> & {
  database?: DatabaseStatus;
};

/** How the status gauges load their report. */
interface StatusScrapeOptions {
  /** A report is reused by the scrapes within this long of its load. @default 5000 */
  ttlMs?: number;
  /** A load still running after this long counts as failed (`api_status_up` 0). @default 5000 */
  timeoutMs?: number;
  /** No load starts beside one still running, unless that one has run this long. @default 60000 */
  stuckAfterMs?: number;
}

/** The report, or null when its load failed or took longer than `timeoutMs`. */
function loadWithin<T>(load: () => Promise<T>, timeoutMs: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), timeoutMs);
  });
  const loaded = Promise.resolve()
    .then(load)
    .catch(() => null);
  return Promise.race([loaded, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Drops every series of `g`. prom-client's reset() leaves a label-less gauge at 0, and a value
 * unknown (the load failed, a primary's replay lag) must be absent: an alert would read 0 as
 * "no materializer alive".
 */
function clear(g: Gauge): void {
  g.reset();
  (g as unknown as { hashMap: Record<string, unknown> }).hashMap = {};
}

/** Seconds from `from` to `to` (ISO times of the database's clock); +Inf when `from` is null: never. */
const secondsSince = (to: string, from: string | null) =>
  from === null ? Infinity : Math.max(0, (Date.parse(to) - Date.parse(from)) / 1000);

/** The series read from the status report at a scrape; without a report, none of them. */
const STATUS_GAUGES: { name: string; help: string; labels?: string[]; fill(g: Gauge, r: ObservedStatus): void }[] = [
  {
    name: 'api_market_age_seconds',
    help: 'Seconds since the newest complete cycle of a marketplace and kind was applied (database clock); +Inf when none ever was',
    labels: ['market', 'kind'],
    fill: (g, r) => {
      for (const m of r.markets) g.set({ market: m.market, kind: m.kind }, m.age_seconds ?? Infinity);
    },
  },
  {
    name: 'api_market_stale',
    help: 'Whether /v1/status calls a marketplace and kind stale (1): no complete cycle applied for 2 x its interval + STALE_GRACE_S',
    labels: ['market', 'kind'],
    fill: (g, r) => {
      for (const m of r.markets) g.set({ market: m.market, kind: m.kind }, m.stale ? 1 : 0);
    },
  },
  {
    name: 'api_materializers_alive',
    help: 'Materializer processes whose heartbeat is at most MATERIALIZER_DEAD_AFTER_S old',
    fill: (g, r) => {
      if (seesPresent(r)) g.set(r.pipeline.materializers.filter((m) => m.alive).length);
    },
  },
  {
    name: 'api_pipeline_last_batch_age_seconds',
    help: "Seconds since any materializer last committed a batch, as /v1/status judges it (the database's clock; on a standby, as of what it has replayed); +Inf when none has",
    fill: (g, r) => {
      if (!seesPresent(r)) return;
      // /v1/status judges the pipeline on a standby as of what it replayed: its lag is its own alert.
      const behind = r.database?.role === 'standby' ? (r.database.replay_lag_seconds ?? 0) : 0;
      g.set(Math.max(0, secondsSince(r.now, r.pipeline.last_batch_at) - behind));
    },
  },
  {
    name: 'api_pipeline_lag',
    help: "Records not yet applied: the live materializers' consumer lag added up; absent while a live one cannot measure its lag",
    fill: (g, r) => {
      if (r.pipeline.lag !== null && seesPresent(r)) g.set(r.pipeline.lag);
    },
  },
  {
    name: 'api_dead_letters',
    help: 'Rows in dead_letters by topic and reason (decode, sql): every row ever written until deleted',
    labels: ['topic', 'reason'],
    fill: (g, r) => {
      for (const d of r.dead_letters) g.set({ topic: d.topic, reason: d.reason }, d.count);
    },
  },
  {
    name: 'api_db_standby',
    help: "Whether the API's database is a streaming standby (1) or the primary (0)",
    fill: (g, r) => {
      if (r.database) g.set(r.database.role === 'standby' ? 1 : 0);
    },
  },
  {
    name: 'api_db_replay_lag_seconds',
    help: 'On a standby: seconds the replayed WAL is behind the primary (absent on a primary)',
    fill: (g, r) => {
      if (r.database?.replay_lag_seconds != null) g.set(r.database.replay_lag_seconds);
    },
  },
  {
    name: 'api_db_replay_lag_bytes',
    help: 'On a standby: bytes of WAL received but not yet replayed (absent on a primary)',
    fill: (g, r) => {
      if (r.database?.replay_lag_bytes != null) g.set(r.database.replay_lag_bytes);
    },
  },
  {
    name: 'api_db_wal_receiving',
    help: 'On a standby: whether its WAL receiver streams from the primary (1) or not (0); absent on a primary',
    fill: (g, r) => {
      if (r.database?.receiving != null) g.set(r.database.receiving ? 1 : 0);
    },
  },
];

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
  readonly hotAnswers = new Counter({
    name: 'api_hot_path_answers_total',
    help: 'Answers served by the hot path from prepared bytes, ahead of the framework (search, history and POST latest; the rest of api_request_duration_seconds went through the routes)',
    registers: [this.registry],
  });
  /** The histogram's series by route, method and status: a label object hashed per request cost more. */
  private readonly requestSeries = new Map<string, { observe(seconds: number): void }>();
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

  /** One answer of `route` (its pattern), finished now, begun at `t0` (performance.now()). */
  observeRequest(route: string, method: string, status: number, t0: number): void {
    const name = `${route} ${method} ${status}`;
    let series = this.requestSeries.get(name);
    if (series === undefined) {
      series = this.requests.labels(route, method, String(status));
      this.requestSeries.set(name, series);
    }
    series.observe((performance.now() - t0) / 1000);
  }

  watchCaches(caches: Record<string, { stats: CacheStats }>): void {
    this.caches = caches;
  }

  /**
   * Exports what /v1/status computes, so alerts read the same verdicts as customers: `load` is
   * called at a scrape, at most once per `ttlMs` (concurrent and close scrapes share one report,
   * so scrapers do not add queries), and a load that fails or hangs sets `api_status_up` 0 and
   * drops the other series rather than failing the scrape or repeating old values. Call once.
   */
  observeStatus(load: () => Promise<ObservedStatus>, o: StatusScrapeOptions = {}): void {
    const ttlMs = o.ttlMs ?? 5_000;
    const timeoutMs = o.timeoutMs ?? 5_000;
    let cached: { at: number; report: Promise<ObservedStatus | null> } | undefined;
    // A load still running (past its timeout, it still holds its connections) is shared, never
    // doubled: a slow database would otherwise get six more queries per scrape, and the customers'
    // requests would find the pool busy. Past its timeout it reads as not loaded.
    // One that never ends (a connection lost without an error) is given up after `stuckAfterMs`.
    let runningSince: number | undefined;
    const stuckAfterMs = o.stuckAfterMs ?? 60_000;
    const report = () => {
      if (!cached || Date.now() - cached.at >= ttlMs) {
        if (cached && runningSince !== undefined && Date.now() - runningSince < stuckAfterMs) return cached.report;
        const since = (runningSince = Date.now());
        const done = () => {
          if (runningSince === since) runningSince = undefined;
        };
        const loading = Promise.resolve().then(load);
        void loading.then(done, done);
        cached = { at: Date.now(), report: loadWithin(() => loading, timeoutMs) };
      }
      return cached.report;
    };
    new Gauge({
      name: 'api_status_up',
      help: 'Whether the status report (what /v1/status answers) loaded for this scrape: 1, or 0 when its queries failed or took too long; without it the api_* status series are absent',
      registers: [this.registry],
      // Over a cluster's workers (cluster.ts), each of which loads the report: any one failing is
      // a failure.
      aggregator: 'min',
      async collect() {
        this.set((await report()) ? 1 : 0);
      },
    });
    for (const { name, help, labels = [], fill } of STATUS_GAUGES)
      new Gauge({
        name,
        help,
        labelNames: labels,
        registers: [this.registry],
        // Every worker reads the same database, so their readings differ only by their instant:
        // one is kept (the largest), not their sum.
        aggregator: 'max',
        async collect() {
          const r = await report();
          clear(this);
          if (r) fill(this, r);
        },
      });
  }

  /** Serves /metrics on its own listener; port 0 picks a free port. */
  serve(host: string, port: number): Promise<MetricsServer> {
    return serveMetrics(this.registry, host, port);
  }
}

/**
 * What a soak's samples say, as figures a reader can judge without the samples: per process the
 * growth of resident memory (and the API's heap and handles) from the first window after the
 * warm-up to the last, whether that growth levels off, each endpoint class's p99 drift between the
 * same windows, and every error. Pure: the samples in, the summary out.
 */
import { median, percentile, round } from '../../bench/support/harness.js';
import { windows, type Range } from './soak-config.js';
import type { Sample } from './soak-sample.js';

/**
 * Below this slope memory counts as flat: over a 20-minute third, a Node process's RSS wanders by
 * a few MB with its garbage collections, which alone fits slopes of a tenth of a MB a minute.
 */
export const FLAT_MB_PER_MIN = 0.25;

type Verdict = 'flat' | 'levelling off' | 'growing' | 'unknown';

export interface Summary {
  /** Per process (and `total`): median RSS of the last window minus the first window's, MB. */
  soak_rss_growth_mb: Record<string, number | null>;
  soak_heap_growth_mb: Record<string, number | null>;
  soak_handles_growth: Record<string, number | null>;
  /** Per endpoint class (and `all`): p99 of the last window / p99 of the first. */
  soak_p99_drift: Record<string, number | null>;
  p99_ms: Record<string, { first: number | null; last: number | null }>;
  rss_mb: Record<string, { first: number | null; last: number | null }>;
  /** RSS slope (MB a minute) of the middle and last thirds, and what they say. */
  rss_slope_mb_per_min: Record<string, { middle: number | null; last: number | null; verdict: Verdict }>;
  /** No process's memory still growing in the last third. */
  levels_off: boolean;
  growing: string[];
  requests: number;
  errors_5xx: number;
  /** Requests without an answer: time-outs, resets, refused connections. */
  no_answer: number;
  errors_by_status: Record<string, number>;
  not_gzip: number;
  /** 5xx answers the API itself counted during the soak: the same as errors_5xx unless a client missed one. */
  server_5xx: number | null;
  consumer_lag_max: number | null;
}

const inRange = (t: number, [from, to]: Range) => t > from && t <= to;

/** Least-squares slope of (minutes, value); null with fewer than three points. */
function slope(points: [number, number][]): number | null {
  if (points.length < 3) return null;
  const mx = points.reduce((a, [x]) => a + x, 0) / points.length;
  const my = points.reduce((a, [, y]) => a + y, 0) / points.length;
  const sxy = points.reduce((a, [x, y]) => a + (x - mx) * (y - my), 0);
  const sxx = points.reduce((a, [x]) => a + (x - mx) ** 2, 0);
  return sxx === 0 ? null : sxy / sxx;
}

function verdict(middle: number | null, last: number | null): Verdict {
  if (last === null) return 'unknown';
  if (last <= FLAT_MB_PER_MIN) return 'flat';
  if (middle !== null && last <= middle / 2) return 'levelling off';
  return 'growing';
}

type Series = (s: Sample) => number | null | undefined;

/** The value of `series` in each sample of `range`, as (minutes, value). */
function points(samples: readonly Sample[], range: Range, series: Series): [number, number][] {
  return samples
    .filter((s) => inRange(s.t_s, range))
    .map((s) => [s.t_s / 60, series(s)] as const)
    .filter((p): p is [number, number] => typeof p[1] === 'number');
}

const windowMedian = (samples: readonly Sample[], range: Range, series: Series): number | null => {
  const ys = points(samples, range, series).map(([, y]) => y);
  return ys.length ? round(median(ys), 1) : null;
};

function growth(samples: readonly Sample[], totalS: number, series: Series, digits = 1) {
  const w = windows(totalS);
  const first = windowMedian(samples, w.first, series);
  const last = windowMedian(samples, w.last, series);
  return { first, last, growth: first === null || last === null ? null : round(last - first, digits) };
}

/** p99 of every latency of `cls` (every class: undefined) in the samples of `range`. */
function windowP99(samples: readonly Sample[], history: readonly Map<string, number[]>[], range: Range, cls?: string) {
  const ms = samples.flatMap((s, i) =>
    inRange(s.t_s, range)
      ? [...(history[i] ?? new Map<string, number[]>())].filter(([c]) => !cls || c === cls).flatMap(([, xs]) => xs)
      : [],
  );
  return ms.length ? round(percentile(ms, 99), 1) : null;
}

export function summarize(
  samples: readonly Sample[],
  history: readonly Map<string, number[]>[],
  totalS: number,
): Summary {
  const w = windows(totalS);
  const names = [...new Set(samples.flatMap((s) => Object.keys(s.processes)))].sort();
  const rssOf =
    (name: string): Series =>
    (s) =>
      s.processes[name]?.rss_mb;
  const total: Series = (s) => Object.values(s.processes).reduce((a, p) => a + (p.rss_mb ?? 0), 0);
  const series = new Map<string, Series>([...names.map((n) => [n, rssOf(n)] as const), ['total', total]]);
  const out: Summary = {
    soak_rss_growth_mb: {},
    soak_heap_growth_mb: {},
    soak_handles_growth: {},
    soak_p99_drift: {},
    p99_ms: {},
    rss_mb: {},
    rss_slope_mb_per_min: {},
    levels_off: true,
    growing: [],
    ...errors(samples),
  };
  for (const [name, f] of series) {
    const g = growth(samples, totalS, f);
    out.soak_rss_growth_mb[name] = g.growth;
    out.rss_mb[name] = { first: g.first, last: g.last };
    const middle = slope(points(samples, w.middleThird, f));
    const last = slope(points(samples, w.lastThird, f));
    const v = verdict(middle, last);
    out.rss_slope_mb_per_min[name] = {
      middle: middle === null ? null : round(middle, 3),
      last: last === null ? null : round(last, 3),
      verdict: v,
    };
    if (v === 'growing' && name !== 'total') out.growing.push(name);
  }
  out.levels_off = out.growing.length === 0;
  for (const name of names.filter((n) => samples.some((s) => s.processes[n]?.heap_used_mb !== undefined))) {
    out.soak_heap_growth_mb[name] = growth(samples, totalS, (s) => s.processes[name]?.heap_used_mb).growth;
    out.soak_handles_growth[name] = growth(samples, totalS, (s) => s.processes[name]?.handles, 0).growth;
  }
  const classes = [...new Set(samples.flatMap((s) => Object.keys(s.classes)))].sort();
  for (const cls of [...classes, 'all']) {
    const c = cls === 'all' ? undefined : cls;
    const first = windowP99(samples, history, w.first, c);
    const last = windowP99(samples, history, w.last, c);
    out.p99_ms[cls] = { first, last };
    out.soak_p99_drift[cls] = first && last !== null ? round(last / first, 2) : null;
  }
  return out;
}

function errors(samples: readonly Sample[]) {
  const byStatus: Record<string, number> = {};
  let requests = 0;
  let notGzip = 0;
  for (const s of samples)
    for (const c of Object.values(s.classes)) {
      requests += c.requests;
      notGzip += c.not_gzip ?? 0;
      for (const [status, n] of Object.entries(c.errors)) byStatus[status] = (byStatus[status] ?? 0) + n;
    }
  const count = (match: (status: string) => boolean) =>
    Object.entries(byStatus)
      .filter(([status]) => match(status))
      .reduce((n, [, k]) => n + k, 0);
  const lags = samples.map((s) => s.consumer_lag).filter((x): x is number => x !== null);
  return {
    requests,
    errors_5xx: count((status) => /^5\d\d$/.test(status)),
    no_answer: count((status) => !/^\d{3}$/.test(status)),
    errors_by_status: byStatus,
    not_gzip: notGzip,
    server_5xx: samples.some((s) => s.server_5xx === null)
      ? null
      : samples.reduce((n, s) => n + (s.server_5xx ?? 0), 0),
    consumer_lag_max: lags.length ? Math.max(...lags) : null,
  };
}

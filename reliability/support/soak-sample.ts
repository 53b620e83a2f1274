/**
 * One sample of the soak: per process its resident memory (the API's, with heap and handles, from
 * its /metrics; every other process's from /proc, since only the API exports Node's own metrics)
 * and CPU seconds since the sample before; the materializer's consumer lag; the API's own count
 * of 5xx answers; the latencies and errors of each endpoint class since the sample before (client
 * side); the readers' events so far.
 */
import { readFileSync } from 'node:fs';
import { cpuSeconds, round } from '../../bench/support/harness.js';
import type { Platform } from './soak-platform.js';
import { serviceProcesses } from './soak-platform.js';
import type { ClassWindow, Recorder } from './soak-recorder.js';
import type { FeedReader, StreamReader } from './soak-readers.js';

interface ProcessSample {
  pid: number;
  rss_mb: number | null;
  heap_used_mb?: number;
  handles?: number;
  cpu_s: number;
}

export interface Sample {
  /** Seconds since the mix started. */
  t_s: number;
  processes: Record<string, ProcessSample>;
  /** CPU seconds of the stack beside the platform (PostgreSQL, Kafka, the registry) in the interval. */
  stack_cpu_s: Record<string, number>;
  /** Records the materializer has not applied, all partitions together; null when unreadable. */
  consumer_lag: number | null;
  /** 5xx answers the API counted in the interval (its request histogram); null when unreadable. */
  server_5xx: number | null;
  classes: Record<string, ClassWindow>;
  stream_events: number;
  feed_events: number;
  stream_connects: number;
}

/** `name{labels}` → value of a Prometheus text answer; empty when it does not answer. */
async function scrape(url: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const res = await fetch(url, { signal: AbortSignal.timeout(10_000) }).catch(() => undefined);
  if (!res?.ok) return out;
  for (const line of (await res.text()).split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

const sum = (m: Map<string, number>, match: (k: string) => boolean): number | null => {
  const xs = [...m].filter(([k]) => match(k)).map(([, v]) => v);
  return xs.length ? xs.reduce((a, b) => a + b, 0) : null;
};

const server5xx = (api: Map<string, number>): number | null =>
  api.size
    ? (sum(api, (k) => k.startsWith('api_request_duration_seconds_count{') && /status="5\d\d"/.test(k)) ?? 0)
    : null;

function vmRssMb(pid: number): number | null {
  try {
    const kb = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? null : round(Number(kb) / 1024, 1);
  } catch {
    return null;
  }
}

const STACK = ['postgresql', 'kafka', 'registry'];

export class Sampler {
  private cpuBefore: Map<string, number>;
  /** The API's count of 5xx answers at the sample before: the readiness wait's 503s are not the soak's. */
  private server5xxBefore: number | null = null;

  constructor(
    private readonly platform: Platform,
    private readonly recorder: Recorder,
    private readonly stream: StreamReader,
    private readonly feed: FeedReader,
  ) {
    this.cpuBefore = cpuSeconds(platform.child.pid as number);
  }

  /** Reads the counters the first sample's differences start from. */
  async start(): Promise<void> {
    this.server5xxBefore = server5xx(await scrape(this.platform.apiMetrics));
  }

  async take(tS: number): Promise<Sample> {
    const [api, mat] = await Promise.all([scrape(this.platform.apiMetrics), scrape(this.platform.materializerMetrics)]);
    const cpu = cpuSeconds(this.platform.child.pid as number);
    const server5xxNow = server5xx(api);
    const cpuDelta = (name: string) => round((cpu.get(name) ?? 0) - (this.cpuBefore.get(name) ?? 0), 1);
    const processes: Record<string, ProcessSample> = {};
    const procs = [...serviceProcesses(this.platform.child.pid as number)].sort(([a], [b]) => a.localeCompare(b));
    for (const [name, pid] of procs) processes[name] = { pid, rss_mb: vmRssMb(pid), cpu_s: cpuDelta(name) };
    const apiRss = api.get('process_resident_memory_bytes');
    const heap = api.get('nodejs_heap_size_used_bytes');
    const handles = api.get('nodejs_active_handles_total');
    if (processes.api && apiRss !== undefined)
      processes.api = {
        ...processes.api,
        rss_mb: round(apiRss / 2 ** 20, 1),
        ...(heap !== undefined ? { heap_used_mb: round(heap / 2 ** 20, 1) } : {}),
        ...(handles !== undefined ? { handles } : {}),
      };
    const sample: Sample = {
      t_s: round(tS, 1),
      processes,
      stack_cpu_s: Object.fromEntries(STACK.map((s) => [s, cpuDelta(s)])),
      consumer_lag: sum(mat, (k) => k.startsWith('materializer_consumer_lag{')),
      server_5xx: server5xxNow === null || this.server5xxBefore === null ? null : server5xxNow - this.server5xxBefore,
      classes: this.recorder.drain(),
      stream_events: this.stream.events,
      feed_events: this.feed.events,
      stream_connects: this.stream.connects,
    };
    this.cpuBefore = cpu;
    this.server5xxBefore = server5xxNow ?? this.server5xxBefore;
    return sample;
  }
}

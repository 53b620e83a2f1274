/**
 * Every answer the soak's clients got, per endpoint class, gathered between two samples: a sample
 * takes (drains) what arrived since the one before, so each minute's latencies are that minute's.
 * The raw latencies of every sample are kept too: a window's p99 is computed over all its
 * requests, not as a median of per-minute p99s.
 */
import { percentile, round } from '../../bench/support/harness.js';

export interface ClassWindow {
  requests: number;
  p50_ms: number | null;
  p99_ms: number | null;
  /** Answers other than 200 (and 304), by status or by why there was none. */
  errors: Record<string, number>;
  /** Asked for gzip, answered 200 uncompressed. */
  not_gzip?: number;
}

interface Pending {
  ms: number[];
  errors: Record<string, number>;
  notGzip: number;
}

export class Recorder {
  private pending = new Map<string, Pending>();
  /** Per drained sample: per class, the latencies of its successful answers. */
  readonly history: Map<string, number[]>[] = [];
  /** Every class that got at least one 200. */
  readonly answered = new Set<string>();

  record(cls: string, status: number | string, ms: number, notGzip = false): void {
    let p = this.pending.get(cls);
    if (!p) this.pending.set(cls, (p = { ms: [], errors: {}, notGzip: 0 }));
    if (status === 200 || status === 304) {
      p.ms.push(ms);
      this.answered.add(cls);
    } else p.errors[String(status)] = (p.errors[String(status)] ?? 0) + 1;
    if (notGzip) p.notGzip++;
  }

  /** What arrived since the last drain, per class; keeps the latencies for the windows. */
  drain(): Record<string, ClassWindow> {
    const taken = this.pending;
    this.pending = new Map();
    this.history.push(new Map([...taken].map(([cls, p]) => [cls, p.ms])));
    const out: Record<string, ClassWindow> = {};
    for (const [cls, p] of [...taken].sort(([a], [b]) => a.localeCompare(b))) {
      out[cls] = {
        requests: p.ms.length + Object.values(p.errors).reduce((a, b) => a + b, 0),
        p50_ms: p.ms.length ? round(percentile(p.ms, 50), 1) : null,
        p99_ms: p.ms.length ? round(percentile(p.ms, 99), 1) : null,
        errors: p.errors,
        ...(p.notGzip ? { not_gzip: p.notGzip } : {}),
      };
    }
    return out;
  }
}

/**
 * Fault injection per marketplace, switchable at run time through the control API. A fault
 * can start after some requests (to break a cycle half way) and stop after some (to recover).
 */
export const FAULT_KINDS = [
  'latency', // delay the answer by latencyMs
  'error5xx', // answer `status` (default 503)
  'rateLimit', // 429 with Retry-After: retryAfterS
  'malformed', // a body that is not JSON
  'truncated', // Content-Length of the full body, half of it sent, connection cut
  'emptyPage', // the page's item list emptied while the envelope says more exist
  'duplicates', // the page repeats its first item at the end
  'slowDrip', // the body in small chunks with pauses (dripMs per 256 bytes)
  'zeroPrices', // every price field 0: a broken upstream that must never become a price
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface FaultSpec {
  kind: FaultKind;
  /** Probability per request. @default 1 */
  rate?: number;
  /** Only requests whose path starts with this. */
  path?: string;
  /** Let this many matching requests through first. @default 0 */
  after?: number;
  /** Remove the fault after it fired this many times. @default unlimited */
  times?: number;
  latencyMs?: number;
  status?: number;
  retryAfterS?: number;
  dripMs?: number;
}

interface ActiveFault extends FaultSpec {
  seen: number;
  fired: number;
}

export class FaultBoard {
  private readonly faults = new Map<string, ActiveFault[]>();

  set(market: string, spec: FaultSpec): void {
    if (!FAULT_KINDS.includes(spec.kind)) throw new RangeError(`unknown fault kind '${String(spec.kind)}'`);
    if (spec.rate !== undefined && !(spec.rate >= 0 && spec.rate <= 1))
      throw new RangeError('rate must be within [0, 1]');
    const list = this.faults.get(market) ?? [];
    list.push({ ...spec, seen: 0, fired: 0 });
    this.faults.set(market, list);
  }

  clear(market?: string): void {
    if (market) this.faults.delete(market);
    else this.faults.clear();
  }

  list(): Record<string, FaultSpec[]> {
    return Object.fromEntries([...this.faults].map(([m, l]) => [m, l.map(({ seen: _s, fired: _f, ...spec }) => spec)]));
  }

  /** The faults that fire for this request (each counted once). */
  pick(market: string, path: string, random: () => number = Math.random): FaultSpec[] {
    const list = this.faults.get(market);
    if (!list) return [];
    const firing: FaultSpec[] = [];
    for (const f of list) {
      if (f.path && !path.startsWith(f.path)) continue;
      f.seen++;
      if (f.seen <= (f.after ?? 0)) continue;
      if (random() >= (f.rate ?? 1)) continue;
      f.fired++;
      firing.push(f);
    }
    this.faults.set(
      market,
      list.filter((f) => f.times === undefined || f.fired < f.times),
    );
    return firing;
  }
}

/** Empties the first non-empty array found in the body (depth first), or a keyed document. */
export function emptyFirstList(body: unknown): unknown {
  let done = false;
  const walk = (v: unknown): unknown => {
    if (done) return v;
    if (Array.isArray(v)) {
      if (v.length > 0) {
        done = true;
        return [];
      }
      return v;
    }
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  const out = walk(body);
  return done ? out : {};
}

/** Repeats the first element of the first non-empty array at its end. */
export function duplicateFirst(body: unknown): unknown {
  let done = false;
  const walk = (v: unknown): unknown => {
    if (done) return v;
    if (Array.isArray(v)) {
      if (v.length > 0 && typeof v[0] === 'object' && v[0] !== null) {
        done = true;
        return [...v, v[0]];
      }
      return v.map(walk);
    }
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return walk(body);
}

const PRICE_KEY = /price|close|fen|cents/i;

/** Sets every price-like field to 0 (what a broken upstream sends on a bad day). */
export function zeroPrices(body: unknown): unknown {
  const walk = (v: unknown, key: string): unknown => {
    // Order-book graphs: [[price, quantity], …] — the price is the first element.
    if (/order_graph$/.test(key) && Array.isArray(v)) {
      return v.map((lvl) => (Array.isArray(lvl) ? [typeof lvl[0] === 'number' ? 0 : '0', ...lvl.slice(1)] : lvl));
    }
    if (Array.isArray(v)) return v.map((x) => walk(x, key));
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, k)]));
    if (
      PRICE_KEY.test(key) &&
      !/num|qty|count/i.test(key) &&
      (typeof v === 'number' || (typeof v === 'string' && /^\d/.test(v)))
    ) {
      return typeof v === 'number' ? 0 : '0';
    }
    return v;
  };
  return walk(body, '');
}

/**
 * The soak's steady mix: every customer endpoint of the API (plans.ts's ENDPOINTS) at a fixed
 * rate, open-loop (a slow answer does not slow the next request, as it would not for many
 * customers), on one enterprise key. The change feed and the stream have readers of their own
 * (soak-readers.ts).
 *
 * The requests are interleaved by a smooth weighted round robin on one timer, so each second
 * carries about the same number: the key's limit is 10 per second in fixed windows, and a mix of
 * independent timers lines up in one second now and then and is refused (429).
 */
import { ENDPOINT_IDS, LIST_MARKETS, WEBHOOK_ENDPOINT_IDS } from '@skinprices/api';
import type { EndpointId } from '@skinprices/api';
import type { Recorder } from './soak-recorder.js';
import { send, type Req } from './soak-http.js';

/** An item of the catalogue as the API listed it when the mix started. */
export interface Item {
  name: string;
  phase: string;
  /** The catalogue's key: the name, with the phase in parentheses for a phase item. */
  key: string;
  /** Marketplaces listing it then. */
  markets: string[];
}

export interface MixClass {
  endpoint: EndpointId;
  perMinute: number;
  /** The `i`-th request of this class. */
  request: (i: number, items: readonly Item[]) => Req;
}

const at = <T>(xs: readonly T[], i: number): T => xs[i % xs.length] as T;
const q = encodeURIComponent;

/** Per minute, about 270 requests: with the feed's pages, half of the enterprise plan's 600. */
export const MIX: readonly MixClass[] = [
  {
    endpoint: 'GET /v1/prices/{market}',
    perMinute: 60,
    request: (i) => get(`/v1/prices/${at(LIST_MARKETS, i)}`, true),
  },
  { endpoint: 'GET /v1/prices/latest', perMinute: 6, request: () => get('/v1/prices/latest', true) },
  {
    endpoint: 'POST /v1/prices/latest',
    perMinute: 30,
    request: (i, items) => ({
      method: 'POST',
      path: '/v1/prices/latest',
      body: { items: Array.from({ length: Math.min(100, items.length) }, (_, k) => at(items, i * 100 + k).key) },
    }),
  },
  {
    endpoint: 'GET /v1/prices/search',
    perMinute: 30,
    request: (i, items) => get(`/v1/prices/search?market_hash_name=${q(at(items, i).name)}`),
  },
  {
    endpoint: 'GET /v1/prices/{market}/history',
    perMinute: 30,
    request: (i, items) => {
      const item = at(items, i);
      const phase = item.phase ? `&phase=${q(item.phase)}` : '';
      const resolution = i % 2 ? 'hourly' : 'daily';
      return get(
        `/v1/prices/${at(item.markets, i)}/history?market_hash_name=${q(item.name)}${phase}&resolution=${resolution}`,
      );
    },
  },
  {
    endpoint: 'GET /v1/{store_market}',
    perMinute: 20,
    // The whole store (cached, gzip) and one item of it in turn.
    request: (i, items) => (i % 2 ? get(`/v1/store?market_hash_name=${q(at(items, i).name)}`) : get('/v1/store', true)),
  },
  {
    endpoint: 'GET /v1/prices/{market}/buyorder',
    perMinute: 20,
    request: (i) => get(`/v1/prices/${at(['cn-a', 'cn-b'], i)}/buyorder`, true),
  },
  {
    endpoint: 'GET /v2/prices/float-ranged',
    perMinute: 12,
    request: (i) =>
      get(
        i % 2 ? `/v2/prices/float-ranged?market=${at(['cn-a', 'cn-b', 'cn-c'], i)}` : '/v2/prices/float-ranged',
        true,
      ),
  },
  {
    endpoint: 'GET /v1/prices/{market}/float-buyorder',
    perMinute: 20,
    request: (i, items) =>
      get(`/v1/prices/${at(['cn-a', 'cn-b'], i)}/float-buyorder?market_hash_name=${q(at(items, i).name)}`),
  },
  {
    endpoint: 'GET /v1/market-sales/search',
    perMinute: 20,
    request: (i, items) => get(`/v1/market-sales/search?market_hash_name=${q(at(items, i).name)}`),
  },
  // The 24-hour ZIP: large at full size, and customers fetch it now and then, not in a loop.
  { endpoint: 'GET /v1/market-sales/export', perMinute: 1, request: () => get('/v1/market-sales/export') },
  {
    endpoint: 'GET /v1/indexes/market-cap',
    perMinute: 12,
    request: (i) => get(`/v1/indexes/market-cap?resolution=${i % 2 ? 'hourly' : 'daily'}`),
  },
  { endpoint: 'GET /v1/status', perMinute: 12, request: () => get('/v1/status') },
];

/** The endpoints read by the feed and stream readers, not by the mix. */
const READER_ENDPOINTS: readonly EndpointId[] = ['GET /v1/prices/changes', 'GET /v1/prices/stream'];

function get(path: string, gzip = false): Req {
  return { method: 'GET', path, gzip };
}

/**
 * The endpoints a soak reads: every one but the webhook subscriptions' management, which a customer
 * calls a few times a month, not per second (deliveries under faults: reliability/webhooks.ts).
 */
export const SOAKED_ENDPOINT_IDS: readonly EndpointId[] = ENDPOINT_IDS.filter(
  (e) => !(WEBHOOK_ENDPOINT_IDS as readonly string[]).includes(e),
);

/** Endpoints of the API that neither the mix nor a reader requests: a new endpoint must join the soak. */
export function uncovered(all: readonly EndpointId[]): EndpointId[] {
  const covered = new Set<EndpointId>([...MIX.map((c) => c.endpoint), ...READER_ENDPOINTS]);
  return all.filter((e) => !covered.has(e));
}

/** Smooth weighted round robin (as nginx balances upstreams): each class at its share, evenly spread. */
function* interleave(classes: readonly MixClass[]): Generator<MixClass> {
  const total = classes.reduce((n, c) => n + c.perMinute, 0);
  const current = classes.map(() => 0);
  for (;;) {
    let best = 0;
    for (let k = 0; k < classes.length; k++) {
      current[k] = (current[k] as number) + (classes[k] as MixClass).perMinute;
      if ((current[k] as number) > (current[best] as number)) best = k;
    }
    current[best] = (current[best] as number) - total;
    yield classes[best] as MixClass;
  }
}

export interface Mix {
  /** Requests sent so far. */
  sent: () => number;
  /** No more requests; resolves when every request under way has its answer. */
  stop: () => Promise<void>;
}

/** Starts the mix against `base`; every answer goes to `recorder`. */
export function startMix(base: string, key: string, items: readonly Item[], recorder: Recorder): Mix {
  const perMinute = MIX.reduce((n, c) => n + c.perMinute, 0);
  const everyMs = 60_000 / perMinute;
  const order = interleave(MIX);
  const counts = new Map<EndpointId, number>();
  const inFlight = new Set<Promise<void>>();
  const started = performance.now();
  let sent = 0;
  let slot = 0;
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    const cls = order.next().value as MixClass;
    const i = counts.get(cls.endpoint) ?? 0;
    counts.set(cls.endpoint, i + 1);
    const req = cls.request(i, items);
    const p = send(base, key, req).then((a) => {
      const gzipped = /\bgzip\b/.test(String(a.headers['content-encoding'] ?? ''));
      recorder.record(cls.endpoint, a.status, a.ms, req.gzip === true && a.status === 200 && !gzipped);
    });
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
    sent++;
    // Against the start, not the last tick: a late tick (a busy event loop) does not shift every
    // later one, and a missed slot is skipped rather than sent in a burst.
    slot = Math.max(slot + 1, Math.ceil((performance.now() - started) / everyMs));
    timer = setTimeout(tick, Math.max(0, started + slot * everyMs - performance.now()));
  };
  tick();
  return {
    sent: () => sent,
    stop: async () => {
      clearTimeout(timer);
      await Promise.all([...inFlight]);
    },
  };
}

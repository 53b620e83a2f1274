/**
 * A burst: many prices moved upstream at the same moment, as a market-wide move does, through
 * the simulator's overrides (POST /_sim/override, sent together): `perMarket` items on every
 * listing marketplace go 7 % up. Each moved price is then looked for in what the stream and the
 * feed deliver, so the run knows when, and whether, every one of them arrived.
 */
import { MARKETS, normalizePrice, parsePrice, toFixedString } from '@skinprices/domain';
import type { Change } from './soak-readers.js';

export interface BurstResult {
  at_s: number;
  /** Prices moved upstream. */
  changes: number;
  /** Seconds the overrides took to send. */
  set_s: number;
  arrived_feed: number;
  arrived_stream: number;
  /** Seconds from the burst until the last of its changes reached the feed or stream; null while any is missing. */
  feed_all_s: number | null;
  stream_all_s: number | null;
  feed_p50_s: number | null;
}

interface Moved {
  burst: number;
  price: string;
  feedAt?: number;
  streamAt?: number;
}

const LISTING_MARKETS = MARKETS.filter((m) => m.capabilities.includes('listings')).map((m) => m.slug);
const keyOf = (market: string, name: string, phase: string) => `${market}|${name}|${phase}`;

export class Bursts {
  private readonly moved = new Map<string, Moved>();
  private readonly fired: { atS: number; at: number; setS: number }[] = [];

  constructor(
    private readonly control: string,
    private readonly perMarket: number,
  ) {}

  /** Moves the prices; `atS` is the run's clock, for the result. */
  async fire(atS: number): Promise<void> {
    const burst = this.fired.length;
    const at = Date.now();
    const overrides: Record<string, unknown>[] = [];
    for (const market of LISTING_MARKETS) {
      const res = await fetch(`${this.control}/_sim/truth?market=${market}&kind=listings`);
      const { records } = (await res.json()) as {
        records: { market_hash_name: string; phase: string; price: string | null; count: number }[];
      };
      let taken = 0;
      for (const r of records) {
        if (taken >= this.perMarket) break;
        const key = keyOf(market, r.market_hash_name, r.phase);
        if (r.price === null || this.moved.has(key)) continue;
        const price = toFixedString(parsePrice(r.price).times('1.07'));
        // A price of a few cents does not move by 7 % at two decimals.
        if (normalizePrice(price) === normalizePrice(r.price)) continue;
        // Known before it is set: the poll that sees it may come before the last override is sent.
        this.moved.set(key, { burst, price: normalizePrice(price) });
        overrides.push({ market, market_hash_name: r.market_hash_name, phase: r.phase, price, count: r.count });
        taken++;
      }
    }
    for (let i = 0; i < overrides.length; i += 16)
      await Promise.all(
        overrides.slice(i, i + 16).map(async (o) => {
          const res = await fetch(`${this.control}/_sim/override`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(o),
          });
          if (!res.ok) throw new Error(`override ${JSON.stringify(o)}: ${res.status} ${await res.text()}`);
        }),
      );
    this.fired.push({ atS, at, setS: (Date.now() - at) / 1000 });
  }

  /** A change a reader delivered: one of a burst's, when it carries the moved price. */
  observe(c: Change, via: 'feed' | 'stream'): void {
    const m = this.moved.get(keyOf(c.market, c.market_hash_name, c.phase));
    if (!m || c.new_price === null || normalizePrice(c.new_price) !== m.price) return;
    if (via === 'feed') m.feedAt ??= Date.now();
    else m.streamAt ??= Date.now();
  }

  /** Moved prices not yet delivered by both readers. */
  missing(): number {
    return [...this.moved.values()].filter((m) => m.feedAt === undefined || m.streamAt === undefined).length;
  }

  results(): BurstResult[] {
    return this.fired.map((f, burst) => {
      const ms = [...this.moved.values()].filter((m) => m.burst === burst);
      const after = (xs: (number | undefined)[]) => {
        const got = xs.filter((x): x is number => x !== undefined).map((x) => (x - f.at) / 1000);
        return { n: got.length, all: got.length === ms.length && got.length > 0 ? Math.max(...got) : null, got };
      };
      const feed = after(ms.map((m) => m.feedAt));
      const stream = after(ms.map((m) => m.streamAt));
      const sorted = [...feed.got].sort((a, b) => a - b);
      return {
        at_s: Math.round(f.atS),
        changes: ms.length,
        set_s: Number(f.setS.toFixed(1)),
        arrived_feed: feed.n,
        arrived_stream: stream.n,
        feed_all_s: feed.all === null ? null : Number(feed.all.toFixed(1)),
        stream_all_s: stream.all === null ? null : Number(stream.all.toFixed(1)),
        feed_p50_s: sorted.length ? Number((sorted[Math.floor(sorted.length / 2)] as number).toFixed(1)) : null,
      };
    });
  }
}

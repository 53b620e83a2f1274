/**
 * The combined catalogue kept current per marketplace. A marketplace whose read-model version
 * moved (every one, once the derived values moved and `derived.maxLagMs` passed) is read again
 * and spliced in as soon as it is read; the others are kept. An answer for some marketplaces
 * waits only for those: a cold start changes every marketplace at once, and a client asking for
 * one must not wait for twelve reads. How many reads run at once is the caller's `read` to bound
 * (the API's whole-read slots): a marketplace read as JS objects is tens of MB of heap until it
 * is bytes, and twelve at once grow a heap that V8 keeps afterwards.
 */
import type { DerivedVersion } from './bodies.js';
import { Catalogue, type CatalogueShard } from './catalogue.js';

/** How often a fresh lookup reads a marketplace again whose joined read began before its version. */
const MAX_FRESH_ROUNDS = 3;

/** What the catalogue holds of one marketplace: its read-model version when read, and when (performance.now()). */
interface Held {
  version: number;
  derived: number;
  at: number;
}

export class CatalogueCache {
  /** Lookups answered from the cache and lookups that had to build (for /metrics). */
  readonly stats = { hits: 0, misses: 0 };
  private catalogue: Catalogue;
  private readonly held: (Held | undefined)[];
  /** Reads in flight, per marketplace (single-flight). */
  private readonly reading = new Map<number, Promise<void>>();
  private readonly everyIndex: readonly number[];

  constructor(
    private readonly markets: readonly string[],
    /** The read-model version of the data of these marketplaces (see VersionOf). */
    private readonly versionOf: (markets: readonly string[]) => number,
    private readonly read: (market: string) => Promise<CatalogueShard>,
    private readonly derived?: DerivedVersion,
    /** A marketplace read this recently is kept even when its version moved (fresh aside). */
    private readonly minAgeMs = 1_000,
  ) {
    this.catalogue = Catalogue.empty(markets);
    this.held = markets.map(() => undefined);
    this.everyIndex = markets.map((_, i) => i);
  }

  /** The combined catalogue when every marketplace's part is current (a hit), else undefined (nothing counted). */
  peek(): Catalogue | undefined {
    if (this.staleOf(this.everyIndex, this.minAgeMs).length > 0) return undefined;
    this.stats.hits++;
    return this.catalogue;
  }

  /**
   * The catalogue, current for `only` (indexes into the marketplaces; default every one). `fresh`:
   * never outdated for them, waiting for their reads (builders of other cached values, see
   * VersionedCache.fresh); otherwise a marketplace read in the last `minAgeMs` is kept, and one
   * already held is served while it is read again.
   */
  async get(fresh = false, only?: readonly number[]): Promise<Catalogue> {
    const wanted = only ?? this.markets.map((_, i) => i);
    const stale = this.staleOf(wanted, fresh ? 0 : this.minAgeMs);
    if (stale.length === 0) {
      this.stats.hits++;
      return this.catalogue;
    }
    this.stats.misses++;
    if (fresh || stale.some((i) => this.held[i] === undefined)) {
      // A read already in flight may have started before the version seen here: it is joined,
      // and read again once it ends if what it holds is still older.
      const seen = stale.map((i) => this.versionOf([this.markets[i] as string]));
      let behind = stale;
      for (let round = 0; round < MAX_FRESH_ROUNDS && behind.length > 0; round++) {
        await Promise.all(behind.map((i) => this.refresh(i)));
        behind = stale.filter((i, k) => (this.held[i]?.version ?? -1) < (seen[k] as number));
      }
      return this.catalogue;
    }
    // Served as held; the next request finds it current. A failed read is retried by the next one.
    for (const i of stale) this.refresh(i).catch(() => undefined);
    return this.catalogue;
  }

  /** Of `wanted`, the marketplaces whose held data is older than the read model's. */
  private staleOf(wanted: readonly number[], minAgeMs: number): number[] {
    const now = performance.now();
    const d = this.derived?.version() ?? 0;
    const lag = this.derived?.maxLagMs ?? 0;
    return wanted.filter((i) => {
      const h = this.held[i];
      if (!h) return true;
      const age = now - h.at;
      const current =
        (h.version === this.versionOf([this.markets[i] as string]) || age < minAgeMs) && (h.derived === d || age < lag);
      return !current;
    });
  }

  /** Reads marketplace `i` again and splices it in (the splice is synchronous: none is lost). */
  private refresh(i: number): Promise<void> {
    let p = this.reading.get(i);
    if (p) return p;
    const market = this.markets[i] as string;
    // Versions before the read: a change committed during it makes the next lookup read again.
    const version = this.versionOf([market]);
    const derived = this.derived?.version() ?? 0;
    p = this.read(market)
      .then((shard) => {
        this.catalogue = this.catalogue.with(market, shard);
        this.held[i] = { version, derived, at: performance.now() };
      })
      .finally(() => this.reading.delete(i));
    this.reading.set(i, p);
    return p;
  }
}

/**
 * The combined catalogue kept current. When the read model's version of some marketplaces moved,
 * those marketplaces (every one, when the derived values moved) are read again and spliced in,
 * one at a time: a marketplace read as JS objects is tens of MB of heap until it is bytes, and
 * twelve reads at once grew a heap that V8 kept afterwards.
 */
import { VersionedCache, type DerivedVersion } from './bodies.js';
import { Catalogue, type CatalogueShard } from './catalogue.js';

interface Built {
  catalogue: Catalogue;
  /** Each marketplace's read-model version when it was read, in the catalogue's order. */
  versions: number[];
  derived: number;
}

export class CatalogueCache {
  private readonly cache: VersionedCache<Built>;

  constructor(
    private readonly markets: readonly string[],
    /** The read-model version of the data of these marketplaces (see VersionOf). */
    private readonly versionOf: (markets: readonly string[]) => number,
    private readonly read: (market: string) => Promise<CatalogueShard>,
    private readonly derived?: DerivedVersion,
  ) {
    this.cache = new VersionedCache<Built>(() => versionOf(markets), 1_000, derived);
  }

  /** Lookups answered from the cache and lookups that had to build (for /metrics). */
  get stats(): { hits: number; misses: number } {
    return this.cache.stats;
  }

  /**
   * The catalogue; `fresh`: never outdated, waiting for the rebuild instead (for builders of other
   * cached values, see VersionedCache.fresh).
   */
  async get(fresh = false): Promise<Catalogue> {
    const build = (previous: Built | undefined) => this.build(previous);
    return (await (fresh ? this.cache.fresh('*', build) : this.cache.get('*', build))).catalogue;
  }

  private async build(previous: Built | undefined): Promise<Built> {
    // Versions before the reads: a change committed during a read makes the next lookup rebuild.
    const derived = this.derived?.version() ?? 0;
    const versions = this.markets.map((m) => this.versionOf([m]));
    let catalogue = previous?.catalogue ?? Catalogue.empty(this.markets);
    for (const [i, market] of this.markets.entries()) {
      if (previous && previous.derived === derived && previous.versions[i] === versions[i]) continue;
      catalogue = catalogue.with(market, await this.read(market));
    }
    return { catalogue, versions, derived };
  }
}

/* What this process knows of the read model's version (the notifications that move it: PgNotifications of @skinprices/store). */
/**
 * The read model's version as this process knows it, per tag (`listing:cn-a`, `buyorder:cn-b`, …:
 * what materializer commits touched, as the change follower reads them from the change journal:
 * changes/follower.ts) plus a global part bumped when anything may have changed (bumpAll: the
 * follower's first read, a journal that no longer reaches back to its position), and every
 * `fallbackMs` (5 min) as a last resort. A body depends on some tags; it is rebuilt only when one
 * of them (or the global part) moved, so a batch of one marketplace does not rebuild the megabytes
 * of all the others.
 *
 * `derived` (what every applied cycle marker recomputes: statistics, liquidity, market cap, the
 * clock; rows of every list, slowly moving) is counted apart (`derived()`): caches let it lag by
 * seconds (VersionedCache's derived age), because a derive transaction commits every few seconds
 * under load, and rebuilding every list each time (33k rows: about a CPU-second each) would keep
 * the API saturated and price changes waiting behind the rebuilds. The rows a marker removed come
 * with their own tags, so removals are as prompt as ingest's changes.
 * `scores` (the recomputation that writes liquidity scores) is counted apart again (`scores()`).
 */
export class ReadModelVersion {
  private global = 0;
  private readonly tags = new Map<string, number>();
  private all = 0;
  private scoresCount = 0;
  private derivedCount = 0;
  private resetCount = 0;
  private readonly tick: NodeJS.Timeout;
  private readonly listeners: (() => void)[] = [];

  constructor(fallbackMs = 300_000) {
    // The fallback moves everything but is not a reset: nothing said rows may have gone.
    this.tick = setInterval(() => {
      this.all++;
      this.global++;
      this.moved();
    }, fallbackMs);
    this.tick.unref();
  }

  /** `listener` is called after every move of any part (caches that refresh ahead of requests). */
  onBump(listener: () => void): void {
    this.listeners.push(listener);
  }

  private moved(): void {
    for (const l of this.listeners) l();
  }

  /**
   * A number that changes whenever anything `deps` names (or the global part) changed; without
   * `deps`, whenever anything changed. Sums of counters that only grow: equal means unchanged.
   */
  value(deps?: readonly string[]): number {
    if (!deps) return this.all;
    let v = this.global;
    for (const t of deps) v += this.tags.get(t) ?? 0;
    return v;
  }

  /**
   * Untagged bumps: anything may have changed, so a patched list body must be rebuilt (the change
   * follower uses bumpAll: the lists follow positions of their own). The 5-minute
   * fallback is not one: a patch reads every committed change whether notified or not, and
   * counting it here would rebuild every list at once every five minutes (thirteen 33k-row lists,
   * about a CPU-second each, on one event loop: seconds during which no price change is served).
   */
  resets(): number {
    return this.resetCount;
  }

  /** How often derived values moved (see the class comment). */
  derived(): number {
    return this.derivedCount;
  }

  /**
   * How often liquidity scores moved (`scores`: the derive path's recomputation, which also sends
   * `derived`): lists read their scores only after this moved (list-reads.ts LiquidityLag). The
   * markers' transaction moves `derived` alone, before the scores it queues are computed.
   */
  scores(): number {
    return this.scoresCount;
  }

  /**
   * Anything may have changed, but nothing behind the patched lists' own positions (the change
   * follower's first read, or a journal that no longer reaches back to it): every value is looked
   * at again, the lists through their positions, so this is no reset.
   */
  bumpAll(): void {
    this.all++;
    this.global++;
    this.derivedCount++;
    this.scoresCount++;
    this.moved();
  }

  /** A commit touched `tags` (undefined: possibly everything; `derived`: the derived values). */
  bump(tags?: readonly string[]): void {
    if (!tags) {
      this.all++;
      this.global++;
      this.resetCount++;
    } else {
      for (const t of tags) {
        if (t === 'derived') this.derivedCount++;
        else if (t === 'scores') this.scoresCount++;
        else this.tags.set(t, (this.tags.get(t) ?? 0) + 1);
      }
      if (tags.some((t) => t !== 'derived' && t !== 'scores')) this.all++;
    }
    this.moved();
  }

  stop(): void {
    clearInterval(this.tick);
  }
}

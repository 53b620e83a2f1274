/**
 * When the derive path's later steps may run (pure): the recomputation paced and deferred behind
 * ingest, the outlier guard's second look held while listings come in. The Deriver (deriver.ts)
 * asks these before each round; they hold no state of their own.
 */

/**
 * Why the recomputation is paced: every poll cycle of any of the 14 marketplaces queues one.
 * Liquidity takes only the items whose inputs moved (derived.ts), but a cold start, a FULL cycle
 * or a day's roll-over moves most of them, and an hour of market cap reads every CN-A item. Run
 * back to back, the recomputations would take most of PostgreSQL's time beside ingest on the same
 * two cores, and prices would wait behind them from produced to committed. Paced, the queued work
 * (derive_pending) is coalesced into the next run: liquidity scores move every ~3T instead of
 * every T (the API shows them with a lag of its own, DERIVED_MAX_LAG_MS), and the last run still
 * sees all data at the final clock (replay determinism, recomputeDerived). settle() is not
 * paced: a replay's or a test's end recomputes at once.
 */
export const RECOMPUTE_COST_FACTOR = 2;
/** A recomputation that waited long for a lock (wall time, not work) never pauses it longer than this. */
export const MAX_RECOMPUTE_PAUSE_MS = 30_000;

/**
 * While this process's partitions have more than this many records left to read, a recomputation
 * of work its own markers queued waits, at most MAX_RECOMPUTE_DEFER_MS from the first marker
 * that queued it: prices before the values derived from them. In a cold start each marker's
 * recomputation would read the catalogue as it stands so far, each longer than the last, on the
 * PostgreSQL that the ingest of the rest of the catalogue needs; deferred, fewer of them cover the
 * same markers. A marketplace's FULL listings cycle is ~33,000 records, so in steady state one
 * defers it for the seconds its cycle takes to ingest.
 */
const BACKLOG_DEFERS = 10_000;
const MAX_RECOMPUTE_DEFER_MS = 30_000;

/**
 * Whether the recomputation may run at `now` (pure): not before `dueAt` (its pace); and while
 * `backlog` records wait for ingest, not until the work queued since `queuedSince` has waited
 * MAX_RECOMPUTE_DEFER_MS. Work this process did not see queued (undefined: a restart, another
 * member's markers) runs when due, never deferred.
 */
export function recomputeGate(now: number, dueAt: number, backlog: number, queuedSince: number | undefined): boolean {
  if (now < dueAt) return false;
  return backlog <= BACKLOG_DEFERS || queuedSince === undefined || now - queuedSince >= MAX_RECOMPUTE_DEFER_MS;
}

/**
 * The second look (judge_pending) waits while listings are still coming in: a LISTINGS marker
 * stored and not yet applied, or more than BACKLOG_DEFERS records left to read on listings.v1
 * (a cycle whose marker is not sent yet): once those are in, one run covers them all. It knows
 * its oldest row's queued_at, whoever queued it (another member, a process before a restart),
 * and waits at most JUDGE_MAX_DEFER_MS from it. In a cold start the first cycles' markers are
 * applied over ~30 s, the slowest marketplace's last (its upstream pages 100 items), so the look
 * runs once, after it. Only the listings hold it, because the alternatives cost more:
 * - in the markers' transaction, each clump's look over its currency's catalogue as it stands so
 *   far would hold that clump's status for seconds;
 * - deferred by the whole backlog like the recomputation, the look would start just as the last
 *   marketplace's marker becomes ready, which then waits for it;
 * - deferred by the whole backlog and pending markers, it would wait for the other kinds' first
 *   cycles after the catalogue (hundreds of thousands of records) until its cap, and its run over
 *   the whole catalogue (~10 s) would fall into the minutes after the cold start, where price
 *   changes must show.
 */
const JUDGE_MAX_DEFER_MS = 60_000;

/**
 * Whether the second look may run (pure): after its oldest queued row has waited `waitedMs`,
 * with `listingsBacklog` records left to read on listings.v1 and `listingsPending` telling
 * whether a LISTINGS marker is stored but not applied.
 */
export function judgeGate(waitedMs: number, listingsBacklog: number, listingsPending: boolean): boolean {
  return waitedMs >= JUDGE_MAX_DEFER_MS || (listingsBacklog <= BACKLOG_DEFERS && !listingsPending);
}

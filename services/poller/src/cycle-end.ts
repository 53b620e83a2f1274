/**
 * How a cycle ends: its outcome, and the end offsets its marker carries. Pure, so the rules are
 * tested without a broker (cycle-end.test.ts); poller.ts performs the sends and the fetches.
 *
 * A marker's end offsets tell the consumer how far to read the data topic before it applies the
 * cycle's end — for a COMPLETE FULL cycle, nulling or deleting what the cycle did not see. An
 * empty list reads as "nothing to wait for". During a broker outage the fetch of the end offsets
 * can fail; a COMPLETE marker with empty end offsets, applied before the cycle's records arrived,
 * would remove rows that are still in flight. So a cycle whose end offsets could not be fetched,
 * or do not cover a partition the cycle wrote to, is not COMPLETE.
 */

export type CycleOutcome = 'COMPLETE' | 'PARTIAL' | 'FAILED';

/** One partition's offsets as kafkajs' fetchTopicOffsets reports them (strings). */
export interface FetchedOffsets {
  partition: number;
  high: string;
}

/** Per partition the cycle wrote to: an offset it wrote there (the partition's end must be past it). */
export type Produced = ReadonlyMap<number, bigint>;

export type EndOffsets =
  | { ok: true; offsets: { partition: number; offset: number }[] }
  | { ok: false; reason: string; offsets: { partition: number; offset: number }[] };

/**
 * The marker's end offsets from the data topic's high watermarks, fetched after the cycle's last
 * send (acks=all: the watermark already covers every record sent): per non-empty partition, the
 * offset of its last record. Every partition of the topic is named, not only those the cycle
 * wrote to, so the consumer also waits for earlier cycles' records still in flight. Not ok when
 * Kafka named no partition at all (a topic always has one), or did not report a partition the
 * cycle wrote to past what the cycle wrote there (a stale answer).
 */
export function endOffsetsFrom(fetched: readonly FetchedOffsets[], produced: Produced): EndOffsets {
  const offsets = fetched
    .filter((o) => BigInt(o.high) > 0n)
    .map((o) => ({ partition: o.partition, offset: Number(BigInt(o.high) - 1n) }))
    .sort((a, b) => a.partition - b.partition);
  if (fetched.length === 0) return { ok: false, reason: 'Kafka reported no partitions', offsets };
  const high = new Map(fetched.map((o) => [o.partition, BigInt(o.high)]));
  for (const [partition, wrote] of [...produced].sort(([a], [b]) => a - b)) {
    const end = high.get(partition);
    if (end === undefined) return { ok: false, reason: `no end offset for partition ${partition}`, offsets };
    if (end <= wrote)
      return {
        ok: false,
        reason: `partition ${partition} ends at ${end}, before the record the cycle wrote at ${wrote}`,
        offsets,
      };
  }
  return { ok: true, offsets };
}

/** What poller.ts knows about a cycle when it decides its outcome. */
export interface CycleFacts {
  /** Why fetching the upstream or sending to Kafka failed; null when neither did. */
  error: string | null;
  /** Distinct items the upstream answered. */
  seen: number;
  /** Rows refused (upstream or by the producer). */
  rejected: number;
  /**
   * A delta kind whose upstream answered no item at all while the poller remembers items it
   * said: an empty answer looks exactly like a failing upstream, so no removal is sent for it.
   */
  emptied: boolean;
  /** Why the marker cannot carry the data topic's end offsets; null when it can (or not asked yet). */
  endOffsets: string | null;
}

/**
 * COMPLETE only for a cycle that saw the whole upstream, refused nothing, and can tell the
 * consumer how far to read; PARTIAL when something was seen; FAILED when nothing was.
 */
export function cycleOutcome(f: CycleFacts): { outcome: CycleOutcome; error: string | null } {
  if (f.error !== null) return { outcome: f.seen > 0 ? 'PARTIAL' : 'FAILED', error: f.error };
  if (f.rejected > 0) return { outcome: 'PARTIAL', error: `${f.rejected} upstream rows refused` };
  if (f.emptied)
    return {
      outcome: 'PARTIAL',
      error: 'the upstream answered no items while earlier cycles saw some; removals withheld',
    };
  if (f.endOffsets !== null)
    return {
      outcome: 'PARTIAL',
      error: `end offsets of the data topic unknown (${f.endOffsets}); removals not vouched for`,
    };
  return { outcome: 'COMPLETE', error: null };
}

/** Removals (explicit price-null events of delta kinds) only from a clean cycle that saw something. */
export function removalsAllowed(f: Pick<CycleFacts, 'error' | 'rejected' | 'emptied'>): boolean {
  return f.error === null && f.rejected === 0 && !f.emptied;
}

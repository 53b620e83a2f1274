/**
 * Per-turn batching of rate-limit hits for the shared limiters (Redis, the cluster primary): under
 * load many requests of one key arrive in the same event-loop turn, and a round trip per request
 * would cost more than the request. Each hit joins its key's batch for the turn (a map lookup and a
 * counter), the turn's batches go to the counter at once, and each hit's verdict is read off its
 * batch's `Admitted` by its place in the batch.
 *
 * Why flush in `setImmediate`, not a microtask: Node drains the microtask queue after every I/O
 * callback, so a microtask flush would batch only what one socket's read delivered (a single
 * connection's requests), while `setImmediate` runs once the poll phase has handled every socket
 * that was ready, catching the whole turn. It delays sending the first hit of a turn only by the
 * rest of that turn's callbacks, which run before any answer could be read anyway: an answer
 * (from Redis or the primary) arrives as I/O, handled in the next poll phase at the earliest. The
 * turn's requests then pay one round trip, not one queued behind each other's.
 */
import type { Admitted, LimitedKey, Verdict } from './limits-windows.js';
import { verdictOf } from './limits-windows.js';

/** One key's hits in one turn (and one second), to be counted as one `hitMany(key, n, now)`. */
export interface Batch {
  readonly key: LimitedKey;
  /** The first hit's time; every hit of the batch is in the same second (see `HitCoalescer.hit`). */
  readonly now: number;
  /** How many hits; final once the batch is handed to the counter. */
  n: number;
  /** Gives each hit its verdict from the counted batch. */
  settle(admitted: Admitted): void;
  /** Fails each hit of the batch with `err` (the counter is unreachable). */
  fail(err: unknown): void;
}

interface OpenBatch extends Batch {
  readonly second: number;
  readonly admitted: Promise<Admitted>;
}

function openBatch(key: LimitedKey, now: number): OpenBatch {
  let settle!: (a: Admitted) => void;
  let fail!: (err: unknown) => void;
  const admitted = new Promise<Admitted>((resolve, reject) => {
    settle = resolve;
    fail = reject;
  });
  return { key, now, second: Math.floor(now / 1_000), n: 0, admitted, settle, fail };
}

/** Whether a hit of `key` at `second` counts exactly as one more hit of `b`. */
const joins = (b: OpenBatch, key: LimitedKey, second: number) =>
  b.second === second &&
  (b.key === key ||
    (b.key.perSecond === key.perSecond && b.key.perMinute === key.perMinute && b.key.perDay === key.perDay));

export class HitCoalescer {
  /** Each key's batch still taking hits this turn. */
  private readonly open = new Map<string, OpenBatch>();
  /** This turn's batches in the order they were opened (a key may have several, see `hit`). */
  private queued: OpenBatch[] = [];
  private scheduled = false;

  /**
   * @param count Counts the turn's batches, in order (so the counter sees one key's batches as
   *   they arrived), and settles or fails each. It must count them atomically per batch.
   */
  constructor(private readonly count: (batches: readonly Batch[]) => void) {}

  /**
   * Joins the key's batch for this turn. All windows are whole seconds, so hits in the same second
   * fall in the same windows and get the same Retry-After: a batch keeps to one second and one set
   * of limits (a key reloaded with new limits mid-turn), and a hit outside them opens the key's
   * next batch, counted after this one.
   */
  hit(key: LimitedKey, now: number): Promise<Verdict> {
    const second = Math.floor(now / 1_000);
    let b = this.open.get(key.prefix);
    if (!b || !joins(b, key, second)) {
      b = openBatch(key, now);
      this.open.set(key.prefix, b);
      this.queued.push(b);
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(this.flush);
      }
    }
    const i = b.n++;
    return b.admitted.then((admitted) => verdictOf(admitted, i, now));
  }

  private readonly flush = (): void => {
    const batches = this.queued;
    this.queued = [];
    this.open.clear();
    this.scheduled = false;
    try {
      this.count(batches);
    } catch (err) {
      for (const b of batches) b.fail(err);
    }
  };
}

/*
 * At most `size` whole-list reads at once (a first build or a rebuild of a list body, a catalogue
 * shard): each reads every row of a marketplace (up to 35k) through one of the API's read
 * connections and turns them into JSON and gzip on its one thread. Unbounded, a cold start asks
 * for thirteen lists within seconds and builds them all at once: on a saturated 2-core machine
 * each takes tens of seconds, together they hold every read connection for the pool's whole
 * wait, so GET /v1/status and the lists' own patches get "every connection busy", and thirteen
 * heaps of rows are alive at the same time (the catalogue's shards are built one at a time for
 * that reason). In turn, the first list is there after one build's time instead of all of
 * theirs, and patches never wait here.
 *
 * First come, first served: a slot freed goes straight to the longest waiter.
 */
export class Slots {
  private busy = 0;
  private readonly queue: (() => void)[] = [];

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`slots: ${size} is not a positive integer`);
  }

  /** Reads waiting for a slot. */
  get waiting(): number {
    return this.queue.length;
  }

  /** Reads holding a slot. */
  get running(): number {
    return this.busy;
  }

  /** Runs `read` once a slot is free; the slot is given on when it settles, whichever way. */
  async run<T>(read: () => Promise<T>): Promise<T> {
    if (this.busy < this.size) this.busy++;
    else await new Promise<void>((resolve) => this.queue.push(resolve));
    return this.holding(read);
  }

  private async holding<T>(read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } finally {
      const next = this.queue.shift();
      if (next) next();
      else this.busy--;
    }
  }
}

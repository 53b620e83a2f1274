/**
 * Wakes change streams when the materializer's outbox commits new changes (its NOTIFY on
 * `skinprices_changes`, followed by PgNotifications), and ends them all when the server closes.
 * Without notifications (a lost connection, tests) streams still poll: every wait has a deadline.
 */
export class ChangeWaker {
  private readonly waiters = new Set<() => void>();
  private readonly streams = new Set<AbortController>();
  private closed = false;

  /** New changes were committed: every waiting stream reads. */
  notify(): void {
    const woken = [...this.waiters];
    this.waiters.clear();
    for (const w of woken) w();
  }

  /** Resolves at the next notify(), after `ms`, or when `signal` aborts, whichever comes first. */
  wait(ms: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      this.waiters.add(done);
    });
  }

  /**
   * A stream's lifetime: aborted by closeAll() (server shutdown); forget() when it ends itself.
   * After closeAll() a stream begins aborted: one that arrives while the server drains ends at
   * once (the client reconnects elsewhere with its Last-Event-ID) instead of holding the stop.
   */
  open(): AbortController {
    const ctl = new AbortController();
    if (this.closed) ctl.abort();
    else this.streams.add(ctl);
    return ctl;
  }

  forget(ctl: AbortController): void {
    this.streams.delete(ctl);
  }

  get openStreams(): number {
    return this.streams.size;
  }

  closeAll(): void {
    this.closed = true;
    for (const s of this.streams) s.abort();
    this.streams.clear();
    this.notify();
  }
}

/**
 * Concurrent streams per key: a stream holds a connection and a slot of the database pool's
 * attention for as long as it runs, so a plan buys a number of them. In this process
 * (StreamSlots), or over a machine's cluster workers (changes/slots-shared.ts).
 */
export interface StreamSlotCounter {
  /** Takes a slot for `keyId` unless it holds `limit` already (its plan's); false then. */
  take(keyId: string, limit: number): Promise<boolean>;
  /** Gives back a slot `take` gave. */
  give(keyId: string): void;
}

/** Concurrent streams per key in this process. */
export class StreamSlots implements StreamSlotCounter {
  private readonly held = new Map<string, number>();

  async take(keyId: string, limit: number): Promise<boolean> {
    return this.takeNow(keyId, limit);
  }

  /** take(), synchronously. */
  takeNow(keyId: string, limit: number): boolean {
    const n = this.held.get(keyId) ?? 0;
    if (n >= limit) return false;
    this.held.set(keyId, n + 1);
    return true;
  }

  give(keyId: string): void {
    const n = (this.held.get(keyId) ?? 1) - 1;
    if (n <= 0) this.held.delete(keyId);
    else this.held.set(keyId, n);
  }
}

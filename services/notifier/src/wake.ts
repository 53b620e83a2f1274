/** A loop's pause that a wake() ends at once; a wake() while the loop works is not lost. */
export class Wakeable {
  private woken = false;
  private end: (() => void) | undefined;

  wake(): void {
    this.woken = true;
    this.end?.();
  }

  /** Resolves after `ms`, on wake() (or one that came since the last wait), or on `signal`'s abort. */
  async wait(ms: number, signal: AbortSignal): Promise<void> {
    if (!this.woken && !signal.aborted)
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          signal.removeEventListener('abort', done);
          this.end = undefined;
          resolve();
        };
        const timer = setTimeout(done, ms);
        signal.addEventListener('abort', done, { once: true });
        this.end = done;
      });
    this.woken = false;
  }
}

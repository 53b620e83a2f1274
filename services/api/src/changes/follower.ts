/**
 * Follows the read model's change position (materializer migration 0019) and tells the caches
 * which tags moved: every `pollMs`, and at once when woken (the materializer's NOTIFY is only a
 * hint that the position moved). Polling is what makes it work where LISTEN is refused (a hot
 * standby) or a notification is lost; the position is durable, so nothing is missed meanwhile.
 *
 *   reading ──▶ waiting ──(pollMs elapsed, or wake())──▶ reading        stop() ──▶ stopped
 *      └──(read failed)──▶ backing off ──▶ reading
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Backoff, type Logger } from '@skinprices/runtime';

export type FollowerState = 'reading' | 'waiting' | 'backing off' | 'stopped';

/** One read of the journal: the position read up to, and the tags of what moved after `since`. */
export type ReadChanges = (since?: string) => Promise<{ position: string; tags?: readonly string[] }>;

export class ChangeFollower {
  state: FollowerState = 'waiting';
  /** The position read up to; undefined before the first read. */
  position: string | undefined;
  private readonly stopCtl = new AbortController();
  private loop: Promise<void> | undefined;
  private woken = false;
  private wakeUp: (() => void) | undefined;

  constructor(
    private readonly read: ReadChanges,
    /** Told of the tags that moved; undefined: anything may have changed (ReadModelVersion.bump). */
    private readonly bump: (tags?: readonly string[]) => void,
    private readonly pollMs: number,
    private readonly logger: Pick<Logger, 'warn' | 'info'>,
  ) {}

  start(): void {
    this.loop = this.run();
  }

  /** The position may have moved: read now (or right after the read under way). */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  private async run(): Promise<void> {
    const backoff = new Backoff({ baseMs: this.pollMs, maxMs: 10_000 });
    while (!this.stopCtl.signal.aborted) {
      this.state = 'reading';
      this.woken = false;
      let waitMs = this.pollMs;
      try {
        const { position, tags } = await this.read(this.position);
        // Undefined tags: the first read (caches built before it read at a position of their own,
        // which this one does not know), or a journal that no longer reaches back (pruned, or a
        // replay's new one): everything is looked at again.
        if (tags === undefined) this.bump();
        else if (tags.length > 0) this.bump(tags);
        this.position = position;
        if (backoff.attempts > 0) this.logger.info({ failures: backoff.attempts }, 'following the read model again');
        backoff.reset();
      } catch (err) {
        if (backoff.attempts === 0) this.logger.warn({ err }, 'reading the change position failed; retrying');
        waitMs = backoff.next();
        this.state = 'backing off';
      }
      if (this.stopCtl.signal.aborted) break;
      if (this.state === 'reading') this.state = 'waiting';
      if (this.woken && this.state === 'waiting') continue;
      await this.pause(waitMs);
    }
    this.state = 'stopped';
  }

  /** Waits `ms`, or until woken (not while backing off) or stopped. */
  private async pause(ms: number): Promise<void> {
    const woken = new Promise<void>((resolve) => {
      this.wakeUp = this.state === 'waiting' ? resolve : undefined;
    });
    await Promise.race([sleep(ms, undefined, { signal: this.stopCtl.signal }).catch(() => undefined), woken]);
    this.wakeUp = undefined;
  }

  async stop(): Promise<void> {
    this.stopCtl.abort();
    await this.loop;
    this.state = 'stopped';
  }
}

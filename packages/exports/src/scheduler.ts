/*
 * The materializer's export loop: builds the daily export once the data covers a new UTC day, and
 * the rolling last-24-hours export the API serves whenever the stored one has aged past the cache's
 * maxAgeMs. The API never builds one: the materializer owns the exports end to end.
 *
 *   idle ──(every intervalMs)──▶ checking ──(done: built the new day's export, or nothing new)──▶ idle
 *                                   └──(PostgreSQL away)──▶ idle (next tick retries)
 *   (building the export is part of `checking`: SalesExportCache.refresh does both)
 *   any ──stop()──▶ stopped
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { SalesExportCache } from './cache.js';

export type SchedulerState = 'idle' | 'checking' | 'stopped';

export class DailyExportScheduler {
  state: SchedulerState = 'idle';
  private readonly stopCtl = new AbortController();
  private loop: Promise<void> | undefined;

  constructor(
    private readonly cache: SalesExportCache,
    private readonly options: { intervalMs: number; onError: (err: unknown) => void },
  ) {}

  start(): void {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopCtl.abort();
    await this.loop;
    this.state = 'stopped';
  }

  private async run(): Promise<void> {
    while (!this.stopCtl.signal.aborted) {
      this.state = 'checking';
      await this.cache.refresh().catch(this.options.onError);
      this.state = 'idle';
      await sleep(this.options.intervalMs, undefined, { signal: this.stopCtl.signal }).catch(() => undefined);
    }
  }
}

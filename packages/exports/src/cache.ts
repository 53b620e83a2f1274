/**
 * Built exports are kept in `sales_exports` (the read model's schema), so every API process serves
 * the same bytes and a restart rebuilds nothing. An export's window ends where the data is complete:
 * the earliest "complete up to" among the sales marketplaces (the start of each one's last complete
 * sales cycle, whose window ended there), in whole seconds as the upstreams count them. A window
 * never reaches into time a sales poller has not finished reading.
 */
import { DAY_MS } from '@skinprices/domain';
import type { Pool } from '@skinprices/store';
import { buildSalesExport, type BuiltExport } from './sales-export.js';

export interface StoredExport extends BuiltExport {
  builtAt: Date;
}

export interface ExportCacheOptions {
  /** An export whose window ended at most this long before the data's end is served as is. @default 3_600_000 */
  maxAgeMs?: number;
  /** Exports kept (newest first). @default 14 */
  keep?: number;
}

export class SalesExportCache {
  private inflight: Promise<StoredExport | null> | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly options: ExportCacheOptions = {},
  ) {}

  /** Where complete sales data ends (null before any complete sales cycle). */
  async dataEnd(): Promise<Date | null> {
    const { rows } = await this.pool.query<{ end: Date | null }>(
      `SELECT date_trunc('second', min(last_complete_started_at)) AS end
       FROM market_freshness WHERE kind = 'SALES'`,
    );
    return rows[0]?.end ?? null;
  }

  /** The freshest export, building one for [end − 24 h, end) when the cached one is too old. */
  async current(): Promise<StoredExport | null> {
    this.inflight ??= this.currentOnce().finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  private async currentOnce(): Promise<StoredExport | null> {
    const end = await this.dataEnd();
    if (!end) return null;
    const latest = await this.latest();
    if (latest && latest.windowEnd.getTime() >= end.getTime() - (this.options.maxAgeMs ?? 3_600_000)) return latest;
    return this.store(await buildSalesExport(this.pool, end));
  }

  /** The daily export: the last whole UTC day the data covers. Built once; returns it. */
  async ensureDaily(): Promise<StoredExport | null> {
    const end = await this.dataEnd();
    if (!end) return null;
    const day = new Date(Math.floor(end.getTime() / DAY_MS) * DAY_MS);
    const have = await this.byEnd(day);
    return have ?? this.store(await buildSalesExport(this.pool, day));
  }

  /**
   * What the materializer's scheduler runs: the daily export once the data covers a new day, and
   * the rolling one (the API's answer) when the stored one is older than `maxAgeMs`.
   */
  async refresh(): Promise<void> {
    await this.ensureDaily();
    await this.current();
  }

  async latest(): Promise<StoredExport | null> {
    return this.one('ORDER BY window_end DESC LIMIT 1', []);
  }

  async byEnd(end: Date): Promise<StoredExport | null> {
    return this.one('WHERE window_end = $1', [end]);
  }

  private async one(tail: string, params: unknown[]): Promise<StoredExport | null> {
    const { rows } = await this.pool.query<{
      window_start: Date;
      window_end: Date;
      sales: number;
      bytes: Buffer;
      built_at: Date;
    }>(`SELECT window_start, window_end, sales, bytes, built_at FROM sales_exports ${tail}`, params);
    const r = rows[0];
    return r
      ? { windowStart: r.window_start, windowEnd: r.window_end, sales: r.sales, bytes: r.bytes, builtAt: r.built_at }
      : null;
  }

  private async store(e: BuiltExport): Promise<StoredExport> {
    await this.pool.query(
      `INSERT INTO sales_exports (window_end, window_start, sales, bytes) VALUES ($1, $2, $3, $4)
       ON CONFLICT (window_end) DO UPDATE SET window_start = excluded.window_start, sales = excluded.sales,
         bytes = excluded.bytes, built_at = now()`,
      [e.windowEnd, e.windowStart, e.sales, e.bytes],
    );
    await this.pool.query(
      `DELETE FROM sales_exports WHERE window_end NOT IN (SELECT window_end FROM sales_exports ORDER BY window_end DESC LIMIT $1)`,
      [this.options.keep ?? 14],
    );
    return (await this.byEnd(e.windowEnd)) as StoredExport;
  }
}

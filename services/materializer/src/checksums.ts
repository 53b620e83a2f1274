/**
 * Checksums of the read model: one md5 per table over its rows in key order, leaving out what is
 * not a function of the topics (wall-clock stamps, the group's name, the transient outbox, the
 * export cache, the processes' heartbeats). Two materializations of the same topics must agree
 * table by table; `make replay` prints them and the replay test compares them.
 */
import type { Pool } from '@skinprices/store';

/** Table → the columns that are a function of the topics, and the key order. */
const TABLES: Readonly<Record<string, { columns: string; order: string }>> = {
  consumer_offsets: { columns: 'topic, partition, next_offset', order: 'topic, partition' },
  // changed_at (when the price or count last changed) depends on whether a cycle marker removed
  // a row before the next cycle's observation of it arrived: the moment markers ran.
  listings_current: {
    columns: `market, market_hash_name, phase, currency, price, count, exterior, stattrak, souvenir, template_id,
      item_page_url, observed_at, cycle_id, stats_day, base_1d, base_7d, base_30d, base_90d, avg_7d, avg_30d, avg_90d,
      change_24h, change_7d, change_30d, change_90d, median_7d, is_outlier, confidence`,
    order: 'market, market_hash_name, phase',
  },
  listing_hourly: { columns: '*', order: 'market, market_hash_name, phase, hour' },
  listing_daily: { columns: '*', order: 'market, market_hash_name, phase, day' },
  poll_cycles: {
    columns:
      'cycle_id, market, kind, mode, outcome, started_at, finished_at, items_seen, events_emitted, error, data_topic, end_offsets, removals_sent, applied_at IS NOT NULL',
    order: 'cycle_id',
  },
  market_freshness: {
    // last_applied_at and last_complete_applied_at are wall-clock stamps of when the marker was applied.
    columns:
      'market, kind, last_cycle_id, last_outcome, last_finished_at, last_complete_at, consecutive_failed, last_complete_started_at',
    order: 'market, kind',
  },
  // A replay dead-letters the same records, for the same reason (poison.ts); received_at is wall clock.
  dead_letters: {
    columns: 'topic, partition, "offset", key, error, reason, sqlstate',
    order: 'topic, partition, "offset"',
  },
  item_markets: { columns: '*', order: 'market_hash_name, phase, market' },
  buyorders_current: { columns: '*', order: 'market, market_hash_name, phase, tier' },
  float_ranged_current: { columns: '*', order: 'market, market_hash_name, phase, float_min' },
  float_buyorders_current: { columns: '*', order: 'market, order_id' },
  order_book_current: { columns: '*', order: 'market, market_hash_name, phase' },
  sales: { columns: '*', order: 'market, sale_id' },
  // as_of is when the values last changed: the moments the deriver ran, which batching decides.
  item_liquidity: {
    columns: 'market_hash_name, phase, listings, sales_7d, best_bid, lowest_ask, score',
    order: 'market_hash_name, phase',
  },
  item_liquidity_score: { columns: 'market_hash_name, phase, score', order: 'market_hash_name, phase' },
  market_cap_hourly: { columns: '*', order: 'hour' },
  market_cap_daily: { columns: '*', order: 'day' },
  read_model_clock: { columns: '*', order: 'id' },
};

export interface TableChecksum {
  rows: number;
  md5: string;
}

export async function tableChecksums(pool: Pool): Promise<Record<string, TableChecksum>> {
  const out: Record<string, TableChecksum> = {};
  for (const [table, spec] of Object.entries(TABLES)) {
    const columns = spec.columns === '*' ? 'p.*' : spec.columns;
    const { rows } = await pool.query<{ rows: number; md5: string }>(
      `SELECT count(*)::int AS rows, md5(coalesce(string_agg(r::text, E'\\n' ORDER BY n), '')) AS md5
       FROM (SELECT row(${columns}) AS r, row_number() OVER (ORDER BY ${spec.order}) AS n FROM ${table} p) t`,
    );
    out[table] = rows[0] as TableChecksum;
  }
  return out;
}

/**
 * listings.v1 → listings_current (with derived values), listing_hourly, listing_daily,
 * item_markets and the change outbox.
 */
import { DAY_MS, startOfUtcDay } from '@skinprices/domain';
import type { DecodedMessage, ListingEvent } from '@skinprices/events';
import type { PoolClient } from '@skinprices/store';
import { setExcluded, stage } from './stage.js';
import { refreshStats } from './derived.js';
import { ensureHourPartitions } from './partitions.js';

const COLUMNS = [
  'market',
  'market_hash_name',
  'phase',
  'currency',
  'price',
  'count',
  'exterior',
  'stattrak',
  'souvenir',
  'template_id',
  'item_page_url',
  'observed_at',
  'cycle_id',
] as const;

export interface ListingOptions {
  /** Write outbox rows for committed changes (off while replaying: see replay.ts). */
  outbox: boolean;
  /** Hourly snapshots older than this many days (before the read model's clock) are not kept. */
  hourlyRetentionDays: number;
}

export async function applyListings(
  client: PoolClient,
  messages: readonly DecodedMessage<'listing'>[],
  options: ListingOptions,
): Promise<void> {
  if (messages.length === 0) return;
  const events = messages.map((m) => m.value as ListingEvent);
  await stage(
    client,
    'listings_current',
    COLUMNS,
    messages.map((m, i) => {
      const e = events[i] as ListingEvent;
      return [
        e.market,
        e.market_hash_name,
        e.phase,
        e.currency,
        e.price,
        e.count,
        e.exterior,
        e.stattrak,
        e.souvenir,
        e.template_id,
        e.item_page_url,
        new Date(e.observed_at),
        e.cycle_id,
        m.offset,
      ];
    }),
  );

  // One statement: the latest staged state per item, the state before it (all parts of a
  // statement see the same snapshot, so `old` is pre-update), the guarded upsert, and the
  // outbox rows for what really changed. Changes are computed against the row's stored
  // baselines; refreshStats below replaces them where those baselines belong to an older day.
  const upsert = `
    INSERT INTO listings_current (${COLUMNS.join(', ')})
    SELECT ${COLUMNS.join(', ')} FROM s
    ON CONFLICT (market, market_hash_name, phase) DO UPDATE SET ${setExcluded(COLUMNS.slice(3))},
      change_24h = pct_change(excluded.price, listings_current.base_1d),
      change_7d = pct_change(excluded.price, listings_current.base_7d),
      change_30d = pct_change(excluded.price, listings_current.base_30d),
      change_90d = pct_change(excluded.price, listings_current.base_90d)
    WHERE excluded.observed_at > listings_current.observed_at
    RETURNING market, market_hash_name, phase, currency, price, count, observed_at`;
  const latest = `
    s AS (
      SELECT DISTINCT ON (market, market_hash_name, phase) *
      FROM stage_listings_current
      ORDER BY market, market_hash_name, phase, observed_at DESC, kafka_offset DESC
    )`;
  if (options.outbox) {
    await client.query(`
      WITH ${latest},
      old AS (
        SELECT c.market, c.market_hash_name, c.phase, c.price, c.count
        FROM listings_current c JOIN s USING (market, market_hash_name, phase)
      ),
      up AS (${upsert})
      INSERT INTO price_change_outbox (market, market_hash_name, phase, currency, old_price, new_price,
                                       old_count, new_count, observed_at)
      SELECT up.market, up.market_hash_name, up.phase, up.currency, old.price, up.price, old.count, up.count, up.observed_at
      FROM up LEFT JOIN old USING (market, market_hash_name, phase)
      WHERE old.market IS NULL
         OR old.price IS DISTINCT FROM up.price
         OR old.count IS DISTINCT FROM up.count`);
  } else {
    await client.query(`WITH ${latest} ${upsert}`);
  }

  // Statistics read closes of days before the row's stats day: recompute them when the row moved
  // into a new day, is new, or a close of an earlier day changed in this batch (a late event).
  await writeHistory(client, events, options.hourlyRetentionDays);
  await refreshStats(
    client,
    `SELECT c.market, c.market_hash_name, c.phase,
            greatest(c.stats_day, (c.observed_at AT TIME ZONE 'UTC')::date) AS d
     FROM listings_current c
     JOIN (SELECT market, market_hash_name, phase, min((observed_at AT TIME ZONE 'UTC')::date) AS first_day
           FROM stage_listings_current GROUP BY 1, 2, 3) s USING (market, market_hash_name, phase)
     WHERE c.stats_day IS NULL
        OR c.stats_day < (c.observed_at AT TIME ZONE 'UTC')::date
        OR s.first_day < c.stats_day`,
  );

  // Where each item is listed: the catalogue is what at least two marketplaces list.
  await client.query(`
    INSERT INTO item_markets (market_hash_name, phase, market, first_seen_at)
    SELECT market_hash_name, phase, market, min(observed_at)
    FROM stage_listings_current WHERE price IS NOT NULL
    GROUP BY 1, 2, 3
    ON CONFLICT (market_hash_name, phase, market) DO UPDATE SET first_seen_at = excluded.first_seen_at
    WHERE excluded.first_seen_at < item_markets.first_seen_at`);
}

/** History: the last observation per hour, and per day the last one with a price. */
async function writeHistory(client: PoolClient, events: readonly ListingEvent[], retentionDays: number): Promise<void> {
  const { rows } = await client.query<{ now: Date | null }>('SELECT max(now) AS now FROM read_model_clock');
  const clock = rows[0]?.now?.getTime();
  // Hours older than the retention are not written: their partition is (or is about to be) dropped.
  const oldest = clock === undefined ? 0 : startOfUtcDay(clock) - retentionDays * DAY_MS;
  await ensureHourPartitions(
    client,
    events.map((e) => e.observed_at).filter((t) => t >= oldest),
  );
  await client.query(
    `INSERT INTO listing_hourly (market, market_hash_name, phase, hour, price, count, observed_at)
     SELECT DISTINCT ON (market, market_hash_name, phase, date_trunc('hour', observed_at))
            market, market_hash_name, phase, date_trunc('hour', observed_at), price, count, observed_at
     FROM stage_listings_current
     WHERE observed_at >= $1
     ORDER BY market, market_hash_name, phase, date_trunc('hour', observed_at), observed_at DESC, kafka_offset DESC
     ON CONFLICT (market, market_hash_name, phase, hour) DO UPDATE SET
       price = excluded.price, count = excluded.count, observed_at = excluded.observed_at
     WHERE excluded.observed_at > listing_hourly.observed_at`,
    [new Date(oldest)],
  );
  await client.query(`
    INSERT INTO listing_daily (market, market_hash_name, phase, day, close, count, observed_at)
    SELECT DISTINCT ON (market, market_hash_name, phase, (observed_at AT TIME ZONE 'UTC')::date)
           market, market_hash_name, phase, (observed_at AT TIME ZONE 'UTC')::date, price, count, observed_at
    FROM stage_listings_current
    WHERE price IS NOT NULL
    ORDER BY market, market_hash_name, phase, (observed_at AT TIME ZONE 'UTC')::date, observed_at DESC, kafka_offset DESC
    ON CONFLICT (market, market_hash_name, phase, day) DO UPDATE SET
      close = excluded.close, count = excluded.count, observed_at = excluded.observed_at
    WHERE excluded.observed_at > listing_daily.observed_at`);
}

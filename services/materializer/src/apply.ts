/**
 * Applies one consumed batch (one partition of one topic) to PostgreSQL in one transaction:
 * the rows it produces and the partition's next offset commit together, or not at all.
 *
 * Exactly-once effect: the transaction first locks the partition's offset row and drops every
 * message below the stored offset, so a batch redelivered after a crash (Kafka's committed
 * offset lags ours), or a batch still finishing on a consumer whose partition was revoked while
 * the new owner already applied it, changes nothing. The observed_at guard on every upsert
 * makes even a replay of old events harmless.
 */
import { startOfUtcDay, DAY_MS } from '@skinprices/domain';
import type { ConsumedBatch, DecodedMessage, ListingEvent, PollCycleEvent } from '@skinprices/events';
import { copyRows, type CopyValue, type PoolClient } from '@skinprices/store';

export type MaterializedKind = 'listing' | 'pollCycle';

export interface ApplyResult {
  applied: number;
  skipped: number;
  deadLetters: number;
  markersApplied: string[];
}

const STAGE_COLUMNS = [
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
  'kafka_offset',
] as const;

export async function applyBatch(
  client: PoolClient,
  groupId: string,
  kind: MaterializedKind,
  batch: ConsumedBatch<MaterializedKind>,
): Promise<ApplyResult> {
  const result: ApplyResult = { applied: 0, skipped: 0, deadLetters: 0, markersApplied: [] };
  await client.query('BEGIN');
  try {
    await client.query(
      `INSERT INTO consumer_offsets (group_id, topic, partition, next_offset) VALUES ($1, $2, $3, 0)
       ON CONFLICT DO NOTHING`,
      [groupId, batch.topic, batch.partition],
    );
    const { rows } = await client.query<{ next_offset: string }>(
      'SELECT next_offset FROM consumer_offsets WHERE group_id = $1 AND topic = $2 AND partition = $3 FOR UPDATE',
      [groupId, batch.topic, batch.partition],
    );
    const next = BigInt(rows[0]?.next_offset ?? '0');
    const fresh = batch.messages.filter((m) => BigInt(m.offset) >= next);
    result.skipped = batch.messages.length - fresh.length;
    if (fresh.length > 0) {
      const good: DecodedMessage<MaterializedKind>[] = [];
      for (const m of fresh) {
        if (m.error) {
          await client.query(
            `INSERT INTO dead_letters (topic, partition, "offset", key, error) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT DO NOTHING`,
            [m.topic, m.partition, m.offset, m.key, m.error.message],
          );
          result.deadLetters++;
        } else if (m.value !== null) good.push(m);
      }
      if (kind === 'listing') await applyListings(client, good as DecodedMessage<'listing'>[]);
      else
        await storeMarkers(
          client,
          good.map((m) => m.value as PollCycleEvent),
        );
      result.applied = good.length;
      const last = fresh.at(-1) as DecodedMessage<MaterializedKind>;
      await client.query(
        `UPDATE consumer_offsets SET next_offset = $4, updated_at = now()
         WHERE group_id = $1 AND topic = $2 AND partition = $3`,
        [groupId, batch.topic, batch.partition, (BigInt(last.offset) + 1n).toString()],
      );
    }
    result.markersApplied = await applyReadyMarkers(client, groupId);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

async function applyListings(client: PoolClient, messages: DecodedMessage<'listing'>[]): Promise<void> {
  if (messages.length === 0) return;
  await client.query(`CREATE TEMP TABLE IF NOT EXISTS stage_listings (
      LIKE listings_current INCLUDING DEFAULTS, kafka_offset bigint NOT NULL
    ) ON COMMIT DELETE ROWS`);
  const rows: CopyValue[][] = messages.map((m) => {
    const e = m.value as ListingEvent;
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
  });
  await copyRows(client, 'stage_listings', STAGE_COLUMNS, rows);
  await ensureHourPartitions(
    client,
    messages.map((m) => (m.value as ListingEvent).observed_at),
  );

  // One statement: the latest staged state per item, the state before it (all parts of a
  // statement see the same snapshot, so `old` is pre-update), the guarded upsert, and the
  // outbox rows for what really changed.
  await client.query(`
    WITH s AS (
      SELECT DISTINCT ON (market, market_hash_name, phase) *
      FROM stage_listings
      ORDER BY market, market_hash_name, phase, observed_at DESC, kafka_offset DESC
    ),
    old AS (
      SELECT c.market, c.market_hash_name, c.phase, c.price, c.count
      FROM listings_current c JOIN s USING (market, market_hash_name, phase)
    ),
    up AS (
      INSERT INTO listings_current (market, market_hash_name, phase, currency, price, count, exterior, stattrak,
                                    souvenir, template_id, item_page_url, observed_at, cycle_id)
      SELECT market, market_hash_name, phase, currency, price, count, exterior, stattrak,
             souvenir, template_id, item_page_url, observed_at, cycle_id
      FROM s
      ON CONFLICT (market, market_hash_name, phase) DO UPDATE SET
        currency = excluded.currency, price = excluded.price, count = excluded.count,
        exterior = excluded.exterior, stattrak = excluded.stattrak, souvenir = excluded.souvenir,
        template_id = excluded.template_id, item_page_url = excluded.item_page_url,
        observed_at = excluded.observed_at, cycle_id = excluded.cycle_id
      WHERE excluded.observed_at > listings_current.observed_at
      RETURNING market, market_hash_name, phase, currency, price, count, observed_at
    )
    INSERT INTO price_change_outbox (market, market_hash_name, phase, currency, old_price, new_price,
                                     old_count, new_count, observed_at)
    SELECT up.market, up.market_hash_name, up.phase, up.currency, old.price, up.price, old.count, up.count, up.observed_at
    FROM up LEFT JOIN old USING (market, market_hash_name, phase)
    WHERE old.market IS NULL
       OR old.price IS DISTINCT FROM up.price
       OR old.count IS DISTINCT FROM up.count`);

  // History: the last observation per hour, and per day the last one with a price.
  await client.query(`
    INSERT INTO listing_hourly (market, market_hash_name, phase, hour, price, count, observed_at)
    SELECT DISTINCT ON (market, market_hash_name, phase, date_trunc('hour', observed_at))
           market, market_hash_name, phase, date_trunc('hour', observed_at), price, count, observed_at
    FROM stage_listings
    ORDER BY market, market_hash_name, phase, date_trunc('hour', observed_at), observed_at DESC, kafka_offset DESC
    ON CONFLICT (market, market_hash_name, phase, hour) DO UPDATE SET
      price = excluded.price, count = excluded.count, observed_at = excluded.observed_at
    WHERE excluded.observed_at > listing_hourly.observed_at`);
  await client.query(`
    INSERT INTO listing_daily (market, market_hash_name, phase, day, close, count, observed_at)
    SELECT DISTINCT ON (market, market_hash_name, phase, (observed_at AT TIME ZONE 'UTC')::date)
           market, market_hash_name, phase, (observed_at AT TIME ZONE 'UTC')::date, price, count, observed_at
    FROM stage_listings
    WHERE price IS NOT NULL
    ORDER BY market, market_hash_name, phase, (observed_at AT TIME ZONE 'UTC')::date, observed_at DESC, kafka_offset DESC
    ON CONFLICT (market, market_hash_name, phase, day) DO UPDATE SET
      close = excluded.close, count = excluded.count, observed_at = excluded.observed_at
    WHERE excluded.observed_at > listing_daily.observed_at`);
}

/** Creates the day partitions of listing_hourly the batch needs (idempotent DDL). */
async function ensureHourPartitions(client: PoolClient, times: readonly number[]): Promise<void> {
  const days = new Set(times.map((t) => startOfUtcDay(t)));
  for (const day of days) {
    const from = new Date(day).toISOString();
    const to = new Date(day + DAY_MS).toISOString();
    const name = `listing_hourly_${from.slice(0, 10).replaceAll('-', '')}`;
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${name} PARTITION OF listing_hourly FOR VALUES FROM ('${from}') TO ('${to}')`,
    );
  }
}

async function storeMarkers(client: PoolClient, markers: readonly PollCycleEvent[]): Promise<void> {
  for (const m of markers) {
    await client.query(
      `INSERT INTO poll_cycles (cycle_id, market, kind, mode, outcome, started_at, finished_at, items_seen,
                                events_emitted, error, data_topic, end_offsets)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
       ON CONFLICT (cycle_id) DO NOTHING`,
      [
        m.cycle_id,
        m.market,
        m.kind,
        m.mode,
        m.outcome,
        new Date(m.started_at),
        new Date(m.finished_at),
        m.items_seen,
        m.events_emitted,
        m.error,
        m.data_topic,
        JSON.stringify(m.end_offsets),
      ],
    );
  }
}

/**
 * Applies every stored marker whose data topic has been consumed past its end offsets. Topics are
 * not ordered with each other, so a marker can arrive before the cycle's last records: it waits.
 * Only a COMPLETE FULL listings cycle nulls what it did not see; a PARTIAL or FAILED one only
 * updates freshness, never a price.
 */
async function applyReadyMarkers(client: PoolClient, groupId: string): Promise<string[]> {
  const { rows } = await client.query<{ cycle_id: string }>(
    `SELECT p.cycle_id FROM poll_cycles p
     WHERE p.applied_at IS NULL
       AND NOT EXISTS (
         SELECT 1 FROM jsonb_to_recordset(p.end_offsets) AS e(partition int, "offset" bigint)
         LEFT JOIN consumer_offsets o
           ON o.group_id = $1 AND o.topic = p.data_topic AND o.partition = e.partition
         WHERE coalesce(o.next_offset, 0) <= e."offset")
     ORDER BY p.finished_at`,
    [groupId],
  );
  const applied: string[] = [];
  for (const { cycle_id } of rows) {
    // The row lock makes a marker apply once even if two transactions find it ready.
    const claim = await client.query<PollCycleRow>(
      `UPDATE poll_cycles SET applied_at = now() WHERE cycle_id = $1 AND applied_at IS NULL
       RETURNING cycle_id, market, kind, mode, outcome, started_at, finished_at`,
      [cycle_id],
    );
    const m = claim.rows[0];
    if (!m) continue;
    await client.query(
      `INSERT INTO market_freshness AS f (market, kind, last_cycle_id, last_outcome, last_finished_at, last_complete_at, consecutive_failed)
       VALUES ($1, $2, $3, $4, $5, CASE WHEN $4 = 'COMPLETE' THEN $5::timestamptz END, CASE WHEN $4 = 'FAILED' THEN 1 ELSE 0 END)
       ON CONFLICT (market, kind) DO UPDATE SET
         last_cycle_id = excluded.last_cycle_id, last_outcome = excluded.last_outcome,
         last_finished_at = excluded.last_finished_at,
         last_complete_at = coalesce(excluded.last_complete_at, f.last_complete_at),
         consecutive_failed = CASE WHEN excluded.last_outcome = 'FAILED' THEN f.consecutive_failed + 1 ELSE 0 END
       WHERE excluded.last_finished_at >= f.last_finished_at`,
      [m.market, m.kind, m.cycle_id, m.outcome, m.finished_at],
    );
    if (m.kind === 'LISTINGS' && m.mode === 'FULL' && m.outcome === 'COMPLETE') await nullVanished(client, m);
    applied.push(cycle_id);
  }
  return applied;
}

interface PollCycleRow {
  cycle_id: string;
  market: string;
  kind: string;
  mode: string;
  outcome: string;
  started_at: Date;
  finished_at: Date;
}

/**
 * A complete full cycle saw every listed item of its marketplace; what it did not see (last
 * observed before the cycle started) has no listing any more: price NULL, count 0 — never zero,
 * never stale forever. The change goes to the outbox like any other.
 */
async function nullVanished(client: PoolClient, m: PollCycleRow): Promise<void> {
  await client.query(
    `WITH gone AS (
       UPDATE listings_current c SET price = NULL, count = 0, observed_at = $3, cycle_id = $4
       FROM listings_current old
       WHERE c.market = $1 AND c.observed_at < $2 AND (c.price IS NOT NULL OR c.count > 0)
         AND old.market = c.market AND old.market_hash_name = c.market_hash_name AND old.phase = c.phase
       RETURNING c.market, c.market_hash_name, c.phase, c.currency, old.price AS old_price, old.count AS old_count
     )
     INSERT INTO price_change_outbox (market, market_hash_name, phase, currency, old_price, new_price, old_count, new_count, observed_at)
     SELECT market, market_hash_name, phase, currency, old_price, NULL, old_count, 0, $3 FROM gone`,
    [m.market, m.started_at, m.finished_at, m.cycle_id],
  );
}

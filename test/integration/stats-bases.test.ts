/**
 * change_24h/7d/30d/90d compare the price with the last close at or before the base day, not only
 * with a close on that very day: an item not listed every day (most of a real catalogue's rare
 * items) had null changes whenever its base day was a gap. Null stays only where the item has no
 * close that old at all. Both ways statistics are computed are held to it: the ingest merge (a row
 * entering a new day) and the recomputation of a late close (derived.ts refreshStats).
 */
import { getMarket } from '@skinprices/domain';
import type { ConsumedBatch, DecodedMessage, EventMap } from '@skinprices/events';
import { applyBatch, MIGRATIONS_DIR, type MaterializedKind } from '@skinprices/materializer';
import { migrate, type Pool } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from '../support/stack.js';

const MARKET = 'cn-c';
const DAY = '2026-06-30';
const DAY_MS = 86_400_000;
const dayOf = (back: number) => new Date(Date.parse(`${DAY}T00:00:00Z`) - back * DAY_MS).toISOString().slice(0, 10);

/** Daily closes (days back from DAY → close) per item. */
const CLOSES: Record<string, Record<number, string>> = {
  // Gaps on every base day: each base is an earlier close.
  'Gappy | Item (Field-Tested)': { 3: '110.00', 12: '105.00', 45: '100.00', 200: '50.00' },
  // Listed only lately: a 24 h change, nothing older.
  'Young | Item (Minimal Wear)': { 2: '10.00' },
  // A close on each base day: those, as before.
  'Daily | Item (Factory New)': { 1: '120.00', 7: '110.00', 30: '90.00', 90: '60.00', 91: '1.00' },
  // Never closed: no change.
  'New | Item (Well-Worn)': {},
};

const listing = (name: string, day: string, price: string): EventMap['listing'] => ({
  market: MARKET,
  market_hash_name: name,
  phase: '',
  currency: getMarket(MARKET).currency,
  price,
  count: 3,
  exterior: null,
  stattrak: false,
  souvenir: false,
  template_id: null,
  item_page_url: null,
  observed_at: Date.parse(`${day}T12:00:00Z`),
  cycle_id: `${MARKET}:LISTINGS:bases`,
});

describe('changes from the last known close', () => {
  const stack = new TestStack();
  let pool: Pool;
  let offset = 0;

  const apply = async (events: EventMap['listing'][]) => {
    const topic = 'listings.bases';
    const messages: DecodedMessage<MaterializedKind>[] = events.map((value) => ({
      topic,
      partition: 0,
      offset: String(offset++),
      key: null,
      value,
    }));
    const client = await pool.connect();
    try {
      await applyBatch(client, 'listing', { topic, partition: 0, messages } as ConsumedBatch<MaterializedKind>, {
        groupId: 'bases',
      });
    } finally {
      client.release();
    }
  };
  const changes = async (name: string) =>
    (
      await pool.query<Record<string, string | null>>(
        `SELECT change_24h::text AS "24h", change_7d::text AS "7d", change_30d::text AS "30d", change_90d::text AS "90d"
         FROM listings_current WHERE market = $1 AND market_hash_name = $2`,
        [MARKET, name],
      )
    ).rows[0];

  beforeAll(async () => {
    ({ pool } = await stack.schema());
    await migrate(pool, MIGRATIONS_DIR);
    for (const [name, closes] of Object.entries(CLOSES))
      for (const [back, close] of Object.entries(closes))
        await pool.query(
          `INSERT INTO listing_daily (market, market_hash_name, phase, day, close, count, observed_at)
           VALUES ($1, $2, '', $3::date, $4, 1, $3::date + interval '23 hours')`,
          [MARKET, name, dayOf(Number(back)), close],
        );
    await apply(Object.keys(CLOSES).map((name) => listing(name, DAY, '121.00')));
  });
  afterAll(() => stack.cleanup());

  it('compares a row entering a new day with the last close at or before each base day', async () => {
    // 121 against 110 (3 days back), 105 (12), 100 (45), 50 (200).
    expect(await changes('Gappy | Item (Field-Tested)')).toEqual({
      '24h': '10.00',
      '7d': '15.24',
      '30d': '21.00',
      '90d': '142.00',
    });
    expect(await changes('Young | Item (Minimal Wear)')).toEqual({
      '24h': '1110.00',
      '7d': null,
      '30d': null,
      '90d': null,
    });
    expect(await changes('Daily | Item (Factory New)')).toEqual({
      '24h': '0.83',
      '7d': '10.00',
      '30d': '34.44',
      '90d': '101.67',
    });
    expect(await changes('New | Item (Well-Worn)')).toEqual({ '24h': null, '7d': null, '30d': null, '90d': null });
  });

  it('recomputes with a late close that becomes the last one at or before a base day', async () => {
    // A close for 8 days back arrives late: the latest at or before 7 days back now.
    await apply([listing('Gappy | Item (Field-Tested)', dayOf(8), '104.00')]);
    expect(await changes('Gappy | Item (Field-Tested)')).toEqual({
      '24h': '10.00',
      '7d': '16.35',
      '30d': '21.00',
      '90d': '142.00',
    });
  });
});

/**
 * The materializer's listings rows in memory (served.ts) are loaded by a COPY of listings_current
 * when partitions are assigned. Names with multi-byte characters (★, ™) and COPY escapes must come
 * out as the keys records carry, whatever the stream's chunks: a garbled key reads as "no row" and
 * turns a repeat into a write, which a crash test caught as candles that differed between runs.
 */
import { itemKey, partitionOfKey, type ListingEvent } from '@skinprices/events';
import { MIGRATIONS_DIR, ServedListings } from '@skinprices/materializer';
import { migrate, type Pool } from '@skinprices/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from '../support/stack.js';

const PARTITIONS = 6;
const AT = Date.UTC(2026, 10, 20, 12);

describe('served listings: the load on assignment', () => {
  const stack = new TestStack();
  let pool: Pool;
  const events: ListingEvent[] = [];

  beforeAll(async () => {
    ({ pool } = await stack.schema());
    await migrate(pool, MIGRATIONS_DIR);
    // Enough rows that the COPY arrives in many chunks, most names with three-byte characters.
    for (let i = 0; i < 6_000; i++) {
      const name =
        i === 7 ? 'Sticker | tab\there back\\slash' : `StatTrak™ ★ Karambit | Doppler ${'★'.repeat(i % 5)} #${i}`;
      events.push({
        market: i % 2 ? 'cn-a' : 'eu-b',
        market_hash_name: name,
        phase: i % 3 ? '' : 'Ruby',
        currency: i % 2 ? 'CNY' : 'EUR',
        price: i % 11 ? `${(i % 900) + 1}.${String(i % 100).padStart(2, '0')}` : null,
        count: i % 11 ? (i % 40) + 1 : 0,
        exterior: i % 4 ? 'Factory New' : null,
        stattrak: i % 2 === 0,
        souvenir: false,
        template_id: i % 5 ? 40_000 + i : null,
        item_page_url: i % 6 ? `https://example.test/item/${i}` : null,
        observed_at: AT,
        cycle_id: 'load:LISTINGS:1',
      });
    }
    const client = await pool.connect();
    try {
      await client.query('ALTER TABLE listings_current DISABLE TRIGGER USER');
      await client.query(
        `INSERT INTO listings_current (market, market_hash_name, phase, currency, price, count, exterior, stattrak,
                                       souvenir, template_id, item_page_url, observed_at, cycle_id)
         SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(market text, market_hash_name text, phase text, currency text,
           price numeric, count int, exterior text, stattrak boolean, souvenir boolean, template_id bigint,
           item_page_url text, observed_at timestamptz, cycle_id text)`,
        [JSON.stringify(events.map((e) => ({ ...e, observed_at: new Date(e.observed_at).toISOString() })))],
      );
    } finally {
      client.release();
    }
  }, 60_000);
  afterAll(() => stack.cleanup());

  it('holds every row under the key its records carry: each repeat is recognised', async () => {
    const served = new ServedListings({ groupId: 'g', topic: 'listings.v1', maxRows: 1_000_000 });
    served.assign(() => pool.connect(), [0, 1, 2, 3, 4, 5], PARTITIONS);
    await served.ready();
    expect(served.rows()).toBe(events.length);
    const client = await pool.connect();
    try {
      for (let p = 0; p < PARTITIONS; p++) {
        const mine = events.filter(
          (e) => partitionOfKey(Buffer.from(itemKey(e.market, e.market_hash_name, e.phase)), PARTITIONS) === p,
        );
        const later = (e: ListingEvent, o: Partial<ListingEvent> = {}) => ({
          ...e,
          observed_at: AT + 60_000,
          removals_sent: true,
          ...o,
        });
        const view = await served.view(
          client,
          p,
          [...mine.map((e) => later(e)), later(mine[0] as ListingEvent, { count: 999 })],
          0n,
        );
        expect(
          view?.classes.slice(0, -1).every((c) => c === 'skip'),
          `partition ${p}`,
        ).toBe(true);
        expect(view?.classes.at(-1)).toBe('write');
      }
    } finally {
      client.release();
    }
  });
});

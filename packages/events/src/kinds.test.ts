/**
 * The domain's kinds descriptor agrees with the published contract: every data kind's event has a
 * topic (infra/kafka/topics.json) and a schema, and the poll-cycle schema's DataKind enum lists
 * exactly the descriptor's kinds (a kind added to one and not the other fails here, not in a
 * consumer).
 */
import {
  cycleRemovesUnseen,
  DATA_KIND_NAMES,
  DATA_KINDS,
  kindOfCapability,
  kindOfEvent,
  MARKETS,
  readTag,
  rowIdentity,
} from '@skinprices/domain';
import { describe, expect, it } from 'vitest';
import { eventSchema, topicFor } from './schemas.js';

describe('the data kinds descriptor', () => {
  it('every kind has a topic and a schema, and the poll-cycle enum lists exactly the kinds', () => {
    for (const k of DATA_KIND_NAMES) {
      const event = DATA_KINDS[k].event;
      expect(topicFor(event).event).toBe(event);
      expect(eventSchema(event).text.length).toBeGreaterThan(0);
      expect(kindOfEvent(event)).toBe(k);
    }
    const schema = JSON.parse(eventSchema('pollCycle').text) as {
      fields: { name: string; type: { symbols?: string[] } }[];
    };
    const symbols = schema.fields.find((f) => f.name === 'kind')?.type.symbols;
    expect(symbols).toEqual(DATA_KIND_NAMES);
  });

  it('every capability of every marketplace is offered by exactly one kind', () => {
    for (const m of MARKETS) for (const c of m.capabilities) expect(DATA_KINDS[kindOfCapability(c)].capability).toBe(c);
    const capabilities = DATA_KIND_NAMES.map((k) => DATA_KINDS[k].capability);
    expect(new Set(capabilities).size).toBe(capabilities.length);
  });

  it('row identity joins the identity fields, an absent one as empty', () => {
    const row = { market_hash_name: 'AK-47 | Redline (Field-Tested)', phase: '', price: '1.00' };
    expect(rowIdentity('LISTINGS', row)).toBe('AK-47 | Redline (Field-Tested)\u0000');
    expect(rowIdentity('BUYORDERS', row)).toBe(rowIdentity('BUYORDERS', { ...row, tier: null }));
    expect(rowIdentity('BUYORDERS', { ...row, tier: 'T1' })).not.toBe(rowIdentity('BUYORDERS', row));
    expect(rowIdentity('SALES', { ...row, sale_id: 's-1' })).toBe('s-1');
  });

  it('a complete cycle removes what it did not see for full cycles of delta kinds only', () => {
    expect(cycleRemovesUnseen('LISTINGS', 'FULL')).toBe(true);
    expect(cycleRemovesUnseen('LISTINGS', 'DELTA')).toBe(false);
    expect(cycleRemovesUnseen('FLOAT_RANGED', 'FULL')).toBe(true);
    expect(cycleRemovesUnseen('ORDER_BOOK', 'DELTA')).toBe(false);
    expect(cycleRemovesUnseen('SALES', 'FULL')).toBe(false);
    expect(cycleRemovesUnseen('HISTORY', 'FULL')).toBe(false);
  });

  it('read tags name the event and the marketplace', () => {
    expect(readTag('LISTINGS', 'cn-a')).toBe('listing:cn-a');
    expect(readTag('ORDER_BOOK', 'store')).toBe('orderBook:store');
  });
});

import { readdirSync } from 'node:fs';
import { parsePrice } from '@skinprices/domain';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SAMPLES } from '../../../test/support/samples.js';
import { eventKey, itemKey, keyHeaders, parseItemKey } from './keys.js';
import { EVENT_KINDS, eventSchema, topicDefinitions, topicFor } from './schemas.js';
import { validateEvent } from './validate.js';

describe('schemas and topics', () => {
  it('binds every event kind to exactly one project topic and every schema file to a kind', () => {
    const kinds = topicDefinitions().map((t) => t.event);
    expect([...kinds].sort()).toEqual([...EVENT_KINDS].sort());
    const files = readdirSync(new URL('../schemas/', import.meta.url)).filter((f) => f.endsWith('.avsc'));
    expect(files).toHaveLength(EVENT_KINDS.length);
  });

  it('keeps prices.current.v1 compacted and the source topics forever', () => {
    expect(topicFor('currentPrice')).toMatchObject({
      name: 'prices.current.v1',
      config: { 'cleanup.policy': 'compact' },
    });
    for (const kind of ['listing', 'buyorder', 'sale', 'pollCycle'] as const) {
      expect(topicFor(kind).config['retention.ms']).toBe('-1');
    }
  });

  it('gives every optional (nullable) field a default, so adding one later stays backward compatible', () => {
    for (const kind of EVENT_KINDS) {
      const schema = JSON.parse(eventSchema(kind).text) as {
        fields: { name: string; type: unknown; default?: unknown }[];
      };
      for (const f of schema.fields) {
        if (Array.isArray(f.type) && f.type[0] === 'null')
          expect(f, `${kind}.${f.name}`).toHaveProperty('default', null);
      }
    }
  });

  it('encodes times as timestamp-millis and never a price as a number type', () => {
    for (const kind of EVENT_KINDS) {
      const text = eventSchema(kind).text;
      expect(text).not.toMatch(/"(float|double)"/);
      if (/_at"/.test(text)) expect(text).toContain('timestamp-millis');
    }
  });
});

describe('validateEvent', () => {
  it.each(EVENT_KINDS)('accepts the %s sample', (kind) => {
    expect(() => validateEvent(kind, eventSchema(kind).type, SAMPLES[kind])).not.toThrow();
  });

  it('names every bad field at once', () => {
    const bad = { ...SAMPLES.listing, price: '-3.00', count: 'many', observed_at: undefined };
    try {
      validateEvent('listing', eventSchema('listing').type, bad);
      expect.unreachable();
    } catch (err) {
      const problems = (err as { details: { problems: string[] } }).details.problems.join('\n');
      expect(problems).toMatch(/count/);
      expect(problems).toMatch(/observed_at/);
      expect(problems).toMatch(/price must be > 0/);
    }
  });

  it('checks nested prices and float ranges', () => {
    const book = { ...SAMPLES.orderBook, asks: [{ price: '0', count: 1 }] };
    expect(() => validateEvent('orderBook', eventSchema('orderBook').type, book)).toThrow(/asks\[0\]\.price/);
    const range = { ...SAMPLES.floatRanged, float_max: '1.5' };
    expect(() => validateEvent('floatRanged', eventSchema('floatRanged').type, range)).toThrow(
      /float_max: must be within/,
    );
    const sticker = { ...SAMPLES.sale, stickers: [{ slot: 0, name: 'x', wear: 'worn' }] };
    expect(() => validateEvent('sale', eventSchema('sale').type, sticker)).toThrow(/stickers\[0\]\.wear/);
  });

  it('allows a null price (no listing) but never zero', () => {
    const none = { ...SAMPLES.listing, price: null, count: 0 };
    expect(() => validateEvent('listing', eventSchema('listing').type, none)).not.toThrow();
    expect(() => validateEvent('listing', eventSchema('listing').type, { ...none, price: '0' })).toThrow();
  });

  it('gives every price string the verdict of parsePrice (the fast path changes no answer)', () => {
    const digits = fc.string({ unit: fc.constantFrom('0', '1', '9', '.', '-', '+', ' ', 'e'), maxLength: 8 });
    fc.assert(
      fc.property(digits, (price) => {
        let full = true;
        try {
          parsePrice(price);
        } catch {
          full = false;
        }
        const ok = () => validateEvent('listing', eventSchema('listing').type, { ...SAMPLES.listing, price });
        if (full) expect(ok).not.toThrow();
        else expect(ok).toThrow();
      }),
      { numRuns: 3000 },
    );
  });
});

describe('keys', () => {
  it('keys items by market + name + phase, unambiguously for names with | and ()', () => {
    const key = eventKey('listing', SAMPLES.listing);
    expect(parseItemKey(key)).toEqual({
      market: 'cn-a',
      marketHashName: SAMPLES.listing.market_hash_name,
      phase: 'Ruby',
    });
    expect(itemKey('cn-a', 'A | B', '')).not.toBe(itemKey('cn-a', 'A', ' | B'));
  });
  it('keys tier buy-order rows apart from the plain item', () => {
    const tier = eventKey('buyorder', SAMPLES.buyorder);
    const plain = eventKey('buyorder', { ...SAMPLES.buyorder, tier: null });
    expect(tier).not.toBe(plain);
  });
  it('keys poll cycles by market and data kind', () => {
    expect(eventKey('pollCycle', SAMPLES.pollCycle)).toBe('["eu-a","LISTINGS"]');
  });
});

describe('keyHeaders', () => {
  it("names a buy-order key's third field: the tier on tier rows, the phase otherwise; no header elsewhere", () => {
    expect(keyHeaders('buyorder', { ...SAMPLES.buyorder, tier: 'T2' })).toEqual({
      'key-fields': 'market,market_hash_name,tier',
    });
    expect(keyHeaders('buyorder', { ...SAMPLES.buyorder, tier: null })).toEqual({
      'key-fields': 'market,market_hash_name,phase',
    });
    expect(keyHeaders('listing', SAMPLES.listing)).toBeUndefined();
  });
});

describe('itemKey', () => {
  it('is JSON.stringify of [market, name, phase] for any strings (quotes, controls, surrogates, ★)', () => {
    const part = fc.oneof(
      fc.string({ unit: fc.constantFrom('"', '\\', '\n', '\u0001', '★', '\ud800', '\udc00', 'a') }),
      fc.string({ unit: 'binary' }),
    );
    fc.assert(
      fc.property(part, part, part, (m, n, p) => {
        expect(itemKey(m, n, p)).toBe(JSON.stringify([m, n, p]));
      }),
      { numRuns: 3000 },
    );
  });
});

import { describe, expect, it } from 'vitest';
import { MARKETS, parseExtraMarkets } from './markets.js';

const entry = {
  slug: 'eu-c',
  upstreamFormat: 'raw-listings',
  label: 'EU-C',
  currency: 'EUR',
  priceField: 'price',
  kind: 'listing',
  perMarketEndpoint: true,
  inCatalogue: true,
  capabilities: ['listings'],
  refresh: { listingsMs: 300_000 },
};
const parse = (v: unknown) => () => parseExtraMarkets(JSON.stringify(v));

describe('marketplaces added by SKINPRICES_EXTRA_MARKETS', () => {
  it('accepts a complete entry of a known format; nothing when unset or empty', () => {
    expect(parseExtraMarkets(JSON.stringify([entry]))).toEqual([entry]);
    expect(parseExtraMarkets(undefined)).toEqual([]);
    expect(parseExtraMarkets('  ')).toEqual([]);
  });

  it('refuses, naming the entry and the field: bad JSON, taken slugs, unknown formats, currencies, capabilities', () => {
    expect(() => parseExtraMarkets('{')).toThrow(/not JSON/);
    expect(parse(entry)).toThrow(/JSON array/);
    expect(parse([{ ...entry, slug: MARKETS[0]?.slug }])).toThrow(/entry 0: slug 'cn-a' is taken/);
    expect(parse([entry, entry])).toThrow(/entry 1: slug 'eu-c' is taken/);
    expect(parse([{ ...entry, slug: 'EU C' }])).toThrow(/slug must match/);
    expect(parse([{ ...entry, upstreamFormat: 'telnet' }])).toThrow(/unknown upstreamFormat/);
    expect(parse([{ ...entry, currency: 'GBP' }])).toThrow(/currency/);
    expect(parse([{ ...entry, capabilities: ['listings', 'teleport'] }])).toThrow(/capabilities/);
    expect(parse([{ ...entry, refresh: { listingsMs: 5 } }])).toThrow(/refresh/);
    expect(parse([{ ...entry, marketCapIndex: true }])).toThrow(/market-cap/);
  });
});

import { getMarket } from '@skinprices/domain';
import { parseConfig } from '@skinprices/runtime';
import { describe, expect, it } from 'vitest';
import { pollerConfigSchema, waitsForCatalogue } from './config.js';

const config = (env: Record<string, string> = {}) =>
  parseConfig(pollerConfigSchema, { MARKET: 'cn-a', UPSTREAM_BASE_URL: 'http://127.0.0.1:1', ...env });

describe('waitsForCatalogue', () => {
  it('holds a listing marketplace that polls more than its listings, by default (scope all)', () => {
    expect(waitsForCatalogue(getMarket('cn-a'), config(), ['LISTINGS', 'BUYORDERS'])).toBe(true);
  });

  it('does not start a gate for a listings-only poller: it has nothing to hold', () => {
    expect(waitsForCatalogue(getMarket('eu-a'), config(), ['LISTINGS'])).toBe(false);
    expect(waitsForCatalogue(getMarket('eu-a'), config({ DAILY_HISTORY: 'history' }), ['LISTINGS'])).toBe(true);
  });

  it('scope backfill holds only a marketplace without listings; CATALOGUE_GATE_MS=0 none at all', () => {
    const backfill = config({ CATALOGUE_GATE_SCOPE: 'backfill' });
    expect(waitsForCatalogue(getMarket('cn-a'), backfill, ['LISTINGS', 'BUYORDERS'])).toBe(false);
    expect(waitsForCatalogue(getMarket('hist-a'), backfill, ['HISTORY'])).toBe(true);
    expect(waitsForCatalogue(getMarket('hist-a'), config({ CATALOGUE_GATE_MS: '0' }), ['HISTORY'])).toBe(false);
  });
});

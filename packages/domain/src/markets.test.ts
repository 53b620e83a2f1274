import { describe, expect, it } from 'vitest';
import { getMarket, isMarketSlug, MARKETS, marketsWith, templateIdFieldName } from './markets.js';

describe('markets registry', () => {
  it('holds 13 listing marketplaces and one history-only one', () => {
    expect(MARKETS.filter((m) => m.kind === 'listing')).toHaveLength(13);
    expect(MARKETS.filter((m) => m.kind === 'history').map((m) => m.slug)).toEqual(['hist-a']);
  });

  it('matches the spec table: currency, price field, endpoints', () => {
    expect(getMarket('cn-a')).toMatchObject({ currency: 'CNY', priceField: 'price_rmb' });
    for (const slug of ['cn-b', 'cn-c', 'cn-d']) expect(getMarket(slug).currency).toBe('CNY');
    for (const slug of ['eu-a', 'eu-b']) expect(getMarket(slug).currency).toBe('EUR');
    const perMarket = MARKETS.filter((m) => m.perMarketEndpoint).map((m) => m.slug);
    expect(perMarket).toEqual(['cn-a', 'cn-b', 'cn-c', 'cn-d', 'eu-a', 'eu-b']);
    const usd = MARKETS.filter((m) => m.slug.startsWith('usd-'));
    expect(usd).toHaveLength(6);
    for (const m of usd) expect(m).toMatchObject({ currency: 'USD', inCatalogue: true, perMarketEndpoint: false });
    expect(getMarket('store')).toMatchObject({ currency: 'USD', inCatalogue: false });
  });

  it('has buy orders on CN-A (30 min) and CN-B (10 min) only', () => {
    expect(marketsWith('buyorders').map((m) => [m.slug, m.refresh.buyordersMs])).toEqual([
      ['cn-a', 30 * 60_000],
      ['cn-b', 10 * 60_000],
    ]);
  });

  it('collects sales from exactly three marketplaces', () => {
    expect(marketsWith('sales')).toHaveLength(3);
  });

  it('refreshes listings about every 5 minutes', () => {
    for (const m of MARKETS.filter((x) => x.kind === 'listing')) expect(m.refresh.listingsMs).toBe(300_000);
  });

  it('uses at least four distinct upstream formats, so adapters are real work', () => {
    expect(new Set(MARKETS.map((m) => m.upstreamFormat)).size).toBeGreaterThanOrEqual(4);
    expect(getMarket('cn-a').upstreamFormat).toBe('goods-cursor');
    expect(getMarket('hist-a').upstreamFormat).toBe('history');
  });

  it('names the template id field after the slug', () => {
    expect(templateIdFieldName('cn-a')).toBe('cn_a_template_id');
    expect(getMarket('cn-a').templateIdField).toBe('cn_a_template_id');
  });

  it('refuses unknown slugs with unknown_market', () => {
    expect(isMarketSlug('cn-z')).toBe(false);
    expect(() => getMarket('cn-z')).toThrow(expect.objectContaining({ code: 'unknown_market' }));
  });
});

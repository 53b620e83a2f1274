import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { getMarket, isMarketSlug, itemPageUrl, MARKETS, marketsWith, templateIdFieldName } from './markets.js';

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

describe('itemPageUrl', () => {
  const SECTION_2_4 = ['cn-b', 'cn-c', 'cn-d', 'eu-a', 'eu-b'];

  it('every listing marketplace has a template of its own, an https URL with only known placeholders', () => {
    const listing = MARKETS.filter((m) => m.kind === 'listing');
    for (const m of listing) {
      const template = m.itemPageUrlTemplate as string;
      expect(template, m.slug).toMatch(/^https:\/\//);
      expect(template.replaceAll(/\{(market_hash_name|id)\}/g, '')).not.toMatch(/[{}]/);
      expect(new URL(template.replaceAll(/\{\w+\}/g, 'x')).hostname).toBe(`${m.slug}.example`);
    }
    expect(new Set(listing.map((m) => m.itemPageUrlTemplate)).size).toBe(listing.length);
    for (const slug of SECTION_2_4) expect(getMarket(slug).itemPageUrlTemplate).toBeDefined();
    expect(getMarket('hist-a').itemPageUrlTemplate).toBeUndefined();
  });

  it('fills the marketplace id where the template has one', () => {
    expect(itemPageUrl(getMarket('cn-b'), { market_hash_name: 'AK-47 | Redline (Field-Tested)', id: 700_042 })).toBe(
      'https://cn-b.example/goods/700042',
    );
  });

  it('percent-encodes the name: spaces, |, ★ and UTF-8', () => {
    expect(itemPageUrl(getMarket('eu-b'), { market_hash_name: '★ Karambit | Doppler (Factory New)', id: null })).toBe(
      'https://eu-b.example/item/%E2%98%85%20Karambit%20%7C%20Doppler%20(Factory%20New)',
    );
  });

  it('a name with /, ?, # or % stays one path segment and decodes back to the name (property)', () => {
    // The characters that could break a link, mixed with plain ones (and a lone surrogate).
    const unit = fc.constantFrom(
      'a',
      'Z',
      '0',
      ' ',
      '/',
      '?',
      '#',
      '%',
      '&',
      '+',
      '|',
      '(',
      ')',
      '★',
      '\u{1F600}',
      '\uD800',
    );
    const name = fc.string({ minLength: 1, maxLength: 40, unit });
    fc.assert(
      fc.property(name, fc.constantFrom('cn-d', 'eu-a', 'eu-b', 'store'), (marketHashName, slug) => {
        const url = new URL(itemPageUrl(getMarket(slug), { market_hash_name: marketHashName, id: null }) as string);
        expect(url.search).toBe('');
        expect(url.hash).toBe('');
        const last = url.pathname.split('/').at(-1) as string;
        expect(decodeURIComponent(last)).toBe(marketHashName.replace(/\p{Surrogate}/gu, '\uFFFD'));
      }),
    );
  });

  it('is null without a template, or when the template needs an id the row lacks (never a guessed link)', () => {
    expect(
      itemPageUrl(getMarket('hist-a'), { market_hash_name: 'AK-47 | Redline (Field-Tested)', id: null }),
    ).toBeNull();
    expect(itemPageUrl(getMarket('cn-b'), { market_hash_name: 'AK-47 | Redline (Field-Tested)', id: null })).toBeNull();
  });
});

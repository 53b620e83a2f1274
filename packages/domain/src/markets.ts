/**
 * The markets registry: every marketplace as data. Adding a marketplace means one entry here plus
 * one upstream adapter; nothing else should switch on slugs. Slugs are neutral because the real
 * names are brands.
 */
import { AppError } from './errors.js';

export const CURRENCIES = ['CNY', 'EUR', 'USD'] as const;
export type Currency = (typeof CURRENCIES)[number];

export const MARKET_SLUGS = [
  'cn-a',
  'cn-b',
  'cn-c',
  'cn-d',
  'eu-a',
  'eu-b',
  'usd-1',
  'usd-2',
  'usd-3',
  'usd-4',
  'usd-5',
  'usd-6',
  'store',
  'hist-a',
] as const;
export type MarketSlug = (typeof MARKET_SLUGS)[number];

/** What a marketplace offers; the pollers schedule and the API route by these. */
export type Capability =
  | 'listings' // lowest price + count per item
  | 'buyorders' // highest bid per item (and per phase/tier row)
  | 'floatBuyorders' // individual buy orders limited by float
  | 'floatRanged' // float-bucket offer short lists
  | 'sales' // completed sales
  | 'orderBook' // in-depth order book (the store)
  | 'history'; // upstream daily history we import

export interface RefreshIntervals {
  /** Listing prices; the spec promises about 5 minutes. */
  listingsMs: number;
  buyordersMs?: number;
  floatBuyordersMs?: number;
  floatRangedMs?: number;
  salesMs?: number;
  orderBookMs?: number;
  historyMs?: number;
}

/**
 * The shape of a marketplace's own API. Each format has one adapter in packages/marketplaces;
 * several marketplaces can share a format (different base URLs).
 */
export const UPSTREAM_FORMATS = [
  'goods-cursor', // cursor-paged goods list, prices in integer minor units, phase as a field
  'goods-pages', // page-numbered goods list, decimal-string prices, phase as a numeric tag id
  'raw-listings', // every individual listing; lowest price and count are derived
  'price-map', // one document keyed by name, variants per phase, exterior in upper case
  'usd-catalogue', // page-numbered catalogue, integer cents
  'store', // first-party store: search results plus order books
  'history', // daily closes only
  // Documented public formats of real marketplaces (issue 16). A marketplace of the registry is
  // pointed at one by configuration (the poller's UPSTREAM_FORMAT and UPSTREAM_BASE_URL).
  'skinport', // whole catalogue in one Brotli answer, decimal prices, 8 requests per 5 min
  'dmarket', // cursor-paged individual offers, prices as cent strings under price.USD
  'csfloat', // cursor-paged individual listings (≤ 50 a page), integer cents, Authorization key
  'steam-market', // search/render pages (≤ 100), formatted price strings, bare 429s
] as const;
export type UpstreamFormat = (typeof UPSTREAM_FORMATS)[number];

export interface Market {
  slug: MarketSlug;
  /** Which adapter speaks this marketplace's API. */
  upstreamFormat: UpstreamFormat;
  /** The label the spec uses (CN-A …); also the envelope's `source`. */
  label: string;
  currency: Currency;
  /** Name of the price field in API rows. */
  priceField: 'price_rmb' | 'price';
  kind: 'listing' | 'history';
  /** Served by `GET /v1/prices/{market}`. */
  perMarketEndpoint: boolean;
  /** Part of the combined catalogue `GET|POST /v1/prices/latest`. */
  inCatalogue: boolean;
  capabilities: readonly Capability[];
  refresh: RefreshIntervals;
  /** API field carrying the marketplace's own template id (CN-A only). */
  templateIdField?: string;
  /**
   * Link to an item's page on this marketplace (the spec's `item_page_url`), as a template with
   * `{market_hash_name}` and `{id}` (the marketplace's own item id: the rows' `template_id`);
   * see itemPageUrl. Phase rows link to their name's page, where marketplaces offer the phases.
   * Absent for a marketplace without item pages (history only).
   */
  itemPageUrlTemplate?: string;
}

const MIN = 60_000;
const LISTINGS_5_MIN = { listingsMs: 5 * MIN } as const;

/** `cn-a` → `cn_a_template_id`: the spec names the field after the slug. */
export function templateIdFieldName(slug: MarketSlug): string {
  return `${slug.replaceAll('-', '_')}_template_id`;
}

function usdCatalogueMarket(n: 1 | 2 | 3 | 4 | 5 | 6): Market {
  const slug = `usd-${n}` as MarketSlug;
  return {
    slug,
    upstreamFormat: 'usd-catalogue',
    label: `USD-${n}`,
    currency: 'USD',
    priceField: 'price',
    kind: 'listing',
    perMarketEndpoint: false,
    inCatalogue: true,
    // usd-1 is one of the three marketplaces whose completed sales we collect.
    capabilities: n === 1 ? ['listings', 'sales'] : ['listings'],
    refresh: n === 1 ? { ...LISTINGS_5_MIN, salesMs: MIN } : LISTINGS_5_MIN,
    itemPageUrlTemplate: `https://${slug}.example/item/{market_hash_name}`,
  };
}

export const MARKETS: readonly Market[] = Object.freeze([
  {
    slug: 'cn-a',
    upstreamFormat: 'goods-cursor',
    label: 'CN-A',
    currency: 'CNY',
    priceField: 'price_rmb',
    kind: 'listing',
    perMarketEndpoint: true,
    inCatalogue: true,
    capabilities: ['listings', 'buyorders', 'floatBuyorders', 'floatRanged', 'sales'],
    refresh: {
      ...LISTINGS_5_MIN,
      buyordersMs: 30 * MIN,
      floatBuyordersMs: 30 * MIN,
      floatRangedMs: 5 * MIN,
      salesMs: MIN,
    },
    templateIdField: templateIdFieldName('cn-a'),
    itemPageUrlTemplate: 'https://cn-a.example/goods/{id}',
  },
  {
    slug: 'cn-b',
    upstreamFormat: 'goods-pages',
    label: 'CN-B',
    currency: 'CNY',
    priceField: 'price',
    kind: 'listing',
    perMarketEndpoint: true,
    inCatalogue: true,
    capabilities: ['listings', 'buyorders', 'floatBuyorders', 'floatRanged', 'sales'],
    refresh: {
      ...LISTINGS_5_MIN,
      buyordersMs: 10 * MIN,
      floatBuyordersMs: 10 * MIN,
      floatRangedMs: 5 * MIN,
      salesMs: MIN,
    },
    itemPageUrlTemplate: 'https://cn-b.example/goods/{id}',
  },
  {
    slug: 'cn-c',
    upstreamFormat: 'goods-pages',
    label: 'CN-C',
    currency: 'CNY',
    priceField: 'price',
    kind: 'listing',
    perMarketEndpoint: true,
    inCatalogue: true,
    capabilities: ['listings', 'floatRanged'],
    refresh: { ...LISTINGS_5_MIN, floatRangedMs: 5 * MIN },
    itemPageUrlTemplate: 'https://cn-c.example/goods/{id}',
  },
  ...(['cn-d', 'eu-a', 'eu-b'] as const).map((slug): Market => ({
    slug,
    upstreamFormat: slug === 'eu-a' ? 'price-map' : 'raw-listings',
    label: slug.toUpperCase(),
    currency: slug.startsWith('cn') ? 'CNY' : 'EUR',
    priceField: 'price',
    kind: 'listing',
    perMarketEndpoint: true,
    inCatalogue: true,
    capabilities: ['listings'],
    refresh: LISTINGS_5_MIN,
    // These upstreams have no item ids of their own: their pages are addressed by name.
    itemPageUrlTemplate: `https://${slug}.example/item/{market_hash_name}`,
  })),
  ...([1, 2, 3, 4, 5, 6] as const).map(usdCatalogueMarket),
  {
    slug: 'store',
    upstreamFormat: 'store',
    label: 'STORE',
    currency: 'USD',
    priceField: 'price',
    kind: 'listing',
    perMarketEndpoint: false,
    // The spec: STORE has its own endpoint and is not part of the combined catalogue.
    inCatalogue: false,
    capabilities: ['listings', 'orderBook'],
    refresh: { ...LISTINGS_5_MIN, orderBookMs: 5 * MIN },
    itemPageUrlTemplate: 'https://store.example/listings/{market_hash_name}',
  },
  {
    slug: 'hist-a',
    upstreamFormat: 'history',
    label: 'HIST-A',
    currency: 'USD',
    priceField: 'price',
    kind: 'history',
    perMarketEndpoint: false,
    inCatalogue: false,
    capabilities: ['history'],
    // History-only: a daily import is enough; listingsMs is kept for a uniform shape.
    refresh: { listingsMs: 24 * 60 * MIN, historyMs: 24 * 60 * MIN },
  },
]);

const BY_SLUG: ReadonlyMap<string, Market> = new Map(MARKETS.map((m) => [m.slug, m]));

export function isMarketSlug(value: unknown): value is MarketSlug {
  return typeof value === 'string' && BY_SLUG.has(value);
}

/** The market for a slug; throws `unknown_market` (the API turns it into 404). */
export function getMarket(slug: string): Market {
  const market = BY_SLUG.get(slug);
  if (!market) {
    throw new AppError('unknown_market', `unknown market '${slug}'`, { details: { market: slug } });
  }
  return market;
}

export function marketsWith(capability: Capability): Market[] {
  return MARKETS.filter((m) => m.capabilities.includes(capability));
}

export function hasCapability(slug: MarketSlug, capability: Capability): boolean {
  return getMarket(slug).capabilities.includes(capability);
}

/** What an item page link is built from: the row's name and the marketplace's own item id. */
export interface ItemPageRef {
  market_hash_name: string;
  /** The marketplace's own item id (the rows' `template_id`), if it has one. */
  id: number | null;
}

const PLACEHOLDER = /\{(market_hash_name|id)\}/g;
const LONE_SURROGATE = /\p{Surrogate}/gu;

/**
 * The link to an item's page on `market`, from its `itemPageUrlTemplate`. Values are
 * percent-encoded as URI components, so a name's spaces, `|`, `/`, `?`, `#` and `★` cannot change
 * the link's structure. Null when the marketplace has no template, or its template needs an id
 * the row does not have: a link guessed without it would point at some other item.
 */
export function itemPageUrl(market: Market, item: ItemPageRef): string | null {
  const template = market.itemPageUrlTemplate;
  if (template === undefined) return null;
  if (template.includes('{id}') && item.id === null) return null;
  return template.replace(PLACEHOLDER, (_, key: string) =>
    // encodeURIComponent throws on a lone surrogate; one broken name must not fail a whole cycle.
    encodeURIComponent(key === 'id' ? String(item.id) : item.market_hash_name.replace(LONE_SURROGATE, '\uFFFD')),
  );
}

const INTERVAL_OF_KIND: Record<string, keyof RefreshIntervals> = {
  LISTINGS: 'listingsMs',
  BUYORDERS: 'buyordersMs',
  FLOAT_BUYORDERS: 'floatBuyordersMs',
  FLOAT_RANGED: 'floatRangedMs',
  SALES: 'salesMs',
  ORDER_BOOK: 'orderBookMs',
  HISTORY: 'historyMs',
};

/** How often `market` refreshes data of a poll-cycle kind (`LISTINGS`, `SALES`, …); undefined if it does not. */
export function refreshIntervalMs(market: Market, kind: string): number | undefined {
  const field = INTERVAL_OF_KIND[kind];
  return field ? market.refresh[field] : undefined;
}

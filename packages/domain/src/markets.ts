/**
 * The markets registry: every marketplace as data. Adding a marketplace means one entry here plus
 * one upstream adapter; nothing else should switch on slugs. Slugs are neutral because the real
 * names are brands.
 */
import { AppError } from './errors.js';
import { DATA_KINDS, isDataKind, type Capability, type RefreshIntervals } from './kinds.js';

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
  // Documented public formats of real marketplaces. A marketplace of the registry is
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
   * Buy-order rows carry `blue_buyorder_price`: the marketplace quotes a separate "blue" buy-order
   * price (CN-A only; spec 4.2).
   */
  blueBuyorderPrice?: boolean;
  /**
   * The plan its float buy orders need when above the endpoint's own (CN-A lists every individual
   * order, which is enterprise data; spec 4.9).
   */
  floatBuyorderPlan?: 'enterprise';
  /** The market-cap index (spec 4.12) is computed over this marketplace's catalogue (one only). */
  marketCapIndex?: boolean;
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

const BUILT_IN_MARKETS: readonly Market[] = Object.freeze([
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
    blueBuyorderPrice: true,
    floatBuyorderPlan: 'enterprise',
    marketCapIndex: true,
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

/**
 * The environment variable that adds marketplaces to the descriptor: a JSON array of entries of
 * the `Market` shape, each of an existing upstream format. Every process of the platform reads it
 * at start, so a new marketplace of a known format is one entry (plus its upstream's address for
 * its poller) and no code: it is polled, materialised and served on every endpoint its
 * capabilities and flags qualify it for.
 */
export const EXTRA_MARKETS_ENV = 'SKINPRICES_EXTRA_MARKETS';

const CAPABILITIES: readonly Capability[] = Object.values(DATA_KINDS).map((k) => k.capability);

/** Parses and checks `json` (the variable's value) into marketplace entries; a bad entry throws `config_invalid`. */
export function parseExtraMarkets(json: string | undefined, known: readonly Market[] = BUILT_IN_MARKETS): Market[] {
  if (json === undefined || json.trim() === '') return [];
  const bad = (why: string): never => {
    throw new AppError('config_invalid', `${EXTRA_MARKETS_ENV}: ${why}`);
  };
  let entries: unknown;
  try {
    entries = JSON.parse(json);
  } catch {
    return bad('not JSON');
  }
  if (!Array.isArray(entries)) return bad('must be a JSON array of marketplace entries');
  const slugs = new Set(known.map((m) => m.slug as string));
  return entries.map((e: Partial<Market> & Record<string, unknown>, i) => {
    const at = `entry ${i}`;
    if (typeof e !== 'object' || e === null) return bad(`${at} is not an object`);
    if (typeof e.slug !== 'string' || !/^[a-z][a-z0-9-]{1,15}$/.test(e.slug))
      return bad(`${at}: slug must match [a-z][a-z0-9-]{1,15}`);
    if (slugs.has(e.slug)) return bad(`${at}: slug '${e.slug}' is taken`);
    slugs.add(e.slug);
    if (!UPSTREAM_FORMATS.includes(e.upstreamFormat as UpstreamFormat)) return bad(`${at}: unknown upstreamFormat`);
    if (!CURRENCIES.includes(e.currency as Currency))
      return bad(`${at}: currency must be one of ${CURRENCIES.join(', ')}`);
    if (typeof e.label !== 'string' || e.label === '') return bad(`${at}: label is required`);
    if (e.priceField !== 'price' && e.priceField !== 'price_rmb')
      return bad(`${at}: priceField must be price or price_rmb`);
    if (e.kind !== 'listing' && e.kind !== 'history') return bad(`${at}: kind must be listing or history`);
    if (typeof e.perMarketEndpoint !== 'boolean' || typeof e.inCatalogue !== 'boolean')
      return bad(`${at}: perMarketEndpoint and inCatalogue must be booleans`);
    if (!Array.isArray(e.capabilities) || !e.capabilities.every((c) => CAPABILITIES.includes(c)))
      return bad(`${at}: capabilities must be among ${CAPABILITIES.join(', ')}`);
    const refresh = e.refresh as unknown as Record<string, unknown> | undefined;
    if (
      typeof refresh !== 'object' ||
      refresh === null ||
      !Object.values(refresh).every((v) => Number.isInteger(v) && (v as number) >= 1000) ||
      typeof refresh.listingsMs !== 'number'
    )
      return bad(`${at}: refresh needs listingsMs, and every interval in whole milliseconds ≥ 1000`);
    if (e.marketCapIndex) return bad(`${at}: the market-cap index has its marketplace already`);
    return Object.freeze({ ...e }) as Market;
  });
}

/** Every marketplace: the built-in ones, then those the environment adds. */
export const MARKETS: readonly Market[] = Object.freeze([
  ...BUILT_IN_MARKETS,
  ...parseExtraMarkets(typeof process === 'undefined' ? undefined : process.env[EXTRA_MARKETS_ENV]),
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

/** The marketplace the market-cap index is computed over (the one with `marketCapIndex`). */
export const MARKET_CAP_MARKET: Market = (() => {
  const found = MARKETS.filter((m) => m.marketCapIndex);
  if (found.length !== 1) throw new Error(`exactly one marketplace must carry marketCapIndex (${found.length} do)`);
  return found[0] as Market;
})();

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

/** How often `market` refreshes data of a poll-cycle kind (`LISTINGS`, `SALES`, …); undefined if it does not. */
export function refreshIntervalMs(market: Market, kind: string): number | undefined {
  return isDataKind(kind) ? market.refresh[DATA_KINDS[kind].refresh] : undefined;
}

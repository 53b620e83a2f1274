/**
 * Which marketplaces each endpoint serves, read from the marketplace descriptor
 * (packages/domain/src/markets.ts): its capabilities and exposure flags. No slug is named here; a
 * marketplace added to the descriptor appears on every endpoint its entry qualifies it for.
 */
import { MARKETS, marketsWith, type Market, type MarketSlug } from '@skinprices/domain';

const slugs = (markets: readonly Market[]): readonly MarketSlug[] => markets.map((m) => m.slug);

/** GET /v1/prices/{market} (spec 4.1). */
export const LIST_MARKETS: readonly Market[] = MARKETS.filter((m) => m.perMarketEndpoint);
/** The combined catalogue GET|POST /v1/prices/latest (4.3, 4.4). */
export const CATALOGUE_MARKETS: readonly Market[] = MARKETS.filter((m) => m.inCatalogue);
/** Buy orders (4.2). */
export const BUYORDER_MARKETS: readonly Market[] = marketsWith('buyorders');
/** Float buy orders (4.9). */
export const FLOAT_BUYORDER_MARKETS: readonly Market[] = marketsWith('floatBuyorders');
/** Float-ranged offers (4.8). */
export const FLOAT_RANGED_MARKETS: readonly Market[] = marketsWith('floatRanged');
/** Completed sales (4.10, 4.11). */
export const SALES_MARKETS: readonly Market[] = marketsWith('sales');
/** Price history (4.6): listing marketplaces and the history-only one. */
export const HISTORY_MARKETS: readonly Market[] = MARKETS.filter(
  (m) => m.capabilities.includes('listings') || m.capabilities.includes('history'),
);
/** The first-party store with its order book (4.7, GET /v1/{store_market}). */
export const STORE_MARKETS: readonly Market[] = marketsWith('orderBook');
/** Every listing marketplace: the search (4.5) and the change feed. */
export const LISTING_MARKETS: readonly Market[] = marketsWith('listings');

export const LIST_SLUGS = slugs(LIST_MARKETS);
export const CATALOGUE_SLUGS = slugs(CATALOGUE_MARKETS);
export { slugs };

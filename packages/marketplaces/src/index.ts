import type { UpstreamFormat } from '@skinprices/domain';
import type { Adapter } from './adapter.js';
import { goodsCursorAdapter } from './adapters/goods-cursor.js';
import { goodsPagesAdapter } from './adapters/goods-pages.js';
import { historyAdapter } from './adapters/history.js';
import { priceMapAdapter } from './adapters/price-map.js';
import { rawListingsAdapter } from './adapters/raw-listings.js';
import { storeAdapter } from './adapters/store.js';
import { usdCatalogueAdapter } from './adapters/usd-catalogue.js';
import { csfloatAdapter } from './adapters/csfloat.js';
import { dmarketAdapter } from './adapters/dmarket.js';
import { skinportAdapter } from './adapters/skinport.js';
import { steamMarketAdapter } from './adapters/steam-market.js';

const ADAPTERS: Record<UpstreamFormat, Adapter> = {
  'goods-cursor': goodsCursorAdapter,
  'goods-pages': goodsPagesAdapter,
  'raw-listings': rawListingsAdapter,
  'price-map': priceMapAdapter,
  'usd-catalogue': usdCatalogueAdapter,
  store: storeAdapter,
  history: historyAdapter,
  skinport: skinportAdapter,
  dmarket: dmarketAdapter,
  csfloat: csfloatAdapter,
  'steam-market': steamMarketAdapter,
};

export function adapterFor(format: UpstreamFormat): Adapter {
  return ADAPTERS[format];
}

export type { Adapter, Credentials, FetchContext, KindInput, SalesWindow, UpstreamLimits } from './adapter.js';
export { UpstreamClient, parseRetryAfter, type UpstreamClientOptions } from './client.js';
export type * from './rows.js';
export { PHASE_BY_TAG_ID } from './adapters/goods-pages.js';
export { splitPhase } from './adapters/raw-listings.js';

import type { UpstreamFormat } from '@skinprices/domain';
import { goodsCursorRoutes } from './goods-cursor.js';
import { goodsPagesRoutes } from './goods-pages.js';
import { historyRoutes } from './history.js';
import { priceMapRoutes } from './price-map.js';
import { rawListingsRoutes } from './raw-listings.js';
import { storeRoutes } from './store.js';
import type { Route } from './types.js';
import { usdCatalogueRoutes } from './usd-catalogue.js';
import { csfloatRoutes } from './csfloat.js';
import { dmarketRoutes } from './dmarket.js';
import { skinportRoutes } from './skinport.js';
import { steamMarketRoutes } from './steam-market.js';

export const ROUTES: Record<UpstreamFormat, Record<string, Route>> = {
  'goods-cursor': goodsCursorRoutes,
  'goods-pages': goodsPagesRoutes,
  'raw-listings': rawListingsRoutes,
  'price-map': priceMapRoutes,
  'usd-catalogue': usdCatalogueRoutes,
  store: storeRoutes,
  history: historyRoutes,
  skinport: skinportRoutes,
  dmarket: dmarketRoutes,
  csfloat: csfloatRoutes,
  'steam-market': steamMarketRoutes,
};
export type { Route, SimContext, UpstreamResponse } from './types.js';

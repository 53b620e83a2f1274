/**
 * Every endpoint of spec section 4 plus the change feed and the status, one module per endpoint
 * group; each route's schemas validate its requests, serialise its object answers and make the
 * OpenAPI document.
 */
import type { FastifyInstance } from 'fastify';
import { registerChangeRoutes, type ChangeRouteOptions } from '../changes/routes.js';
import { registerCatalogueRoutes } from './catalogue.js';
import type { RouteContext } from './context.js';
import { registerFloatRangedRoutes } from './floats.js';
import { registerHistoryRoutes } from './history.js';
import { registerIndexRoutes } from './indexes.js';
import { registerListingRoutes } from './listings.js';
import { registerSalesRoutes } from './sales.js';
import { registerStatusRoutes } from './status.js';
import { registerStoreRoutes } from './store.js';

export type { RouteContext } from './context.js';
export function registerRoutes(app: FastifyInstance, ctx: RouteContext, changes: ChangeRouteOptions): void {
  // Static paths first is Fastify's rule anyway; the store's /v1/{store_market} is the most general.
  registerCatalogueRoutes(app, ctx);
  registerListingRoutes(app, ctx);
  registerHistoryRoutes(app, ctx);
  registerFloatRangedRoutes(app, ctx);
  registerSalesRoutes(app, ctx);
  registerIndexRoutes(app, ctx);
  registerChangeRoutes(app, changes);
  registerStatusRoutes(app, ctx);
  registerStoreRoutes(app, ctx);
}

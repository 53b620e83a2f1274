import { getMarket, isMarketSlug } from '@skinprices/domain';

/**
 * Plans and the endpoint catalogue (spec sections 1 and 4). An endpoint id is its method and
 * path template, exactly as a key's `allowed_endpoints` names it.
 */
export const PLANS = ['basic', 'pro', 'enterprise'] as const;
export type Plan = (typeof PLANS)[number];

const RANK: Record<Plan, number> = { basic: 0, pro: 1, enterprise: 2 };

/** Higher tiers include everything from lower tiers. */
export function planIncludes(have: Plan, need: Plan): boolean {
  return RANK[have] >= RANK[need];
}

/**
 * Beyond the spec: webhooks (webhooks/). A subscription holds delivery capacity of ours for as long
 * as it exists, as a stream holds a connection: pro, with a limit per plan (WEBHOOK_LIMITS). They
 * write, and answer only where webhooks are configured (WEBHOOK_SECRET_KEYS): checks that ask every
 * reading endpoint (plan matrices, soaks) may leave them out.
 */
const WEBHOOK_ENDPOINTS = {
  'POST /v1/webhooks': 'pro',
  'GET /v1/webhooks': 'pro',
  'GET /v1/webhooks/{id}': 'pro',
  'DELETE /v1/webhooks/{id}': 'pro',
  'POST /v1/webhooks/{id}/rotate-secret': 'pro',
  'POST /v1/webhooks/{id}/enable': 'pro',
  'POST /v1/webhooks/{id}/test': 'pro',
  'GET /v1/webhooks/{id}/deliveries': 'pro',
  'POST /v1/webhooks/{id}/deliveries/{message_id}/retry': 'pro',
} as const satisfies Record<string, Plan>;
export type WebhookEndpointId = keyof typeof WEBHOOK_ENDPOINTS;
export const WEBHOOK_ENDPOINT_IDS = Object.keys(WEBHOOK_ENDPOINTS) as WebhookEndpointId[];

export const ENDPOINTS = {
  'GET /v1/prices/{market}': 'basic',
  'GET /v1/prices/{market}/buyorder': 'pro',
  'GET /v1/prices/latest': 'basic',
  'POST /v1/prices/latest': 'basic',
  'GET /v1/prices/search': 'basic',
  'GET /v1/prices/{market}/history': 'basic',
  'GET /v1/{store_market}': 'basic',
  'GET /v2/prices/float-ranged': 'pro',
  // CN-A lists every individual order (enterprise); CN-B's float-range orders are buy-order data (pro).
  'GET /v1/prices/{market}/float-buyorder': 'pro',
  'GET /v1/market-sales/search': 'enterprise',
  'GET /v1/market-sales/export': 'enterprise',
  'GET /v1/indexes/market-cap': 'enterprise',
  'GET /v1/status': 'basic',
  // Beyond the spec: following changes over HTTP. Pages of changes cost us less than re-reading
  // whole lists, so every plan has them; a stream holds a connection open, so it needs pro.
  'GET /v1/prices/changes': 'basic',
  'GET /v1/prices/stream': 'pro',
  ...WEBHOOK_ENDPOINTS,
} as const satisfies Record<string, Plan>;
export type EndpointId = keyof typeof ENDPOINTS;
export const ENDPOINT_IDS = Object.keys(ENDPOINTS) as EndpointId[];

/**
 * The plan an endpoint needs for a given marketplace: the marketplace descriptor can raise it
 * (CN-A's float buy orders list every individual order: enterprise).
 */
export function planFor(endpoint: EndpointId, market?: string): Plan {
  if (endpoint === 'GET /v1/prices/{market}/float-buyorder' && isMarketSlug(market))
    return getMarket(market).floatBuyorderPlan ?? ENDPOINTS[endpoint];
  return ENDPOINTS[endpoint];
}

/** Default per-minute and per-day limits per plan (per second is 10 everywhere, spec section 8). */
export const PLAN_LIMITS: Record<Plan, { perSecond: number; perMinute: number; perDay: number }> = {
  basic: { perSecond: 10, perMinute: 300, perDay: 50_000 },
  pro: { perSecond: 10, perMinute: 600, perDay: 200_000 },
  enterprise: { perSecond: 10, perMinute: 600, perDay: 1_000_000 },
};

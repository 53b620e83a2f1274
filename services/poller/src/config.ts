import {
  DATA_KINDS,
  getMarket,
  isMarketSlug,
  kindOfCapability,
  UPSTREAM_FORMATS,
  type Market,
  type MarketSlug,
} from '@skinprices/domain';
import type { Kind } from '@skinprices/marketplaces';
import { commonEnv, intFromEnv } from '@skinprices/runtime';
import { z } from 'zod';

const ms = (def: number) => intFromEnv(0, 7 * 24 * 3_600_000).default(def);

export const pollerConfigSchema = z.object({
  ...commonEnv,
  MARKET: z
    .string()
    .refine(isMarketSlug, 'a marketplace of the descriptor (built in, or added by SKINPRICES_EXTRA_MARKETS)')
    .transform((s) => s as MarketSlug)
    .describe('the marketplace this process polls'),
  UPSTREAM_BASE_URL: z.url().describe("base URL of the marketplace's API (the simulator's port for it)"),
  UPSTREAM_FORMAT: z
    .enum(UPSTREAM_FORMATS)
    .optional()
    .describe(
      "the upstream's API format (skinport, dmarket, csfloat, steam-market …); unset: the registry's for MARKET",
    ),
  UPSTREAM_API_KEY: z
    .string()
    .min(1)
    .optional()
    .describe('credential for formats that need one (csfloat: Authorization); never logged'),
  TOPIC_SUFFIX: z.string().default('').describe('appended to every topic name (tests use their own topics)'),
  POLL_LISTINGS_MS: ms(0).describe('listing cycle interval; 0: the registry default (5 min)'),
  POLL_BUYORDERS_MS: ms(0).describe('buy-order cycle interval; 0: the registry default (CN-A 30 min, CN-B 10 min)'),
  POLL_FLOAT_MS: ms(0).describe('float-ranged and float buy-order interval; 0: registry default'),
  POLL_SALES_MS: ms(0).describe('sales interval; 0: registry default (1 min)'),
  POLL_ORDER_BOOK_MS: ms(0).describe('order-book interval; 0: registry default'),
  POLL_HISTORY_MS: ms(0).describe('history interval once caught up; 0: registry default (1 day)'),
  FULL_SNAPSHOT_EVERY: intFromEnv(1, 1000)
    .default(12)
    .describe('every n-th listing/buy-order cycle is a full snapshot'),
  UPSTREAM_RPS: z.coerce.number().positive().max(1000).default(20).describe('requests per second to the upstream'),
  UPSTREAM_CONNECTIONS: intFromEnv(1, 64).default(4).describe('keep-alive connections to the upstream'),
  UPSTREAM_TIMEOUT_MS: ms(10_000).describe('connect / first byte / idle body timeout'),
  UPSTREAM_DEADLINE_MS: ms(60_000).describe('whole-request deadline (a slow-drip body ends here)'),
  RETRIES: intFromEnv(0, 20).default(4).describe('retries of one upstream request'),
  BACKOFF_BASE_MS: ms(250).describe('first backoff ceiling (full jitter, doubling)'),
  BACKOFF_MAX_MS: ms(15_000).describe('largest backoff'),
  CIRCUIT_THRESHOLD: intFromEnv(1, 100).default(3).describe('failed cycles in a row that open the circuit'),
  CIRCUIT_COOLDOWN_MS: ms(60_000).describe('how long an open circuit keeps the marketplace off'),
  SALES_LOOKBACK_MS: ms(3 * 3_600_000).describe('how far back the first sales window reaches'),
  HISTORY_BACKFILL_DAYS: intFromEnv(0, 3650).default(400).describe('days of history imported on the first run'),
  HOURLY_BACKFILL_DAYS: intFromEnv(0, 3650)
    .default(0)
    .describe(
      "of those days, the most recent ones whose hourly candles are imported too, where the history format has them (make run's warm demo: 100)",
    ),
  HOURLY_PACE_MS: ms(0).describe(
    "pause between the hourly backfill's days, so the backfill does not delay other marketplaces' closes or live prices",
  ),
  DAILY_HISTORY: z
    .enum(['off', 'history'])
    .default('off')
    .describe(
      "import this marketplace's daily closes from its upstream's history endpoint in this format (the simulator serves one for every marketplace with SIM_DAILY_HISTORY=true: make run's warm demo)",
    ),
  CATALOGUE_GATE_MS: ms(300_000).describe(
    "the longest, from the poller's start, the kinds other than listings (and the history-only marketplace's backfill) wait for every listing marketplace's first LISTINGS cycle (CATALOGUE_MARKETS) to be ingested, so a cold start's catalogue comes first (0: they do not wait; a listing marketplace's still wait for its own first cycle)",
  ),
  CATALOGUE_GATE_SCOPE: z
    .enum(['backfill', 'all'])
    .default('all')
    .describe(
      "what waits for the catalogue: 'all' every kind but the listings of every poller; 'backfill' only the history-only marketplace's backfill (a listing marketplace's other kinds then start after its own first LISTINGS cycle). 'all' makes the cold catalogue visible sooner: the other kinds' writes wait instead of competing with it",
    ),
  CATALOGUE_MARKETS: z
    .string()
    .default('')
    .transform((v, ctx) => {
      const slugs = v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      for (const slug of slugs)
        if (!isMarketSlug(slug) || !getMarket(slug).capabilities.includes('listings')) {
          ctx.addIssue({ code: 'custom', message: `'${slug}' is not a listing marketplace` });
          return z.NEVER;
        }
      return slugs as MarketSlug[];
    })
    .describe(
      "the listing marketplaces this deployment polls, whose first LISTINGS cycles the catalogue gate waits for, e.g. 'cn-a,cn-b,eu-a' (empty: every listing marketplace of the registry)",
    ),
  MATERIALIZER_GROUP: z
    .string()
    .min(1)
    .default('materializer')
    .describe("the materializer's consumer group (its GROUP_ID): the catalogue gate reads its committed offsets"),
  METRICS_HOST: z.string().default('127.0.0.1').describe('where /metrics listens'),
  METRICS_PORT: intFromEnv(0, 65535).optional().describe('Prometheus /metrics port; unset: no endpoint'),
});
export type PollerConfig = z.infer<typeof pollerConfigSchema>;

/** The registry's marketplace, speaking the configured format where one is given. */
export function marketFor(c: PollerConfig): Market {
  const market = getMarket(c.MARKET);
  return c.UPSTREAM_FORMAT ? { ...market, upstreamFormat: c.UPSTREAM_FORMAT } : market;
}

/**
 * Per-kind intervals of the kinds the marketplace offers: the kind's override variable
 * (descriptor's `pollOverride`) where set, else the registry's refresh interval.
 */
export function intervalsFor(market: Market, c: PollerConfig): Partial<Record<Kind, number>> {
  const out: Partial<Record<Kind, number>> = {};
  for (const capability of market.capabilities) {
    const kind = kindOfCapability(capability);
    const { pollOverride, refresh } = DATA_KINDS[kind];
    const v = c[pollOverride] > 0 ? c[pollOverride] : market.refresh[refresh];
    if (v !== undefined) out[kind] = v;
  }
  return out;
}

/**
 * Whether this poller waits for the catalogue gate (catalogue-gate.ts): a marketplace without
 * listings (its backfill) always; a listing marketplace with scope 'all' when it polls anything
 * besides its listings (`polled`: the kinds it runs; daily history counts too). A listings-only
 * poller has nothing to hold, and a gate would only join a consumer group and read the marker
 * topic through the cold start for nothing.
 */
export function waitsForCatalogue(market: Market, c: PollerConfig, polled: readonly Kind[]): boolean {
  if (c.CATALOGUE_GATE_MS === 0) return false;
  if (!market.capabilities.includes('listings')) return true;
  return c.CATALOGUE_GATE_SCOPE === 'all' && (polled.some((k) => k !== 'LISTINGS') || c.DAILY_HISTORY !== 'off');
}

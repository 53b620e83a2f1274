/**
 * The market-cap index (spec 4.12) over the catalogue of the marketplace the descriptor names
 * (MARKET_CAP_MARKET): hourly points from the pre-aggregated hourly table, daily points, and the
 * daily table as the fallback for hours it does not have.
 */
import { MARKET_CAP_MARKET } from '@skinprices/domain';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { RouteContext } from './context.js';
import { Resolution } from './history.js';
import { closed, DailyCapPoint, HourlyCapPoint, keyFields, responses, type CapPoint } from './schemas.js';
import { keyFieldsOf, sendObject } from './send.js';

const DAYS = { min: 7, max: 365, default: 30 };
const HOURS = { min: 12, max: 168, default: 48 };
const clamp = (v: number | undefined, r: typeof DAYS) => Math.min(r.max, Math.max(r.min, v ?? r.default));

const head = {
  market: Type.Literal(MARKET_CAP_MARKET.slug),
  currency: Type.Literal(MARKET_CAP_MARKET.currency),
};

export function registerIndexRoutes(app: FastifyInstance, ctx: RouteContext): void {
  app.get<{ Querystring: { resolution: 'daily' | 'hourly'; days?: number; hours?: number } }>(
    '/v1/indexes/market-cap',
    {
      config: { endpoint: 'GET /v1/indexes/market-cap' },
      schema: {
        summary: `${MARKET_CAP_MARKET.label} market cap: Σ price × count over the cleaned catalogue (0 < price < 1,000,000 ${MARKET_CAP_MARKET.currency}, count ≥ 2, catalogue items, not an outlier by the guard as of that hour: see is_outlier on the catalogue)`,
        querystring: Type.Object({
          resolution: Resolution,
          days: Type.Optional(
            Type.Integer({
              description: `daily look-back, clamped to ${DAYS.min}..${DAYS.max} (default ${DAYS.default})`,
            }),
          ),
          hours: Type.Optional(
            Type.Integer({
              description: `hourly look-back, clamped to ${HOURS.min}..${HOURS.max} (default ${HOURS.default})`,
            }),
          ),
        }),
        response: responses({
          ok: Type.Union([
            closed({
              ...head,
              resolution: Type.Literal('daily'),
              days: Type.Integer(),
              source: Type.Literal('daily'),
              points: Type.Array(DailyCapPoint),
              ...keyFields,
            }),
            closed({
              ...head,
              resolution: Type.Literal('hourly'),
              hours: Type.Integer(),
              source: Type.Unsafe<'hourly' | 'daily-fallback'>({
                type: 'string',
                enum: ['hourly', 'daily-fallback'],
                description:
                  "daily-fallback: the hourly table had no points, so the daily table's serve (cleaned false)",
              }),
              points: Type.Array(Type.Union([HourlyCapPoint, DailyCapPoint])),
              ...keyFields,
            }),
          ]),
        }),
      },
    },
    async (req, reply) => {
      const { resolution } = req.query;
      const now = (await ctx.read.clock()) ?? new Date();
      const days = clamp(req.query.days, DAYS);
      const hours = clamp(req.query.hours, HOURS);
      const since = new Date(now.getTime() - (resolution === 'daily' ? days * 86_400_000 : hours * 3_600_000));
      let points: CapPoint[] = await ctx.read.marketCap(resolution, since);
      let source: 'daily' | 'hourly' | 'daily-fallback' = resolution;
      // Hourly reads the pre-aggregated hourly table; without it, the daily table's points serve.
      if (resolution === 'hourly' && points.length === 0) {
        points = (await ctx.read.marketCap('daily', since)).map((p) => ({ ...p, cleaned: false }));
        source = 'daily-fallback';
      }
      return sendObject(reply, {
        market: MARKET_CAP_MARKET.slug,
        currency: MARKET_CAP_MARKET.currency,
        resolution,
        ...(resolution === 'daily' ? { days } : { hours }),
        source,
        points,
        ...keyFieldsOf(req),
      });
    },
  );
}

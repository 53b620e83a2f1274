/** Float-range offer short lists (spec 4.8): one marketplace's, or every marketplace's. */
import { getMarket, type MarketSlug } from '@skinprices/domain';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { marketPath, type RouteContext } from './context.js';
import { FLOAT_RANGED_MARKETS, slugs } from './exposure.js';
import { envelope, FloatRangedRow, responses } from './schemas.js';
import { envelopeTail, keyOf, sendBody } from './send.js';

export function registerFloatRangedRoutes(app: FastifyInstance, ctx: RouteContext): void {
  app.get<{ Querystring: { market?: MarketSlug } }>(
    '/v2/prices/float-ranged',
    {
      config: { endpoint: 'GET /v2/prices/float-ranged' },
      schema: {
        summary: 'Float-range offers: first and fifth listing price and count per float bucket, phase translations',
        querystring: Type.Object({
          market: Type.Optional(
            marketPath(FLOAT_RANGED_MARKETS, `one of ${slugs(FLOAT_RANGED_MARKETS).join(', ')} (default: all)`),
          ),
        }),
        // `source` only when one marketplace was asked for.
        response: responses({ ok: envelope(FloatRangedRow, 'optional'), etag: true }),
      },
    },
    async (req, reply) => {
      const { market } = req.query;
      const body = await ctx.bodies.get(
        `float-ranged:${market ?? '*'}`,
        async () => `{"data":${JSON.stringify(await ctx.wholeReads.run(() => ctx.read.floatRanged(market)))}`,
      );
      return sendBody(
        req,
        reply,
        body,
        envelopeTail(keyOf(req), market ? getMarket(market).label : undefined, body.builtAt),
      );
    },
  );
}

/**
 * The first-party store (spec 4.7, GET /v1/{store_market}): prices and the in-depth order book,
 * the whole store as a cached body or one item per request. Registered last by the caller:
 * /v1/{store_market} is the most general path.
 */
import { getMarket, type MarketSlug } from '@skinprices/domain';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { marketPath, nameQuery, type RouteContext } from './context.js';
import { STORE_MARKETS } from './exposure.js';
import { envelope, responses, StoreRow } from './schemas.js';
import { envelopeTail, keyFieldsOf, keyOf, sendBody, sendObject } from './send.js';

export function registerStoreRoutes(app: FastifyInstance, ctx: RouteContext): void {
  app.get<{ Params: { store_market: MarketSlug }; Querystring: { market_hash_name?: string } }>(
    '/v1/:store_market',
    {
      config: { endpoint: 'GET /v1/{store_market}' },
      schema: {
        summary: `The first-party store (${STORE_MARKETS.map((m) => `"${m.slug}"`).join(', ')}): prices and the order book`,
        params: Type.Object({ store_market: marketPath(STORE_MARKETS) }),
        querystring: Type.Object({ market_hash_name: Type.Optional(nameQuery('one item')) }),
        response: responses({ ok: envelope(StoreRow), etag: true }),
      },
    },
    async (req, reply) => {
      const market = req.params.store_market;
      const name = req.query.market_hash_name;
      if (name) {
        const data = await ctx.read.store(market, name);
        return sendObject(reply, { data, source: getMarket(market).label, ...keyFieldsOf(req) });
      }
      const body = await ctx.bodies.get(
        `order-book:${market}`,
        async () => `{"data":${JSON.stringify(await ctx.wholeReads.run(() => ctx.read.store(market)))}`,
      );
      return sendBody(req, reply, body, envelopeTail(keyOf(req), getMarket(market).label, body.builtAt));
    },
  );
}

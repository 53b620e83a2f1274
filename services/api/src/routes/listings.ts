/**
 * One marketplace's lists: listing prices (spec 4.1), buy orders (4.2) and float buy orders (4.9).
 * The first two are whole-list bodies built once per read-model version and sent with a
 * per-request tail; float buy orders are filtered per request.
 */
import { getMarket, type MarketSlug } from '@skinprices/domain';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { ListRow } from '../list-segments.js';
import { marketPath, nameQuery, type RouteContext } from './context.js';
import { BUYORDER_MARKETS, FLOAT_BUYORDER_MARKETS, LIST_MARKETS, slugs } from './exposure.js';
import { buyorderRowSchema, envelope, FloatBuyorderRow, listingRowSchema, oneShapeOf, responses } from './schemas.js';
import { CONFIRMED_AT, envelopeTail, keyFieldsOf, keyOf, sendBody, sendObject } from './send.js';

const FLOAT = '^(0(\\.\\d{1,20})?|1(\\.0{1,20})?)$';

export function registerListingRoutes(app: FastifyInstance, ctx: RouteContext): void {
  app.get<{ Params: { market: MarketSlug } }>(
    '/v1/prices/:market',
    {
      config: { endpoint: 'GET /v1/prices/{market}' },
      schema: {
        summary: `Lowest listing per item of one marketplace (${slugs(LIST_MARKETS).join(', ')})`,
        params: Type.Object({ market: marketPath(LIST_MARKETS) }),
        response: responses({
          ok: envelope(oneShapeOf(LIST_MARKETS.map(listingRowSchema), 'the row shape of the marketplace')),
          etag: true,
          okHeaders: {
            [CONFIRMED_AT]:
              "when the marketplace's whole list was last confirmed complete upstream, as of this answer's data (absent: never); a row's updated_at is when its price or count last changed",
          },
        }),
      },
    },
    async (req, reply) => {
      const { market } = req.params;
      const body = await ctx.lists.get(`prices:${market}`, {
        full: async () => {
          const { position, rows, confirmedAt } = await ctx.read.listingRows(market);
          return { position, rows: rows as ListRow[], confirmedAt };
        },
        since: async (position, known) => {
          const r = await ctx.read.listingChanges(market, position, known);
          return r && { position: r.position, changes: r.rows, confirmedAt: r.confirmedAt };
        },
        fields: (position, notBefore) => ctx.scores.since(position, notBefore),
      });
      return sendBody(req, reply, body, envelopeTail(keyOf(req), getMarket(market).label, body.builtAt));
    },
  );

  app.get<{ Params: { market: MarketSlug } }>(
    '/v1/prices/:market/buyorder',
    {
      config: { endpoint: 'GET /v1/prices/{market}/buyorder' },
      schema: {
        summary: `Highest buy orders (${BUYORDER_MARKETS.map((m) => `${m.slug} every ~${Math.round((m.refresh.buyordersMs ?? 0) / 60_000)} min`).join(', ')}); phase and tier rows carry the suffix`,
        params: Type.Object({ market: marketPath(BUYORDER_MARKETS) }),
        response: responses({ ok: envelope(oneShapeOf(BUYORDER_MARKETS.map(buyorderRowSchema))), etag: true }),
      },
    },
    async (req, reply) => {
      const { market } = req.params;
      const body = await ctx.bodies.get(
        `buyorders:${market}`,
        async () => `{"data":${JSON.stringify(await ctx.wholeReads.run(() => ctx.read.buyorders(market)))}`,
      );
      return sendBody(req, reply, body, envelopeTail(keyOf(req), getMarket(market).label, body.builtAt));
    },
  );

  app.get<{ Params: { market: MarketSlug }; Querystring: { market_hash_name?: string; float?: string } }>(
    '/v1/prices/:market/float-buyorder',
    {
      config: { endpoint: 'GET /v1/prices/{market}/float-buyorder' },
      schema: {
        summary: `Float buy orders: every individual order with its float range, phase and condition (${FLOAT_BUYORDER_MARKETS.map((m) => `${m.slug}: ${m.floatBuyorderPlan ?? 'pro'}`).join(', ')})`,
        params: Type.Object({ market: marketPath(FLOAT_BUYORDER_MARKETS) }),
        querystring: Type.Object({
          market_hash_name: Type.Optional(nameQuery('one item')),
          float: Type.Optional(
            Type.String({ pattern: FLOAT, description: 'an exact float value (0..1): orders whose range holds it' }),
          ),
        }),
        response: responses({ ok: envelope(FloatBuyorderRow) }),
      },
    },
    async (req, reply) => {
      const { market } = req.params;
      // Not in a whole-read slot: this answer is not cached, so every request would queue one
      // (a burst of them ahead of the lists' builds); the pool's wait bounds it instead.
      const data = await ctx.read.floatBuyorders(market, req.query.market_hash_name, req.query.float);
      return sendObject(reply, { data, source: getMarket(market).label, ...keyFieldsOf(req) });
    },
  );
}

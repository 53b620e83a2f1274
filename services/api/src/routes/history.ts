/**
 * Price history of one item on one marketplace (spec 4.6): daily closes or hourly snapshots, each
 * point a candle. An unknown name is a 404 (a typo must not look like "no data"); a known item
 * without points here is a 200 with none.
 */
import { getMarket, type MarketSlug } from '@skinprices/domain';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { ApiError } from '../errors.js';
import { marketPath, nameQuery, type RouteContext } from './context.js';
import { HISTORY_MARKETS } from './exposure.js';
import { closed, DailyPoint, HourlyPoint, keyFields, responses } from './schemas.js';
import { envelopeTail, keyOf, sendJson } from './send.js';

export const Resolution = Type.Optional(
  Type.Unsafe<'daily' | 'hourly'>({ type: 'string', enum: ['daily', 'hourly'], default: 'daily' }),
);

const head = {
  market: Type.String(),
  currency: Type.String({ description: "the marketplace's currency (CNY, EUR, USD)" }),
  market_hash_name: Type.String(),
  phase: Type.String(),
};

/** The answer cache's name of a history's points. */
export const historyEntry = (market: MarketSlug, name: string, phase: string, resolution: string) =>
  `history\u0000${market}\u0000${name}\u0000${phase}\u0000${resolution}`;

/** The history answer up to its cached points (hot-path.ts's too); the envelope's tail follows them. */
export function historyHead(market: MarketSlug, name: string, phase: string, resolution: string): string {
  const top = { market, currency: getMarket(market).currency, market_hash_name: name, phase, resolution };
  return `${JSON.stringify(top).slice(0, -1)},"points":`;
}

export function registerHistoryRoutes(app: FastifyInstance, ctx: RouteContext): void {
  app.get<{
    Params: { market: MarketSlug };
    Querystring: { market_hash_name: string; phase?: string; resolution: 'daily' | 'hourly' };
  }>(
    '/v1/prices/:market/history',
    {
      config: { endpoint: 'GET /v1/prices/{market}/history' },
      schema: {
        summary:
          'Listing price history: daily closes (all stored) or hourly snapshots (~100 days); missing days are missing',
        params: Type.Object({ market: marketPath(HISTORY_MARKETS) }),
        querystring: Type.Object({
          market_hash_name: nameQuery(),
          phase: Type.Optional(Type.String({ maxLength: 100, description: 'phase of a phase item (default none)' })),
          resolution: Resolution,
        }),
        response: responses({
          ok: Type.Union([
            closed({ ...head, resolution: Type.Literal('daily'), points: Type.Array(DailyPoint), ...keyFields }),
            closed({ ...head, resolution: Type.Literal('hourly'), points: Type.Array(HourlyPoint), ...keyFields }),
          ]),
          more: {
            404: 'unknown marketplace or route, or an item never listed nor imported (an item that was, but has no points here, is a 200 with no points)',
          },
        }),
      },
    },
    async (req, reply) => {
      const { market } = req.params;
      const name = req.query.market_hash_name;
      const phase = req.query.phase ?? '';
      const resolution = req.query.resolution;
      const points = await ctx.answers.get(historyEntry(market, name, phase, resolution), () =>
        ctx.read.history(market, name, phase, resolution),
      );
      // No points: a typo must not look like "no data". Only a name never seen is a 404.
      if (points === '[]' && (await ctx.answers.get(`known\u0000${name}`, () => ctx.read.knowsItem(name))) === 'false')
        throw new ApiError(404, 'not_found', `no item named '${name}' was ever listed or imported (names are exact)`);
      const tail = envelopeTail(keyOf(req), undefined, Date.now());
      return sendJson(reply, `${historyHead(market, name, phase, resolution)}${points}${tail}`);
    },
  );
}

/**
 * Completed sales (spec 4.10: one item over the last 72 hours of the data's clock) and the bulk
 * export of the last 24 hours (4.11: a ZIP of three CSV files the materializer's export builds).
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { ApiError } from '../errors.js';
import { parseMarkets } from '../params.js';
import { marketsQuery, nameQuery, type RouteContext } from './context.js';
import { SALES_MARKETS, slugs } from './exposure.js';
import { closed, keyFields, responses, Sale, Ts } from './schemas.js';
import { keyFieldsOf, sendObject } from './send.js';

const WINDOW_MS = 72 * 3_600_000;
const SALES_SLUGS = slugs(SALES_MARKETS);

export function registerSalesRoutes(app: FastifyInstance, ctx: RouteContext): void {
  app.get<{ Querystring: { market_hash_name: string; markets?: string | string[] } }>(
    '/v1/market-sales/search',
    {
      config: { endpoint: 'GET /v1/market-sales/search' },
      schema: {
        summary: `Completed sales of one item in the last 72 hours (${SALES_SLUGS.join(', ')})`,
        querystring: Type.Object({ market_hash_name: nameQuery(), markets: marketsQuery(SALES_MARKETS) }),
        response: responses({
          ok: closed({
            market_hash_name: Type.String(),
            from: { ...Ts, description: 'start of the window (72 hours before `to`)' },
            to: { ...Ts, description: "end of the window: the data's clock" },
            data: Type.Array(Sale),
            ...keyFields,
          }),
        }),
      },
    },
    async (req, reply) => {
      const name = req.query.market_hash_name;
      const markets = parseMarkets(req.query.markets, SALES_SLUGS);
      // "The last 72 hours" by the data's clock (the same as the wall clock in production).
      const until = (await ctx.read.clock()) ?? new Date();
      const since = new Date(until.getTime() - WINDOW_MS);
      const data = await ctx.read.sales(name, since, new Date(until.getTime() + 1), markets);
      return sendObject(reply, {
        market_hash_name: name,
        from: since.toISOString(),
        to: until.toISOString(),
        data,
        ...keyFieldsOf(req),
      });
    },
  );

  app.get(
    '/v1/market-sales/export',
    {
      config: { endpoint: 'GET /v1/market-sales/export' },
      schema: {
        summary:
          'ZIP of the last 24 h of sales: sales.csv (market, sale_id, market_hash_name, phase, currency, price, sold_at, float_value, paint_index, paint_seed, sticker_count, keychain_count), stickers.csv (market, sale_id, slot, sticker_name, wear), keychains.csv (market, sale_id, slot, keychain_name, pattern)',
        response: responses({
          ok: Type.String({ format: 'binary' }),
          okType: 'application/zip',
          okDescription: 'the archive; X-Window-Start and X-Window-End say which 24 hours it holds',
          more: { 503: 'no sales export built yet, or the database unavailable; Retry-After says when to retry' },
        }),
      },
    },
    async (_req, reply) => {
      // The materializer builds and stores the exports (packages/exports); the API only serves the newest.
      const e = await ctx.read.latestExport();
      if (!e)
        throw new ApiError(503, 'not_available', 'no sales export built yet; try again after the first sales cycles', {
          'retry-after': '60',
        });
      const stamp = e.windowEnd.toISOString().replace(/[:.]/g, '-');
      return reply
        .header('content-type', 'application/zip')
        .header('content-disposition', `attachment; filename="market-sales-${stamp}.zip"`)
        .header('cache-control', 'private, max-age=300')
        .header('x-window-start', e.windowStart.toISOString())
        .header('x-window-end', e.windowEnd.toISOString())
        .send(e.bytes);
    },
  );
}

/**
 * The combined catalogue (spec 4.3 GET, 4.4 POST: items keyed by name, then marketplace) and the
 * cross-marketplace search of one item (4.5), answered from the combined catalogue of the current
 * read-model version (catalogue.ts).
 */
import type { MarketSlug } from '@skinprices/domain';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { itemsJson } from '../catalogue.js';
import { parseMarkets } from '../params.js';
import { marketsQuery, nameQuery, type RouteContext } from './context.js';
import { CATALOGUE_MARKETS, CATALOGUE_SLUGS, LISTING_MARKETS, slugs } from './exposure.js';
import { catalogueAnswer, closed, keyFields, oneShapeOf, responses, searchRowSchema } from './schemas.js';
import { envelopeTail, keyOf, sendBody, sendJson } from './send.js';

/** The start of the catalogue's answer (hot-path.ts's too). */
export const ITEMS_OPEN = Buffer.from('{"items":');
const SEARCH_SLUGS = slugs(LISTING_MARKETS);
const Catalogue = catalogueAnswer(CATALOGUE_MARKETS);

type MarketsQuery = { markets?: string | string[] };

const LATEST = {
  summary:
    'The whole catalogue: items keyed by market_hash_name (phase items: "<name> (<phase>)"), then by marketplace',
  querystring: Type.Object({ markets: marketsQuery(CATALOGUE_MARKETS) }),
  response: responses({ ok: Catalogue, etag: true }),
};
const LATEST_POST = {
  summary: 'The catalogue restricted to at most 100 items',
  body: Type.Object({
    items: Type.Array(Type.String({ minLength: 1, maxLength: 300 }), {
      maxItems: 100,
      description: 'market_hash_name of each item (phase items: "<name> (<phase>)")',
    }),
    markets: marketsQuery(CATALOGUE_MARKETS),
  }),
  response: responses({ ok: Catalogue, body: true }),
};
const SEARCH = {
  summary: 'One item on every marketplace: one row per marketplace and phase',
  querystring: Type.Object({ market_hash_name: nameQuery(), markets: marketsQuery(LISTING_MARKETS) }),
  response: responses({
    ok: closed({
      market_hash_name: Type.String(),
      data: Type.Array(oneShapeOf(LISTING_MARKETS.map(searchRowSchema))),
      ...keyFields,
    }),
  }),
};

/** The search answer up to its cached rows (hot-path.ts's too); the envelope's tail follows them. */
export const searchHead = (name: string) => `{"market_hash_name":${JSON.stringify(name)},"data":`;

/** The answer cache's name of a search's rows. */
export const searchEntry = (name: string, markets: readonly string[]) =>
  `search\u0000${name}\u0000${markets.join(',')}`;

export function registerCatalogueRoutes(app: FastifyInstance, ctx: RouteContext): void {
  const everyMarket = CATALOGUE_SLUGS.join(',');

  /**
   * The answer of 4.3/4.4 up to its envelope's tail (`tail`, when given): `{"items":…`. A
   * selection of marketplaces is never outdated for them (`fresh`), and waits for no other.
   */
  async function answerOf(
    markets: readonly MarketSlug[],
    only?: readonly string[],
    fresh = false,
    tail?: Buffer,
  ): Promise<Buffer> {
    const every = markets.join(',') === everyMarket;
    const at = markets.map((m) => CATALOGUE_SLUGS.indexOf(m));
    const catalogue = await ctx.catalogues.get(fresh || !every, at);
    return itemsJson(catalogue, only, ITEMS_OPEN, tail, every ? undefined : at);
  }

  app.get<{ Querystring: MarketsQuery }>(
    '/v1/prices/latest',
    {
      config: { endpoint: 'GET /v1/prices/latest' },
      schema: LATEST,
    },
    async (req, reply) => {
      const markets = parseMarkets(req.query.markets, CATALOGUE_SLUGS);
      const body = await ctx.bodies.get(`latest:${markets.join(',')}`, async () =>
        // Fresh shards: this body is stored under the current version (see VersionedCache.fresh).
        answerOf(markets, undefined, true),
      );
      return sendBody(req, reply, body, envelopeTail(keyOf(req), undefined, body.builtAt));
    },
  );

  app.post<{ Body: { items: string[] } & MarketsQuery }>(
    '/v1/prices/latest',
    {
      config: { endpoint: 'POST /v1/prices/latest' },
      schema: LATEST_POST,
    },
    async (req, reply) => {
      const markets = parseMarkets(req.body.markets, CATALOGUE_SLUGS);
      const tail = Buffer.from(envelopeTail(keyOf(req), undefined, Date.now()));
      return sendJson(reply, await answerOf(markets, [...new Set(req.body.items)], false, tail));
    },
  );

  app.get<{ Querystring: { market_hash_name: string } & MarketsQuery }>(
    '/v1/prices/search',
    {
      config: { endpoint: 'GET /v1/prices/search' },
      schema: SEARCH,
    },
    async (req, reply) => {
      const name = req.query.market_hash_name;
      const markets = parseMarkets(req.query.markets, SEARCH_SLUGS);
      const data = await ctx.answers.get(searchEntry(name, markets), () => ctx.read.search(name, markets));
      return sendJson(reply, `${searchHead(name)}${data}${envelopeTail(keyOf(req), undefined, Date.now())}`);
    },
  );
}

/**
 * DMarket: every individual offer of the CS2 market, at most 100 a page, cursor-paged. The lowest
 * price and the count per (title, phase) are derived here, so nothing is said before the last
 * page: a minimum over part of the offers would be an invented (too high) price, and a failed
 * page fails the whole cycle.
 *
 * Sources (read 2026):
 * - https://docs.dmarket.com/v1/swagger.html (the Trading API): gameId `a8db` is CS2; prices of
 *   the market endpoints are "coins (cents for USD)", sent as strings; CS2 attributes as DMarket
 *   stores them: exterior `factory new` … `battle-scarred`, `not painted`; phase `phase-1` …
 *   `phase-4`, `ruby`, `sapphire`, `emerald`, `black-pearl`. Signed access needs X-Api-Key,
 *   X-Sign-Date and an Ed25519 X-Request-Sign per request. The 2026 swagger lists the signed
 *   `GET /marketplace-api/v2/offers` as the new offers endpoint; the public one read here,
 *   `GET /exchange/v1/market/items`, is the one clients use anonymously.
 * - https://dmarket.com/blog/api-changes/: `/exchange/v1/market/items` pages by `cursor` ("the
 *   first query is executed without mentioning the cursor. The end of the list is identified by
 *   an empty cursor"); the old offset paging stops after 100 pages; `total` is exact only up to
 *   10,000 and stays 10,000 above it, so it cannot tell when the walk is over.
 * - https://support.dmarket.com/hc/en-us/articles/25269064897297-What-are-the-rate-limits-for-requests:
 *   "Market items" 2 requests per second for non-authorized users (per IP), 10 for authorized
 *   ones; every answer carries X-RateLimit-Limit-Second, X-RateLimit-Remaining-Second,
 *   RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset (seconds).
 * - Client libraries for the answer's shape (the docs have no example for this endpoint):
 *   github.com/GODrums/BetterFloat src/lib/@typings/DMarketTypes.d.ts (`{objects, total: {offers,
 *   targets, items, completedOffers, closedTargets}, cursor}`; an object's `itemId`, `amount`,
 *   `title`, `price: {DMC, USD}` as strings, `suggestedPrice`, `instantPrice`, `discountPrice`,
 *   `extra: {exterior: "factory new", phase: "phase-1", phaseTitle: "Phase 1", floatValue,
 *   category, …}`), github.com/Steam-Community-Market-Manager/SCMM SCMM.Market.DMarket.Client,
 *   github.com/h4rdrew/dotaitemmine models/httpResponse/DmarketResponse.cs; page size 100 and
 *   `limit`/`orderBy=price`/`orderDir=asc`/`currency=USD` as the packagist allyans3/dmarket-api
 *   README sends them; the limit's maximum of 100 as the swagger gives it for the v2 endpoint.
 *
 * Quirks handled: `price.USD` is integer cents as a string ("1234" is 12.34), and only `price`
 * is an offer: suggestedPrice, instantPrice, discountPrice and recommendedPrice are DMarket's
 * estimates, and DMC is another currency. The phase is its own field (never part of the title)
 * in DMarket's machine spelling; `phaseTitle`, when present, must agree. An offer repeated on a
 * later page (the list moved while we paged) counts once. DMarket cannot say "listed, but no
 * offer": an item without offers is simply absent, and the poller turns absence into a removal
 * only after a complete, clean cycle.
 */
import { AppError, getMarket, minorUnitsToFixed, normalizePhase, normalizePrice } from '@skinprices/domain';
import type { Adapter, FetchContext, UpstreamLimits } from '../adapter.js';
import {
  asObj,
  collect,
  CursorTrail,
  exteriorFrom,
  identity,
  int,
  listingRow,
  LowestOffers,
  malformed,
  optStr,
  str,
  type Obj,
} from '../normalize.js';
import type { Kind, ListingRow, Page, Rejected } from '../rows.js';

export const DMARKET_PATH = '/exchange/v1/market/items';
/** DMarket's game id for CS2 (CS:GO). */
export const DMARKET_CS2 = 'a8db';
/** The largest page DMarket serves. */
export const DMARKET_PAGE = 100;
/** Anonymous budget of the "Market items" endpoints: requests per second, per IP. */
export const DMARKET_ANONYMOUS_RPS = 2;
/** A pause the headers ask for is capped: a garbled reset must not stall the market for long. */
export const MAX_HEADER_PAUSE_MS = 60_000;

function header(headers: Readonly<Record<string, string | string[] | undefined>>, name: string): string | undefined {
  const v = headers[name];
  return (Array.isArray(v) ? v[0] : v)?.trim();
}

const count = (v: string | undefined): number | undefined =>
  v !== undefined && /^\d+$/.test(v) ? Number(v) : undefined;

/**
 * The documented rate-limit headers: once nothing remains in the window (RateLimit-Remaining or
 * X-RateLimit-Remaining-Second is 0), no request before RateLimit-Reset seconds from now (a
 * second when it is missing: the window is a second), else undefined.
 */
export function dmarketPause(
  headers: Readonly<Record<string, string | string[] | undefined>>,
  now: number,
): number | undefined {
  const remaining = [header(headers, 'ratelimit-remaining'), header(headers, 'x-ratelimit-remaining-second')]
    .map(count)
    .filter((n): n is number => n !== undefined);
  if (remaining.length === 0 || Math.min(...remaining) > 0) return undefined;
  const resetRaw = header(headers, 'ratelimit-reset');
  const reset = resetRaw === undefined ? 1 : count(resetRaw);
  // A reset we cannot read, or one that is already over, says nothing we could wait for.
  if (reset === undefined || reset === 0) return undefined;
  return now + Math.min(reset * 1000, MAX_HEADER_PAUSE_MS);
}

export const DMARKET_LIMITS: UpstreamLimits = {
  requestsPerSecond: DMARKET_ANONYMOUS_RPS,
  // One at a time: a bucket of two refilling at 2/s sends three requests within one second,
  // which a per-second window of two refuses. With a burst of one they are ≥ 500 ms apart.
  burst: 1,
  // The window is one second: after a 429 without Retry-After, a second is enough and
  // a backoff starting at 250 ms would only spend requests on more 429s.
  bare429BackoffMs: 1000,
  pauseFromHeaders: dmarketPause,
};

/** A StatTrak or Souvenir category must agree with the name, which carries the flags in CS2. */
function checkCategory(extra: Obj, stattrak: boolean, souvenir: boolean): void {
  const category = optStr(extra, 'category')?.toLowerCase();
  if (!category) return;
  if (category.includes('stattrak') && !stattrak)
    throw new AppError('invalid_item', `category '${category}' contradicts the name`);
  if (category === 'souvenir' && !souvenir)
    throw new AppError('invalid_item', `category '${category}' contradicts the name`);
}

/** `price.USD`: integer cents as a string. A number or a fraction is not what DMarket sends. */
function usdCents(o: Obj): string {
  const price = asObj(o.price, 'price');
  const usd = price.USD;
  if (typeof usd !== 'string' || !/^\d+$/.test(usd.trim()))
    throw new AppError('invalid_item', `price.USD: expected integer cents as a string, got ${JSON.stringify(usd)}`);
  // "0" is refused here (non_positive_price): an offer at no price is a broken upstream.
  return normalizePrice(minorUnitsToFixed(usd.trim()), 'price.USD');
}

/** One offer → its item row with the offer's amount as count. Throws for an offer we refuse. */
function parseOffer(o: Obj): ListingRow {
  const gameId = o.gameId;
  if (gameId !== undefined && gameId !== DMARKET_CS2)
    throw new AppError('invalid_item', `gameId ${JSON.stringify(gameId)} is not CS2`);
  const name = str(o, 'title');
  const extra = o.extra === undefined || o.extra === null ? {} : asObj(o.extra, 'extra');
  const id = identity(name, optStr(extra, 'phase'));
  const phaseTitle = optStr(extra, 'phaseTitle');
  if (phaseTitle !== null && normalizePhase(phaseTitle) !== id.phase)
    throw new AppError('invalid_phase', `phaseTitle '${phaseTitle}' contradicts phase '${String(extra.phase)}'`);
  checkCategory(extra, id.stattrak, id.souvenir);
  return listingRow(id, {
    exterior: exteriorFrom(optStr(extra, 'exterior'), name),
    price: usdCents(o),
    // One CS2 item per offer; `amount` says so, and a stack would count as many.
    count: int(o, 'amount', 1),
    template_id: null,
    item_page_url: null,
  });
}

interface DmarketPage {
  offers: unknown[];
  cursor: string | null;
}

/** The answer's envelope: `{objects, total, cursor}`; an empty or missing cursor ends the walk. */
function envelope(market: string, body: unknown): DmarketPage {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw malformed(market, 'answer is not an object');
  const o = body as Obj;
  if (!Array.isArray(o.objects)) throw malformed(market, 'objects is not a list');
  const c = o.cursor;
  if (c !== undefined && c !== null && typeof c !== 'string') throw malformed(market, 'cursor is not a string');
  // `total` is not read: it stops at 10,000, and the cursor alone says where the end is.
  return { offers: o.objects, cursor: c ? c : null };
}

/** DMarket prices in US cents: a marketplace of another currency cannot be read from it. */
function requireUsd(market: string): void {
  const currency = getMarket(market).currency;
  if (currency !== 'USD')
    throw new AppError('config_invalid', `${market}: DMarket prices in USD, the market in ${currency}`, {
      details: { market },
      retryable: false,
    });
}

export const dmarketAdapter: Adapter = {
  format: 'dmarket',
  kinds: ['LISTINGS'],
  limits: DMARKET_LIMITS,
  // The market is readable anonymously; a key alone is useless without the per-request Ed25519
  // signature (X-Sign-Date, X-Request-Sign over method, path, query and time), which fixed
  // client headers cannot carry, so none is sent and the anonymous budget applies.
  needsApiKey: false,
  requestHeaders(): Record<string, string> {
    // A page of 100 offers with their fees and estimates is large JSON; the client decodes gzip.
    return { 'accept-encoding': 'gzip' };
  },
  async *pages<K extends Kind>(kind: K, ctx: FetchContext): AsyncGenerator<Page<K>> {
    if (kind !== 'LISTINGS') throw new AppError('kind_unsupported', `${ctx.market} has no ${kind}`);
    requireUsd(ctx.market);
    const best = new LowestOffers();
    const seen = new Set<string>();
    const cursors = new CursorTrail(ctx.market);
    const rejected: Rejected[] = [];
    let cursor: string | undefined;
    for (let n = 0; ; n++) {
      const query = {
        gameId: DMARKET_CS2,
        limit: DMARKET_PAGE,
        orderBy: 'price',
        orderDir: 'asc',
        currency: 'USD',
        cursor,
      };
      const page = await ctx.request(async () => {
        const p = envelope(ctx.market, await ctx.client.getJson(DMARKET_PATH, query, ctx.signal));
        // An empty page that names a next one is a glitch: retry it rather than end early.
        if (p.offers.length === 0 && p.cursor !== null) throw malformed(ctx.market, `empty page ${n} before the end`);
        return p;
      });
      const parsed = collect<'LISTINGS'>(page.offers, (raw) => {
        const o = asObj(raw, 'offer');
        const itemId = str(o, 'itemId');
        if (seen.has(itemId)) return [];
        seen.add(itemId);
        return parseOffer(o);
      });
      rejected.push(...parsed.rejected);
      for (const row of parsed.rows) best.add(row);
      if (page.cursor === null) break;
      cursor = cursors.follow(page.cursor, n);
    }
    yield { rows: best.rows() as Page<K>['rows'], rejected };
  },
};

/**
 * CSFloat: every individual listing of the market, at most 50 a page, cursor-paged. The lowest
 * price and the count per (market_hash_name, phase) are derived here, so nothing is said before
 * the last page: a minimum over part of the listings would be an invented (too high) price, and a
 * failed page fails the whole cycle.
 *
 * Sources (read 2026; the official reference is short and partly stale, see below):
 * - https://docs.csfloat.com/#get-all-listings (source: github.com/csfloat/docs,
 *   source/index.html.md): `GET https://csfloat.com/api/v1/listings`; query `cursor` ("opaque
 *   cursor string from a previous fetch"), `limit` (default 50, "Max of 50"), `sort_by`
 *   (`lowest_price` …), `type` (`buy_now` | `auction`), `market_hash_name`, `category`; listing
 *   fields `id` (string), `type`, `price` (integer cents: `min_price`/`max_price` are "in cents"),
 *   `state` (`listed`), `item` {market_hash_name, phase?, wear_name, is_stattrak, is_souvenir,
 *   float_value, paint_seed, paint_index, def_index, stickers …}.
 * - https://docs.csfloat.com/#authentication: `Authorization: <API-KEY>` (the bare key, no scheme).
 * - https://github.com/csfloat/docs/pull/10 ("Adds Details on Listing Pagination via Cursor"):
 *   `cursor` replaced `page`. The example answer in the docs is still the older bare array, which
 *   cannot carry a cursor; the answer is `{"data": [...], "cursor": "..."}`, the cursor absent on
 *   the last page, as the client libraries read it (github.com/Krablante/csfloat-node-sdk
 *   src/types.ts `CsfloatListingsResponse`, src/pagination.ts).
 * - Rate limits are not in the docs (https://github.com/csfloat/docs/issues/8, open): every answer
 *   carries `x-ratelimit-limit`, `x-ratelimit-remaining` and `x-ratelimit-reset`, per endpoint and
 *   key; reset is Unix epoch seconds (github.com/Bios-Marcel/csfloat_go ratelimit.go reads it with
 *   time.Unix). The numbers reported there for listings: about 200 requests per window.
 *
 * Quirks handled: an auction's `price` is its current bid, not an offer anyone can take, so only
 * `buy_now` listings count (we also ask for `type=buy_now`); a listing not in state `listed` is
 * not on offer; a listing seen again on a later page (the list moved while we paged) counts once.
 * CSFloat cannot say "listed, but no offer": an item without listings is simply absent, and the
 * poller turns absence into a removal only after a complete, clean cycle.
 */
import { AppError } from '@skinprices/domain';
import type { Adapter, Credentials, FetchContext, UpstreamLimits } from '../adapter.js';
import {
  asObj,
  collect,
  CursorTrail,
  exteriorFrom,
  identity,
  listingRow,
  LowestOffers,
  malformed,
  minorPrice,
  optStr,
  str,
  type Obj,
} from '../normalize.js';
import type { Kind, ListingRow, Page, Rejected } from '../rows.js';

export const CSFLOAT_PATH = '/api/v1/listings';
/** The documented maximum page size. */
export const CSFLOAT_PAGE = 50;

/**
 * The community-reported listings budget (csfloat/docs#8): about 200 requests a window. The window
 * itself is learnt from the headers; the sustained rate assumes an hourly window, so a deployment
 * that loses the headers still cannot run through a window's budget early.
 */
export const CSFLOAT_WINDOW_REQUESTS = 200;
const ASSUMED_WINDOW_S = 3600;
/** A pause the headers ask for is capped: a garbled reset must not stall the market for days. */
export const MAX_HEADER_PAUSE_MS = 3_600_000;
/** Reset is whole seconds, and it is CSFloat's clock, not ours: wait a second past it. */
const RESET_MARGIN_MS = 1000;

function header(headers: Readonly<Record<string, string | string[] | undefined>>, name: string): string | undefined {
  const v = headers[name];
  return (Array.isArray(v) ? v[0] : v)?.trim();
}

/**
 * The documented-by-practice rate-limit headers: with no request left in the window, no request
 * before the window resets (epoch ms), else undefined. Missing or unreadable headers say nothing.
 */
export function csfloatPause(
  headers: Readonly<Record<string, string | string[] | undefined>>,
  now: number,
): number | undefined {
  const remaining = header(headers, 'x-ratelimit-remaining');
  const reset = header(headers, 'x-ratelimit-reset');
  if (remaining === undefined || reset === undefined) return undefined;
  if (!/^\d+$/.test(remaining) || !/^\d+$/.test(reset)) return undefined;
  if (Number(remaining) > 0) return undefined;
  const until = Number(reset) * 1000 + RESET_MARGIN_MS;
  if (until <= now) return undefined;
  return Math.min(until, now + MAX_HEADER_PAUSE_MS);
}

/** A cycle of a few pages goes at once: a tenth of the window's budget. */
const BURST = CSFLOAT_WINDOW_REQUESTS / 10;

export const CSFLOAT_LIMITS: UpstreamLimits = {
  // Burst plus an hour at the sustained rate is one window's budget, never more.
  requestsPerSecond: (CSFLOAT_WINDOW_REQUESTS - BURST) / ASSUMED_WINDOW_S,
  burst: BURST,
  pauseFromHeaders: csfloatPause,
};

/** An optional boolean flag of the item must agree with what the name says. */
function flag(item: Obj, key: string, fromName: boolean): void {
  const v = item[key];
  if (v === undefined || v === null) return;
  if (typeof v !== 'boolean') throw new AppError('invalid_item', `${key}: expected a boolean`);
  if (v !== fromName) throw new AppError('invalid_item', `${key} ${String(v)} contradicts the name`);
}

/**
 * One listing → its item row with count 1, or nothing when it is not a fixed-price offer on sale
 * (an auction, a listing no longer `listed`). Throws for a listing we refuse.
 */
function parseListing(o: Obj): ListingRow | null {
  const type = str(o, 'type');
  if (type === 'auction') return null;
  if (type !== 'buy_now') throw new AppError('invalid_item', `type '${type}' is neither buy_now nor auction`);
  if (str(o, 'state') !== 'listed') return null;
  const item = asObj(o.item, 'item');
  const name = str(item, 'market_hash_name');
  const id = identity(name, optStr(item, 'phase'));
  flag(item, 'is_stattrak', id.stattrak);
  flag(item, 'is_souvenir', id.souvenir);
  // The price is an integer number of cents; a string or a fraction is not what CSFloat sends.
  if (typeof o.price !== 'number' || !Number.isSafeInteger(o.price))
    throw new AppError('invalid_item', `price: expected integer cents, got ${JSON.stringify(o.price)}`);
  const price = minorPrice(o, 'price', 1);
  if (price === null) throw new AppError('non_positive_price', 'listing without a price');
  return listingRow(id, {
    exterior: exteriorFrom(optStr(item, 'wear_name'), name),
    price,
    count: 1,
    template_id: null,
    item_page_url: null,
  });
}

interface CsfloatPage {
  listings: unknown[];
  cursor: string | null;
}

/** The answer's envelope: `{data, cursor}`; the docs' bare-array example is one last page. */
function envelope(market: string, body: unknown): CsfloatPage {
  if (Array.isArray(body)) {
    // No cursor to go on with: a full page would hide whatever follows it.
    if (body.length >= CSFLOAT_PAGE)
      throw new AppError('upstream_malformed', `${market}: a bare list of ${body.length} listings cannot be paged`, {
        details: { market },
        retryable: false,
      });
    return { listings: body, cursor: null };
  }
  if (body === null || typeof body !== 'object') throw malformed(market, 'answer is neither an object nor a list');
  const o = body as Obj;
  if (!Array.isArray(o.data)) throw malformed(market, 'data is not a list');
  const c = o.cursor;
  if (c !== undefined && c !== null && typeof c !== 'string') throw malformed(market, 'cursor is not a string');
  return { listings: o.data, cursor: c ? c : null };
}

export const csfloatAdapter: Adapter = {
  format: 'csfloat',
  kinds: ['LISTINGS'],
  limits: CSFLOAT_LIMITS,
  needsApiKey: true,
  requestHeaders(credentials: Credentials): Record<string, string> {
    // A listings page of 50 is large JSON; the client decodes gzip. Without a key no
    // Authorization at all: CSFloat answers 401, which fails the cycle visibly.
    const encoding = { 'accept-encoding': 'gzip' };
    return credentials.apiKey ? { ...encoding, authorization: credentials.apiKey } : encoding;
  },
  async *pages<K extends Kind>(kind: K, ctx: FetchContext): AsyncGenerator<Page<K>> {
    if (kind !== 'LISTINGS') throw new AppError('kind_unsupported', `${ctx.market} has no ${kind}`);
    const best = new LowestOffers();
    const seen = new Set<string>();
    const cursors = new CursorTrail(ctx.market);
    const rejected: Rejected[] = [];
    let cursor: string | undefined;
    for (let n = 0; ; n++) {
      const query = { cursor, limit: CSFLOAT_PAGE, sort_by: 'lowest_price', type: 'buy_now' };
      const page = await ctx.request(async () => {
        const p = envelope(ctx.market, await ctx.client.getJson(CSFLOAT_PATH, query, ctx.signal));
        // An empty page that names a next one is a glitch: retry it rather than end early.
        if (p.listings.length === 0 && p.cursor !== null) throw malformed(ctx.market, `empty page ${n} before the end`);
        return p;
      });
      const parsed = collect<'LISTINGS'>(page.listings, (raw) => {
        const o = asObj(raw, 'listing');
        const id = str(o, 'id');
        if (seen.has(id)) return [];
        seen.add(id);
        const row = parseListing(o);
        return row ? [row] : [];
      });
      rejected.push(...parsed.rejected);
      for (const row of parsed.rows) best.add(row);
      if (page.cursor === null) break;
      cursor = cursors.follow(page.cursor, n);
    }
    yield { rows: best.rows() as Page<K>['rows'], rejected };
  },
};

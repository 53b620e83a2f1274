/**
 * Skinport's documented public API: the whole catalogue in one Brotli answer.
 *
 * Sources (read 2026-11; the endpoint pages themselves were not reachable from here, see below):
 * - https://docs.skinport.com/ — base URL https://api.skinport.com/v1/; Basic authentication
 *   (Client ID:Client secret) is for account endpoints only.
 * - https://docs.skinport.com/items and https://docs.skinport.com/sales/history — as quoted by the
 *   client libraries below: "No authorization required", "8 requests per 5 minutes", "Cached for
 *   5 minutes", query `app_id` (default 730), `currency` (default EUR; AUD BRL CAD CHF CNY CZK DKK
 *   EUR GBP HRK NOK PLN RUB SEK TRY USD), `tradable` (items only, default false), and
 *   `market_hash_name` (sales history: the items' names, comma-delimited).
 * - Field lists and example answers: github.com/PaxxPatriot/skinport.py (tests/test_item.py: an
 *   item with quantity 0 has min/max/mean_price null), github.com/0x1bd/SkinportKt (models/Item.kt,
 *   models/SalesHistoryItem.kt: last_24_hours … last_90_days of {min, max, avg, median, volume},
 *   prices nullable, an optional `version`), github.com/barnumbirr/skinport (docs/api.md).
 * - Brotli: "Accept-Encoding: br" is required; without it Skinport answers 406 Not Acceptable
 *   (stated by several collectors, e.g. github.com/Lebeg134/Skindexer CS2SkinportFetcher.cs,
 *   "confirmed empirically; gzip alone is not sufficient").
 *
 * Not verifiable from here: the body of the 406, whether a 429 carries Retry-After, and the exact
 * window semantics of "8 per 5 minutes" (see SKINPORT_LIMITS for the conservative reading).
 */
import {
  AppError,
  getMarket,
  normalizePhase,
  normalizePrice,
  type Currency,
  type PhaseOrNone,
} from '@skinprices/domain';
import type { Adapter, FetchContext, UpstreamLimits } from '../adapter.js';
import { asObj, collect, identity, int, listingRow, malformed, optStr, str, type Obj } from '../normalize.js';
import type { Kind, ListingRow, Page, Rejected, RowMap } from '../rows.js';

/** Counter-Strike 2 on Skinport (Steam's app id). */
const SKINPORT_APP_ID = 730;
const SKINPORT_ITEMS_PATH = '/v1/items';
const SKINPORT_SALES_HISTORY_PATH = '/v1/sales/history';

/**
 * "8 requests per 5 minutes". A token bucket of burst B and rate r lets B + r × 300 s requests
 * into one 5-minute window: the tempting burst of 8 at 8/300 s would allow 15. Burst 1 at one
 * request per 37.5 s never puts more than 8 into any 5-minute window, whichever way Skinport
 * counts (sliding or fixed), and the catalogue is one request per cycle, so the burst buys nothing.
 */
export const SKINPORT_LIMITS: UpstreamLimits = {
  requestsPerSecond: 8 / 300,
  burst: 1,
  // Whether Skinport's 429 carries Retry-After is not documented: a bare one means the window is
  // spent, and the safe wait is one whole window.
  bare429BackoffMs: 5 * 60_000,
};

/** Digits after the point Skinport prices have in every currency it supports. */
const SCALE = 2;
/** A double prints back exactly the literal it was parsed from up to this many significant digits. */
const EXACT_DIGITS = 15;
const PLAIN_DECIMAL = /^(\d+)(?:\.(\d+))?$/;

/**
 * A Skinport price: a JSON number in the currency's units (12.34, 250, 0.03). JSON.parse has
 * already made it a double, and no arithmetic may touch it: String(n) prints the shortest decimal
 * that reads back as the same double, which for any literal of at most 15 significant digits is
 * that literal itself ("12.34", never 12.339999…). A value with more decimals than the currency's
 * 2 is refused, not rounded (we cannot know which way Skinport meant it), as is one with more than
 * 15 significant digits (String may no longer show what was sent) or one printed with an exponent.
 * null stays null: the caller decides whether "none" is allowed.
 */
export function skinportPrice(o: Obj, key: string): string | null {
  const v = o[key];
  if (v === null || v === undefined) return null;
  if (typeof v !== 'number' || !Number.isFinite(v))
    throw new AppError('invalid_decimal', `${key}: expected a JSON number, got ${JSON.stringify(v)}`);
  const text = String(v);
  const m = PLAIN_DECIMAL.exec(text);
  if (!m) throw new AppError('invalid_decimal', `${key}: ${text} is not a plain decimal`);
  const decimals = m[2] ?? '';
  if (decimals.length > SCALE)
    throw new AppError('invalid_decimal', `${key}: ${text} has more than ${SCALE} decimals; refused, not rounded`);
  if ((m[1] + decimals).replace(/^0+/, '').length > EXACT_DIGITS)
    throw new AppError('invalid_decimal', `${key}: ${text} has more than ${EXACT_DIGITS} significant digits`);
  return normalizePrice(text, key, SCALE);
}

/** An absolute http(s) link (Skinport's item_page, market_page). */
function link(o: Obj, key: string): string {
  const v = str(o, key);
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    throw new AppError('invalid_item', `${key}: not a URL: ${JSON.stringify(v)}`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new AppError('invalid_item', `${key}: not an http(s) link: ${JSON.stringify(v)}`);
  return v;
}

function currencyOf(o: Obj, expected: Currency): Currency {
  const c = str(o, 'currency');
  // Skinport converts to whatever was asked; an answer in another currency would be mislabelled.
  if (c !== expected) throw new AppError('invalid_item', `currency: asked for ${expected}, got ${c}`);
  return c;
}

/** Unix seconds (created_at, updated_at) → epoch ms. */
function seconds(o: Obj, key: string): number {
  return int(o, key, 1) * 1000;
}

/** One entry of GET /v1/items, every documented field, prices as decimal strings. */
interface SkinportItem {
  market_hash_name: string;
  currency: Currency;
  suggested_price: string | null;
  item_page: string;
  market_page: string;
  /** Lowest listing; null exactly when quantity is 0. */
  min_price: string | null;
  max_price: string | null;
  mean_price: string | null;
  median_price: string | null;
  /** Listings on the marketplace now. */
  quantity: number;
  /** Epoch ms (Skinport sends unix seconds). */
  created_at: number;
  updated_at: number;
}

/**
 * Parses one /v1/items entry. An item listed with no offer (quantity 0) must have no listing
 * prices; a priced item must have its minimum. Either contradiction is refused, never mended:
 * a listed item without min_price would become a false "none", a min_price with quantity 0 an
 * invented offer.
 */
function parseSkinportItem(raw: unknown, currency: Currency): SkinportItem {
  const o = asObj(raw, 'item');
  const quantity = int(o, 'quantity');
  const item: SkinportItem = {
    market_hash_name: str(o, 'market_hash_name'),
    currency: currencyOf(o, currency),
    suggested_price: skinportPrice(o, 'suggested_price'),
    item_page: link(o, 'item_page'),
    market_page: link(o, 'market_page'),
    min_price: skinportPrice(o, 'min_price'),
    max_price: skinportPrice(o, 'max_price'),
    mean_price: skinportPrice(o, 'mean_price'),
    median_price: skinportPrice(o, 'median_price'),
    quantity,
    created_at: seconds(o, 'created_at'),
    updated_at: seconds(o, 'updated_at'),
  };
  const listingPrices = ['min_price', 'max_price', 'mean_price', 'median_price'] as const;
  if (quantity === 0) {
    const priced = listingPrices.find((k) => item[k] !== null);
    if (priced) throw new AppError('invalid_item', `${priced} ${String(item[priced])} although quantity is 0`);
  } else if (item.min_price === null) {
    throw new AppError('invalid_item', `min_price missing although quantity is ${quantity}`);
  }
  return item;
}

/**
 * Our listing row of a Skinport item. /v1/items has no phase: a Doppler knife is one entry for
 * all its phases (the lowest of them, all listings counted), so its row has phase ''.
 */
function skinportListing(item: SkinportItem): ListingRow {
  return listingRow(identity(item.market_hash_name, null), {
    price: item.quantity === 0 ? null : item.min_price,
    count: item.quantity,
    template_id: null,
    item_page_url: item.item_page,
  });
}

export const skinportAdapter: Adapter = {
  format: 'skinport',
  kinds: ['LISTINGS'],
  limits: SKINPORT_LIMITS,
  // Both endpoints are public ("No authorization required"); the Basic key is for account ones.
  needsApiKey: false,
  requestHeaders: () => ({ 'accept-encoding': 'br' }),
  async *pages<K extends Kind>(kind: K, ctx: FetchContext): AsyncGenerator<Page<K>> {
    if (kind !== 'LISTINGS') throw new AppError('kind_unsupported', `${ctx.market} has no ${kind} on Skinport`);
    const currency = getMarket(ctx.market).currency;
    // tradable=0: every listing, trade-locked ones too: the marketplace's whole offer.
    const query = { app_id: SKINPORT_APP_ID, currency, tradable: 0 };
    // One request is the whole catalogue: there is no paging, so no end condition to get wrong,
    // and nothing to say before it has arrived whole.
    const items = await ctx.request(async () => {
      const body = await ctx.client.getJson(SKINPORT_ITEMS_PATH, query, ctx.signal);
      if (!Array.isArray(body)) throw malformed(ctx.market, `${SKINPORT_ITEMS_PATH} answered something not an array`);
      return body as unknown[];
    });
    yield collect<K>(items, (raw) => skinportListing(parseSkinportItem(raw, currency)) as RowMap[K]);
  },
};

// ---- /v1/sales/history ----
// Parsed and tested, not ingested: our kinds have no aggregate-window statistics (SALES are
// individual sales, HISTORY daily closes), so there is no event these rows could become yet.

/** One window of sold items: prices null when nothing sold in it (volume 0). */
interface SkinportSalesWindow {
  min: string | null;
  max: string | null;
  avg: string | null;
  median: string | null;
  volume: number;
}

type SkinportSalesWindowName = 'last_24_hours' | 'last_7_days' | 'last_30_days' | 'last_90_days';

export type SkinportSalesHistoryRow = {
  market_hash_name: string;
  /** From Skinport's optional `version` (a Doppler phase); '' when null or absent. */
  phase: PhaseOrNone;
  currency: Currency;
  item_page: string;
  market_page: string;
} & Record<SkinportSalesWindowName, SkinportSalesWindow>;

function salesWindow(o: Obj, key: SkinportSalesWindowName): SkinportSalesWindow {
  const w = asObj(o[key], key);
  const volume = int(w, 'volume');
  const window: SkinportSalesWindow = {
    min: skinportPrice(w, 'min'),
    max: skinportPrice(w, 'max'),
    avg: skinportPrice(w, 'avg'),
    median: skinportPrice(w, 'median'),
    volume,
  };
  const prices = ['min', 'max', 'avg', 'median'] as const;
  // Nothing sold: no statistic can exist. Something sold: each must (a null would read as "none").
  const wrong = prices.find((k) => (volume === 0) !== (window[k] === null));
  if (wrong) throw new AppError('invalid_item', `${key}.${wrong} ${String(window[wrong])} with volume ${volume}`);
  return window;
}

function parseSkinportSalesHistoryItem(raw: unknown, currency: Currency): SkinportSalesHistoryRow {
  const o = asObj(raw, 'item');
  return {
    market_hash_name: str(o, 'market_hash_name'),
    phase: normalizePhase(optStr(o, 'version')),
    currency: currencyOf(o, currency),
    item_page: link(o, 'item_page'),
    market_page: link(o, 'market_page'),
    last_24_hours: salesWindow(o, 'last_24_hours'),
    last_7_days: salesWindow(o, 'last_7_days'),
    last_30_days: salesWindow(o, 'last_30_days'),
    last_90_days: salesWindow(o, 'last_90_days'),
  };
}

/**
 * The body of GET /v1/sales/history (a JSON array) → typed rows; a row we refuse becomes a
 * rejected row, as `collect` does for pages. A body that is not an array is upstream_malformed.
 */
export function parseSkinportSalesHistory(
  body: unknown,
  currency: Currency,
): { rows: SkinportSalesHistoryRow[]; rejected: Rejected[] } {
  if (!Array.isArray(body))
    throw malformed('skinport', `${SKINPORT_SALES_HISTORY_PATH} answered something not an array`);
  const out: { rows: SkinportSalesHistoryRow[]; rejected: Rejected[] } = { rows: [], rejected: [] };
  for (const raw of body as unknown[]) {
    try {
      out.rows.push(parseSkinportSalesHistoryItem(raw, currency));
    } catch (err) {
      if (!(err instanceof AppError) || err.retryable) throw err;
      out.rejected.push({ reason: err.message, raw });
    }
  }
  return out;
}

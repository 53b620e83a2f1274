/**
 * The Steam Community Market (steam-market): the catalogue through `search/render`, one row per
 * market_hash_name with its lowest ask and the number of units listed. Steam has no official market
 * API; what follows is the reverse-engineered interface every client library uses.
 *
 * Sources (read 2026):
 * - https://github.com/Revadike/InternalSteamWebAPI/wiki/Search-Market: `GET
 *   https://steamcommunity.com/market/search/render/` with `norender=1` (JSON instead of HTML),
 *   `appid` (required), `start`, `count`, `query`, `sort_column` (name/price/quantity/popular),
 *   `sort_dir`, `search_descriptions`; answer {success, start, pagesize, total_count, searchdata
 *   {query, search_descriptions, total_count, pagesize, prefix, class_prefix}, results[{name,
 *   hash_name, sell_listings, sell_price, sell_price_text, app_icon, app_name, asset_description
 *   {appid, classid, instanceid, background_color, icon_url, tradable, name, name_color, type,
 *   market_name, market_hash_name, commodity}, sale_price_text}]}; "Rate limits: 20 per minute".
 * - https://tyrrrz.me/blog/parsing-steam-market: `GET /market/priceoverview/?appid&currency
 *   &market_hash_name` → {success, lowest_price, volume, median_price}, formatted strings
 *   ("$13.07", "710");
 *   https://case-sim.hashnode.dev/pulling-20-000-cs2-prices-from-the-steam-market-api-without-getting-rate-limited:
 *   "$11.43", volume "1,247", about 20 requests and then a 429 with no Retry-After header.
 * - github.com/offish/steam_community_market (steam_community_market/requests.py,
 *   market/price_overview.py, currencies.py): priceoverview answers HTTP 500 {success: false} for
 *   an unknown name, `volume` may be absent, volumes carry thousands separators ("59,613"); the
 *   ECurrency ids (1 USD, 3 EUR, 23 CNY).
 * - Valve's `v_currencyformat` and `g_rgCurrencyData` (steamcommunity.com/public/javascript/
 *   global.js, copied in many public repositories): USD "$" before the amount, "," thousands, "."
 *   decimals; EUR "€" after, " " thousands, "," decimals, and ",00" written ",--"; CNY "¥ " before;
 *   USD adds " USD" for a wallet outside the US.
 * - github.com/MMaakkss/cs-skins-prices-parser docs/steam-rate-limits.md (measured 2026-09):
 *   `count` is now ignored and pages hold 10, so the page size must be read from the answer, not
 *   assumed; a block outlasts two minutes of silence and probing keeps it alive.
 *
 * Quirks handled: prices come twice, as integer cents (`sell_price`, what a buyer pays including
 * fees) and as the formatted text, which is the only sign of the currency; a row whose two forms
 * disagree, or whose text is in another currency than the marketplace's, is refused rather than
 * guessed. An item listed with no offer reads sell_listings 0 and sell_price 0: price null,
 * count 0. `sale_price_text` is undocumented and not the lowest ask; it is not read. Steam hash
 * names carry no Doppler phase, so every row has phase ''. A 200 answer with `success` not true (or
 * a body that is not an object) is malformed and the page is retried.
 *
 * Capacity: at 10 results a page and 15 requests a minute, Steam's whole CS2 catalogue (about
 * 35,000 names) is some 3,500 requests, about four hours a pass (35 minutes at 100 a page): a
 * marketplace in this format cannot meet the five-minute listings refresh for the full catalogue.
 */
import {
  AppError,
  minorUnitsToFixed,
  getMarket,
  normalizePrice,
  parseDecimal,
  toFixedString,
  type Currency,
} from '@skinprices/domain';
import type { Adapter, FetchContext, UpstreamLimits } from '../adapter.js';
import { asObj, collect, identity, int, listingRow, malformed, minorPrice, str, type Obj } from '../normalize.js';
import type { Kind, ListingRow, Page, RowMap } from '../rows.js';

export const STEAM_SEARCH_PATH = '/market/search/render/';
/** Counter-Strike 2 (formerly CS:GO, the same app id). */
export const STEAM_APPID = 730;
/** The most `search/render` ever returned per page; Steam may send fewer (10 today). */
export const STEAM_PAGE = 100;

/** What the sources agree on: about 20 requests within a minute, the 21st answered with a bare 429. */
export const STEAM_BUDGET = { requests: 20, windowMs: 60_000 } as const;

/**
 * A token bucket admits at most `burst + rate × window` requests in any window, so 5 at once and
 * then one per 4 s (15 a minute) never exceed the budget of 20 a minute, whenever they start. The
 * ban after a 429 lasts "several minutes" and longer if probed: five minutes of silence, for every
 * job of the marketplace (the poller pauses its whole bucket).
 */
export const steamMarketLimits: UpstreamLimits = {
  requestsPerSecond: 15 / 60,
  burst: 5,
  bare429BackoffMs: 5 * 60_000,
};

interface PriceFormat {
  /** The whole text: symbol, integer part with optional grouping, decimals. */
  pattern: RegExp;
  /** Thousands separators the integer part may use. */
  grouping: RegExp;
}

/**
 * Steam's formats per currency (g_rgCurrencyData + v_currencyformat). The integer part is either
 * plain digits or groups of exactly three after the first, so "1,2345.00" cannot slip through.
 */
const FORMATS: Readonly<Record<Currency, PriceFormat>> = {
  USD: { pattern: /^\$(\d{1,3}(?:,\d{3})+|\d+)\.(\d{2})(?: USD)?$/, grouping: /,/g },
  // Valve's data says " " groups EUR; a non-breaking space or a "." are read too (the decimal
  // symbol is "," so neither can be mistaken for it). ",--" is Steam's ",00".
  EUR: { pattern: /^(\d{1,3}(?:([ \u00a0.])\d{3})(?:\2\d{3})*|\d+),(\d{2}|--)€$/, grouping: /[ \u00a0.]/g },
  CNY: { pattern: /^¥ ?(\d{1,3}(?:,\d{3})+|\d+)\.(\d{2})$/, grouping: /,/g },
};

function refuse(what: string): AppError {
  return new AppError('invalid_item', what);
}

/**
 * A price as Steam formats it ("$1,234.56", "11,43€", "5,--€", "¥ 71.50") → a fixed-point decimal
 * string with two decimals. "0.00" is returned as such: whether zero may stand for "no offer" is the
 * caller's decision. Anything else, including a price in another currency, is refused.
 */
export function parseSteamPrice(text: string, currency: Currency): string {
  const format = FORMATS[currency];
  const m = format.pattern.exec(text.trim());
  if (!m) throw refuse(`not a Steam ${currency} price: ${JSON.stringify(text)}`);
  const whole = (m[1] as string).replace(format.grouping, '');
  const cents = m[m.length - 1] === '--' ? '00' : (m[m.length - 1] as string);
  return toFixedString(parseDecimal(`${whole}.${cents}`, 'price'));
}

/** A volume as Steam writes it ("1,247", "7") → an integer. */
export function parseSteamVolume(text: string): number {
  const t = text.trim();
  if (!/^(\d{1,3}(?:,\d{3})+|\d+)$/.test(t)) throw refuse(`not a Steam volume: ${JSON.stringify(text)}`);
  const n = Number(t.replaceAll(',', ''));
  if (!Number.isSafeInteger(n)) throw refuse(`volume out of range: ${text}`);
  return n;
}

export interface SteamPriceOverview {
  /** Lowest ask; null when nothing is listed (Steam leaves the field out). */
  lowest_price: string | null;
  /** Median of recent sales; null without sales. */
  median_price: string | null;
  /** Units sold in the last 24 hours; null when Steam leaves it out. */
  volume: number | null;
}

/**
 * One `priceoverview` answer, in the currency it was asked for (`currency=` id). It is per item:
 * one request per market_hash_name at 20 a minute would take more than a day for the catalogue, so
 * catalogue cycles use search/render and this is for looking up single items (its median and
 * 24-hour volume have no kind of ours yet). A field Steam sent must parse and be > 0.
 */
export function parseSteamPriceOverview(body: unknown, currency: Currency): SteamPriceOverview {
  const o = asObj(body, 'priceoverview');
  if (o.success !== true) throw refuse(`priceoverview: success is ${JSON.stringify(o.success)}`);
  const price = (key: string): string | null => {
    const v = o[key];
    if (v === undefined || v === null) return null;
    if (typeof v !== 'string') throw refuse(`${key}: expected a string`);
    return normalizePrice(parseSteamPrice(v, currency), key);
  };
  const volume = o.volume;
  if (volume !== undefined && volume !== null && typeof volume !== 'string') throw refuse('volume: expected a string');
  return {
    lowest_price: price('lowest_price'),
    median_price: price('median_price'),
    volume: typeof volume === 'string' ? parseSteamVolume(volume) : null,
  };
}

/** One search result → a listing row; throws (refused row) for anything it cannot vouch for. */
function parseSteamResult(o: Obj, currency: Currency): ListingRow {
  const name = str(o, 'hash_name');
  const asset = asObj(o.asset_description, 'asset_description');
  if (asset.appid !== STEAM_APPID) throw refuse(`${name}: appid ${JSON.stringify(asset.appid)} is not CS2`);
  if (asset.market_hash_name !== name)
    throw refuse(`${name}: asset_description.market_hash_name is ${JSON.stringify(asset.market_hash_name)}`);
  const count = int(o, 'sell_listings');
  const cents = int(o, 'sell_price');
  const text = str(o, 'sell_price_text');
  const shown = parseSteamPrice(text, currency);
  if (shown !== minorUnitsToFixed(cents))
    throw refuse(`${name}: sell_price_text ${text} disagrees with sell_price ${cents}`);
  if (count === 0 && cents !== 0) throw refuse(`${name}: a price of ${text} with no listing`);
  return listingRow(identity(name, ''), {
    // 0 with no listing is "no offer"; 0 with listings is refused there.
    price: minorPrice(o, 'sell_price', count),
    count,
    template_id: null,
    item_page_url: null,
  });
}

/** The envelope of one search page; anything off is malformed, so the page is retried. */
function searchPage(market: string, body: unknown, start: number): { results: unknown[]; total: number } {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw malformed(market, `search/render at ${start}: answer is not an object`);
  const o = body as Obj;
  if (o.success !== true) throw malformed(market, `search/render at ${start}: success is ${JSON.stringify(o.success)}`);
  const total = o.total_count;
  if (typeof total !== 'number' || !Number.isSafeInteger(total) || total < 0)
    throw malformed(market, `search/render at ${start}: total_count is ${JSON.stringify(total)}`);
  if (!Array.isArray(o.results)) throw malformed(market, `search/render at ${start}: no results array`);
  // An empty page while the total says more follow is a glitch, not the end of the catalogue.
  if (o.results.length === 0 && start < total)
    throw malformed(market, `search/render: empty page at ${start} of ${total}`);
  return { results: o.results, total };
}

export const steamMarketAdapter: Adapter = {
  format: 'steam-market',
  kinds: ['LISTINGS'],
  limits: steamMarketLimits,
  needsApiKey: false,
  // No key and no required header. Compressed answers are asked for: a page of 100 results is
  // about 150 kB of JSON, and the client decodes gzip.
  requestHeaders: () => ({ 'accept-encoding': 'gzip' }),
  async *pages<K extends Kind>(kind: K, ctx: FetchContext): AsyncGenerator<Page<K>> {
    if (kind !== 'LISTINGS') throw new AppError('kind_unsupported', `${ctx.market} has no ${kind}`);
    // Signed out, search/render answers in USD whatever is asked; a marketplace pointed at this
    // format in another currency must get its answers in that currency (the text says which).
    const currency = getMarket(ctx.market).currency;
    let total = Infinity;
    // Advance by what arrived: Steam ignores `count` today and sends 10 a page.
    for (let start = 0; start < total;) {
      const query = {
        appid: STEAM_APPID,
        norender: 1,
        start,
        count: STEAM_PAGE,
        sort_column: 'name',
        sort_dir: 'asc',
        query: '',
        search_descriptions: 0,
      };
      const page = await ctx.request(async () =>
        searchPage(ctx.market, await ctx.client.getJson(STEAM_SEARCH_PATH, query, ctx.signal), start),
      );
      total = page.total;
      if (page.results.length === 0) return;
      start += page.results.length;
      yield collect<K>(page.results, (raw) => parseSteamResult(asObj(raw, 'result'), currency) as RowMap[K]);
    }
  },
};

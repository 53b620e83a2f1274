/**
 * The Steam Community Market's shape (see packages/marketplaces/src/adapters/steam-market.ts for
 * the sources): `GET /market/search/render/?appid=730&norender=1&start&count&sort_column&sort_dir`
 * pages the catalogue (≤ 100 a page, `total_count`), prices as integer cents and as Steam's
 * formatted text ("$1,234.56", "1 234,56€", "5,--€", "¥ 71.50"); `GET /market/priceoverview/` answers
 * one item with formatted strings (volume "1,247") and leaves out what it has not got.
 *
 * Steam's hash names carry no Doppler phase, so the model's phase rows of one name are one Steam
 * item: the lowest price of its phases and the sum of their listings (a name whose listed rows
 * have no offer is sell_listings 0, "$0.00"). `/_sim/truth` aggregated the same way is what this
 * answers.
 *
 * Rate limit: more than STEAM_RATE_LIMIT.requests requests to one endpoint within
 * STEAM_RATE_LIMIT.windowMs answer a bare 429 (no Retry-After, body `null`). Every request counts,
 * refused ones too, so a client that keeps knocking keeps the ban alive, as reported of Steam. The
 * window runs on the simulator's clock like everything it serves: a test that freezes the clock
 * holds a ban until it moves the clock on.
 */
import { DAY_MS, getMarket, type Currency } from '@skinprices/domain';
import type { CatalogueItem } from '../catalogue.js';
import type { MarketModel } from '../model.js';
import { badRequest, intParam, ok, type Route, type SimContext, type UpstreamResponse } from './types.js';

/** About 20 requests a minute per endpoint, then a bare 429 (the sources agree on this much). */
export const STEAM_RATE_LIMIT = { requests: 20, windowMs: 60_000 } as const;
/** Largest page search/render serves; more is capped, as Steam did before it went to 10. */
export const STEAM_MAX_COUNT = 100;
const DEFAULT_COUNT = 10;
const APPID = 730;
const CURRENCY_ID: Record<Currency, number> = { USD: 1, EUR: 3, CNY: 23 };
const APP_ICON =
  'https://cdn.fastly.steamstatic.com/steamcommunity/public/images/apps/730/8dbc71957312bbd3baea65848b545be9eae2a355.jpg';

// ---- the rate limit: request times per simulator (its model), marketplace and endpoint ----

const seen = new WeakMap<MarketModel, Map<string, number[]>>();

/** Records a request at the simulator's now; false when it is one too many for the window. */
function admitted(ctx: SimContext, endpoint: string): boolean {
  const now = ctx.clock.now();
  let byKey = seen.get(ctx.model);
  if (!byKey) seen.set(ctx.model, (byKey = new Map()));
  const key = `${ctx.market}\u0000${endpoint}`;
  const times = (byKey.get(key) ?? []).filter((t) => t > now - STEAM_RATE_LIMIT.windowMs);
  times.push(now);
  byKey.set(key, times);
  return times.length <= STEAM_RATE_LIMIT.requests;
}

/** Steam's answer to one request too many: no Retry-After, nothing to read. */
const banned = (): UpstreamResponse => ({ status: 429, body: null });

// ---- formatting as Steam does (g_rgCurrencyData, v_currencyformat), in integer minor units ----

const group = (whole: number, sep: string): string => String(whole).replace(/\B(?=(\d{3})+(?!\d))/g, sep);

export function formatSteamPrice(minor: number, currency: Currency): string {
  const whole = Math.floor(minor / 100);
  const cents = String(minor % 100).padStart(2, '0');
  switch (currency) {
    case 'USD':
      return `$${group(whole, ',')}.${cents}`;
    case 'EUR':
      return `${group(whole, ' ')},${cents === '00' ? '--' : cents}€`;
    case 'CNY':
      return `¥ ${group(whole, ',')}.${cents}`;
  }
}

const formatCount = (n: number): string => group(n, ',');

// ---- the catalogue as Steam sees it: one item per name ----

interface SteamItem {
  name: string;
  first: CatalogueItem;
  /** Lowest offer over the name's phase rows; null when none has one. */
  priceMinor: number | null;
  count: number;
}

function steamItems(ctx: SimContext): SteamItem[] {
  const now = ctx.clock.now();
  return ctx.model.memo(ctx.market, 'steam-market', now, () => {
    const byName = new Map<string, SteamItem>();
    for (const l of ctx.model.listings(ctx.market, now)) {
      const name = l.item.marketHashName;
      const cur = byName.get(name);
      if (!cur) {
        byName.set(name, { name, first: l.item, priceMinor: l.priceMinor, count: l.count });
        continue;
      }
      cur.count += l.count;
      if (l.priceMinor !== null && (cur.priceMinor === null || l.priceMinor < cur.priceMinor))
        cur.priceMinor = l.priceMinor;
    }
    return [...byName.values()];
  });
}

const byName = (a: SteamItem, b: SteamItem): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
const SORTS: Record<string, (a: SteamItem, b: SteamItem) => number> = {
  name: byName,
  price: (a, b) => (a.priceMinor ?? 0) - (b.priceMinor ?? 0) || byName(a, b),
  quantity: (a, b) => a.count - b.count || byName(a, b),
  // Steam's default; popularity is not modelled, so the deepest books come first.
  popular: (a, b) => b.count - a.count || byName(a, b),
};

const RARITY: Record<CatalogueItem['category'], string> = {
  weapon: 'Classified Rifle',
  knife: '★ Covert Knife',
  gloves: '★ Extraordinary Gloves',
  sticker: 'High Grade Sticker',
  case: 'Base Grade Container',
  agent: 'Superior Agent',
  charm: 'High Grade Charm',
  other: 'Base Grade Collectible',
};

/** asset_description.type: rarity and class, with StatTrak™ or Souvenir as Steam writes them. */
function typeOf(item: CatalogueItem): string {
  const base = RARITY[item.category];
  if (item.stattrak) return base.startsWith('★ ') ? `★ StatTrak™ ${base.slice(2)}` : `StatTrak™ ${base}`;
  return item.souvenir ? `Souvenir ${base}` : base;
}

function render(s: SteamItem, currency: Currency): unknown {
  const minor = s.priceMinor ?? 0;
  const commodity = s.first.category === 'case' || s.first.category === 'sticker' ? 1 : 0;
  return {
    name: s.name,
    hash_name: s.name,
    sell_listings: s.priceMinor === null ? 0 : s.count,
    sell_price: minor,
    sell_price_text: formatSteamPrice(minor, currency),
    app_icon: APP_ICON,
    app_name: 'Counter-Strike 2',
    asset_description: {
      appid: APPID,
      classid: String(1_000_000_000 + s.first.index),
      instanceid: '0',
      background_color: '',
      icon_url: `sim-icon-${s.first.index}`,
      tradable: 1,
      name: s.name,
      name_color: s.first.stattrak ? 'CF6A32' : s.first.souvenir ? 'FFD700' : 'D2D2D2',
      type: typeOf(s.first),
      market_name: s.name,
      market_hash_name: s.name,
      commodity,
    },
    // Undocumented; in the samples seen it is about 97 % of sell_price. Integer arithmetic.
    sale_price_text: formatSteamPrice(Math.floor((minor * 97) / 100), currency),
  };
}

// ---- routes ----

const search: Route = (ctx, q) => {
  if (!admitted(ctx, 'search')) return banned();
  if (q.get('appid') !== String(APPID)) return badRequest('the simulator holds CS2 (appid 730) only');
  const start = intParam(q, 'start', 0, 0, Number.MAX_SAFE_INTEGER);
  const count = intParam(q, 'count', DEFAULT_COUNT, 1, STEAM_MAX_COUNT);
  if (Number.isNaN(start) || Number.isNaN(count)) return badRequest('start and count must be integers');
  const sort = SORTS[q.get('sort_column') ?? 'popular'] ?? SORTS.popular!;
  const desc = q.get('sort_dir') === 'desc';
  const all = [...steamItems(ctx)].sort((a, b) => (desc ? -sort(a, b) : sort(a, b)));
  const searchdata = {
    query: q.get('query') ?? '',
    search_descriptions: q.get('search_descriptions') === '1',
    total_count: all.length,
    pagesize: count,
    prefix: 'searchResults',
    class_prefix: 'market',
  };
  const page = all.slice(start, start + count);
  const head = { success: true, start, pagesize: count, total_count: all.length };
  // Without norender=1 Steam renders the page as HTML inside the JSON.
  if (q.get('norender') !== '1')
    return ok({ ...head, results_html: page.map((s) => `<div class="market_listing_row">${s.name}</div>`).join('') });
  const currency = getMarket(ctx.market).currency;
  return ok({ ...head, searchdata, results: page.map((s) => render(s, currency)) });
};

/** Lower middle of the sorted prices: an integer, as every Steam price is. */
function median(sorted: readonly number[]): number {
  return sorted[Math.floor((sorted.length - 1) / 2)] as number;
}

const priceOverview: Route = (ctx, q) => {
  if (!admitted(ctx, 'priceoverview')) return banned();
  const currency = getMarket(ctx.market).currency;
  // Steam converts to any currency asked for; the simulator holds one per marketplace and answers
  // another the way Steam answers what it cannot: HTTP 500 {success: false}.
  const unknown: UpstreamResponse = { status: 500, body: { success: false } };
  if (q.get('appid') !== String(APPID) || (q.get('currency') ?? '1') !== String(CURRENCY_ID[currency])) return unknown;
  const name = q.get('market_hash_name') ?? '';
  const item = steamItems(ctx).find((s) => s.name === name);
  if (!item) return unknown;
  const now = ctx.clock.now();
  const sales = ctx.extras
    .sales(ctx.market, now - DAY_MS, now)
    .filter((s) => s.item.marketHashName === name)
    .map((s) => s.priceMinor)
    .sort((a, b) => a - b);
  const body: Record<string, unknown> = { success: true };
  if (item.priceMinor !== null) body.lowest_price = formatSteamPrice(item.priceMinor, currency);
  if (sales.length > 0) {
    body.volume = formatCount(sales.length);
    body.median_price = formatSteamPrice(median(sales), currency);
  }
  return { status: 200, body, headers: { 'cache-control': 'public,max-age=15' } };
};

// Steam's paths end in a slash; the same page answers without it.
export const steamMarketRoutes: Record<string, Route> = {
  '/market/search/render/': search,
  '/market/search/render': search,
  '/market/priceoverview/': priceOverview,
  '/market/priceoverview': priceOverview,
};

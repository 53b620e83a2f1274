/**
 * CSFloat's public listings API (https://docs.csfloat.com/#get-all-listings), served from the
 * model: every individual listing, `GET /api/v1/listings` with `cursor` (opaque, absent on the last
 * page), `limit` (default 50, capped at 50), `sort_by`, `type`, `category`, `market_hash_name`;
 * the answer `{data: [...], cursor}`; `price` in integer cents; the Doppler phase in `item.phase`.
 * CSFloat tells phases apart, so the model's phase rows stay separate listings (no aggregation):
 * the lowest buy-now price and the number of buy-now listings per (name, phase) equal the truth's
 * price and count, for every row that has a listing (a row with none is simply absent here).
 *
 * Quirks kept: no `Authorization` header → 401; every answer carries `x-ratelimit-limit`,
 * `-remaining` (decreasing per request in a fixed window, per key) and `-reset` (epoch seconds of
 * the window's end), and a request past the budget is a 429 with no Retry-After; some items have
 * an auction whose `price` is its current bid, below the cheapest buy-now offer, which a client
 * must not take for a listing price (only when `type` does not ask for `buy_now`).
 *
 * Listing prices are the market's native minor units: CSFloat is a USD marketplace, and the
 * format is meant for the USD marketplaces of the registry.
 */
import type { CatalogueItem } from '../catalogue.js';
import { BUCKET_MS, marketIndex, type MarketModel } from '../model.js';
import { hash32, unit } from '../noise.js';
import { badRequest, intParam, ok, type Route, type SimContext, type UpstreamResponse } from './types.js';

/** Fixed-window budget per key: the figure reported for listings (csfloat/docs#8). */
export interface CsfloatRateLimit {
  requests: number;
  windowMs: number;
  /**
   * Wall clock, not the simulated one: a rate limit is about how fast a client really asks, and
   * the poller reads `x-ratelimit-reset` against its own clock.
   */
  now: () => number;
}

const DEFAULT_LIMIT: CsfloatRateLimit = { requests: 200, windowMs: 3_600_000, now: Date.now };
export const MAX_LIMIT = 50;

const SORTS = [
  'lowest_price',
  'highest_price',
  'most_recent',
  'expires_soon',
  'lowest_float',
  'highest_float',
  'best_deal',
  'highest_discount',
  'float_rank',
  'num_bids',
] as const;
type Sort = (typeof SORTS)[number];

/** Noise purposes of this format (the model's own stop at 14). */
const CSF = { auction: 101, float: 102, seed: 103, age: 104, def: 105, sticker: 106 } as const;

interface CsfloatListing {
  id: string;
  created_at: string;
  type: 'buy_now' | 'auction';
  price: number;
  state: 'listed';
  seller: Record<string, unknown>;
  item: Record<string, unknown>;
  is_seller: boolean;
  min_offer_price: number;
  max_offer_discount: number;
  is_watchlisted: boolean;
  watchers: number;
  auction_details?: Record<string, unknown>;
}

/** Float bounds of each wear (CS2's). */
const WEAR_BOUNDS: Record<string, [number, number]> = {
  'Factory New': [0, 0.07],
  'Minimal Wear': [0.07, 0.15],
  'Field-Tested': [0.15, 0.38],
  'Well-Worn': [0.38, 0.45],
  'Battle-Scarred': [0.45, 1],
};

const pad = (n: number, width: number) => String(n).padStart(width, '0');

/** The item object of one listing (every documented field; values made up but stable). */
function itemOf(ctx: SimContext, i: CatalogueItem, k: number): Record<string, unknown> {
  const seed = ctx.model.seed;
  const bounds = i.exterior ? WEAR_BOUNDS[i.exterior] : undefined;
  const floatValue = bounds ? bounds[0] + (bounds[1] - bounds[0]) * unit(seed, CSF.float, i.index, k) : undefined;
  const assetId = String(20_000_000_000 + (hash32(seed, i.index, k) % 9_000_000_000));
  const name = i.marketHashName;
  const [itemName] = name.split(' (');
  const sticker = i.category === 'weapon' && unit(seed, CSF.sticker, i.index, k) < 0.3;
  return {
    asset_id: assetId,
    // Not the game's real def index; no client of ours reads it.
    def_index: 1 + (hash32(seed, CSF.def, ctx.model.nameIndex.get(name) ?? i.index) % 600),
    ...(i.paintIndex === null
      ? {}
      : { paint_index: i.paintIndex, paint_seed: Math.floor(unit(seed, CSF.seed, i.index, k) * 1001) }),
    ...(floatValue === undefined ? {} : { float_value: floatValue }),
    icon_url: `-9a81dlWLwJ2UUGcVs_nsVtzdOEdtWwKGZZLQHTxDZ7I56KU0Zwwo4NUX4oFJZEHLbXH5Ap${pad(i.index, 6)}`,
    d_param: String(hash32(seed, i.index, k, 7)),
    is_stattrak: i.stattrak,
    is_souvenir: i.souvenir,
    rarity: 1 + (i.index % 6),
    quality: i.stattrak ? 9 : i.souvenir ? 12 : 4,
    market_hash_name: name,
    ...(i.phase ? { phase: i.phase } : {}),
    stickers: sticker
      ? [
          {
            stickerId: 1060,
            slot: 3,
            icon_url: 'columbus2016/nv_holo.fbbf7dc3ef16ade69ac294589fbe97f0a3169003.png',
            name: 'Sticker | Team EnVyUs (Holo) | MLG Columbus 2016',
            scm: { price: 736, volume: 1 },
          },
        ]
      : [],
    tradable: 0,
    inspect_link: `steam://rungame/730/76561202255233023/+csgo_econ_action_preview%20S76561198084749846A${assetId}D${String(hash32(seed, i.index, k, 7))}`,
    has_screenshot: i.exterior !== null,
    scm: { price: 0, volume: 0 },
    item_name: itemName,
    ...(i.exterior ? { wear_name: i.exterior } : {}),
    description: '',
    collection: '',
    badges: [],
  };
}

const SELLER = {
  avatar: 'https://avatars.steamstatic.com/0000000000000000000000000000000000000000_full.jpg',
  flags: 48,
  online: true,
  stall_public: true,
  statistics: { median_trade_time: 236, total_failed_trades: 0, total_trades: 24, total_verified_trades: 24 },
  obfuscated_id: '9169061817522033479',
};

/** Every listing of the market now: the model's count of buy-now listings per row, plus auctions. */
function expand(ctx: SimContext): CsfloatListing[] {
  const now = ctx.clock.now();
  const bucket = Math.floor(now / BUCKET_MS) * BUCKET_MS;
  const m = marketIndex(ctx.market);
  const seed = ctx.model.seed;
  const all: CsfloatListing[] = [];
  const listing = (i: CatalogueItem, k: number, type: 'buy_now' | 'auction', price: number): CsfloatListing => ({
    // CSFloat ids are decimal strings of a 64-bit integer.
    id: `9${pad(m, 2)}${pad(i.index, 8)}${pad(k, 5)}`,
    created_at: new Date(bucket - Math.floor(unit(seed, CSF.age, i.index, k) * 14 * 86_400_000)).toISOString(),
    type,
    price,
    state: 'listed',
    seller: SELLER,
    item: itemOf(ctx, i, k),
    is_seller: false,
    min_offer_price: Math.max(1, Math.round(price * 0.85)),
    max_offer_discount: 1500,
    is_watchlisted: false,
    watchers: k % 3,
  });
  for (const l of ctx.model.listings(ctx.market, now)) {
    if (l.priceMinor === null) continue;
    const i = l.item;
    for (let k = 0; k < l.count; k++) {
      // The cheapest listing first per item; the others a little dearer each.
      const price = k === 0 ? l.priceMinor : Math.round(l.priceMinor * (1 + 0.007 * k + 0.001 * ((i.index + k) % 7)));
      all.push(listing(i, k, 'buy_now', price));
    }
    if (unit(seed, CSF.auction, i.index, m) < 0.2) {
      // The current bid of an auction: below every buy-now offer, and no price anyone can pay now.
      const bid = Math.max(1, Math.floor(l.priceMinor * 0.8));
      all.push({
        ...listing(i, 99_999, 'auction', bid),
        auction_details: {
          reserve_price: bid,
          top_bid: null,
          expires_at: new Date(bucket + 3 * 86_400_000).toISOString(),
          min_next_bid: bid + 1,
        },
      });
    }
  }
  return all;
}

function sorted(listings: CsfloatListing[], sort: Sort): CsfloatListing[] {
  const byId = (a: CsfloatListing, b: CsfloatListing) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  const float = (l: CsfloatListing) => (l.item.float_value as number | undefined) ?? 2;
  const cmp: Partial<Record<Sort, (a: CsfloatListing, b: CsfloatListing) => number>> = {
    lowest_price: (a, b) => a.price - b.price || byId(a, b),
    highest_price: (a, b) => b.price - a.price || byId(a, b),
    most_recent: (a, b) => b.created_at.localeCompare(a.created_at) || byId(a, b),
    lowest_float: (a, b) => float(a) - float(b) || byId(a, b),
    highest_float: (a, b) => float(b) - float(a) || byId(a, b),
  };
  // The other documented orders (best_deal …) rank by data the model does not have: id order.
  return [...listings].sort(cmp[sort] ?? byId);
}

const CATEGORY: Record<string, ((l: CsfloatListing) => boolean) | undefined> = {
  '0': () => true,
  '1': (l) => !l.item.is_stattrak && !l.item.is_souvenir,
  '2': (l) => l.item.is_stattrak === true,
  '3': (l) => l.item.is_souvenir === true,
};

/** The cursor is opaque to clients; here it is the offset of the next page. */
const encodeCursor = (offset: number) => Buffer.from(JSON.stringify({ o: offset })).toString('base64url');
function decodeCursor(s: string): number | undefined {
  try {
    const o = (JSON.parse(Buffer.from(s, 'base64url').toString('utf8')) as { o?: unknown }).o;
    return typeof o === 'number' && Number.isSafeInteger(o) && o >= 0 ? o : undefined;
  } catch {
    return undefined;
  }
}

function listings(ctx: SimContext, q: URLSearchParams): UpstreamResponse {
  const limit = intParam(q, 'limit', MAX_LIMIT, 1, MAX_LIMIT);
  if (Number.isNaN(limit)) return badRequest('limit must be an integer');
  const sort = (q.get('sort_by') ?? 'best_deal') as Sort;
  if (!SORTS.includes(sort)) return badRequest(`sort_by: one of ${SORTS.join(', ')}`);
  const type = q.get('type');
  if (type !== null && type !== 'buy_now' && type !== 'auction') return badRequest('type: buy_now or auction');
  const category = CATEGORY[q.get('category') ?? '0'];
  if (!category) return badRequest('category: 0, 1, 2 or 3');
  const rawCursor = q.get('cursor');
  const offset = rawCursor ? decodeCursor(rawCursor) : 0;
  if (offset === undefined) return badRequest('invalid cursor');
  const name = q.get('market_hash_name');
  const all = ctx.model.memo(ctx.market, 'csfloat', ctx.clock.now(), () => expand(ctx));
  const chosen = all.filter(
    (l) => (type === null || l.type === type) && (name === null || l.item.market_hash_name === name) && category(l),
  );
  const page = sorted(chosen, sort).slice(offset, offset + limit);
  const next = offset + page.length;
  return ok(next < chosen.length && page.length > 0 ? { data: page, cursor: encodeCursor(next) } : { data: page });
}

/** Requests used per (market, key) in the current window, per simulator (its model). */
const windows = new WeakMap<MarketModel, Map<string, { window: number; used: number }>>();

/** The routes with a given rate limit (tests use a small one). */
export function csfloatRoutesWith(limit: CsfloatRateLimit = DEFAULT_LIMIT): Record<string, Route> {
  return {
    '/api/v1/listings': (ctx, q, req) => {
      const key = req.headers.authorization;
      if (!key) return { status: 401, body: { message: 'unauthorized' } };
      let perModel = windows.get(ctx.model);
      if (!perModel) windows.set(ctx.model, (perModel = new Map()));
      const now = limit.now();
      const window = Math.floor(now / limit.windowMs);
      const slot = `${ctx.market}\u0000${key}`;
      let w = perModel.get(slot);
      if (!w || w.window !== window) perModel.set(slot, (w = { window, used: 0 }));
      const headers = (remaining: number) => ({
        'x-ratelimit-limit': String(limit.requests),
        'x-ratelimit-remaining': String(remaining),
        'x-ratelimit-reset': String(Math.ceil(((window + 1) * limit.windowMs) / 1000)),
      });
      if (w.used >= limit.requests) return { status: 429, body: { message: 'too many requests' }, headers: headers(0) };
      w.used++;
      return { ...listings(ctx, q), headers: headers(limit.requests - w.used) };
    },
  };
}

export const csfloatRoutes: Record<string, Route> = csfloatRoutesWith();

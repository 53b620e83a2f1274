/**
 * DMarket's public market items API, served from the model: every individual offer of the CS2
 * market, `GET /exchange/v1/market/items` with `gameId` (`a8db` is CS2), `currency`, `limit`
 * (default 50, at most 100), `cursor` (opaque; the first page has none), `orderBy`, `orderDir`,
 * `title`, `priceFrom`/`priceTo` (cents), `types` and the legacy `offset`; the answer
 * `{objects, total, cursor}` with `price: {DMC, USD}` as strings of cents and the CS2 attributes
 * under `extra` in DMarket's spelling (`exterior: "field-tested"`, `phase: "phase-2"`,
 * `phaseTitle: "Phase 2"`). Sources: see the adapter (packages/marketplaces/src/adapters/dmarket.ts).
 *
 * DMarket tells Doppler phases apart (`extra.phase`), so the model's phase rows stay separate
 * items and nothing is aggregated: the lowest `price.USD` and the number of offers per (title,
 * phase) equal the truth's price and count for every row that has a listing (a row with none is
 * simply absent here, as on DMarket).
 *
 * Quirks kept: the last page's cursor is the empty string; `total.offers` stops at 10,000;
 * offset paging ends in a 400 past the 100th page; `suggestedPrice`, `recommendedPrice`,
 * `instantPrice` and `discountPrice` lie below the cheapest offer, and `price.DMC` is another
 * currency, so a client that reads anything but `price.USD` gets prices wrong; anonymous
 * clients get 2 requests per second (one fixed one-second window, shared: DMarket counts per IP
 * and every client of a simulator has the same one), every answer says so in X-RateLimit-*-Second
 * and RateLimit-* headers, and a request past the budget is a 429 without Retry-After.
 *
 * Offer prices are the market's native minor units: DMarket prices in US cents, and the format is
 * meant for the USD marketplaces of the registry. Values of fields no client of ours reads (ids,
 * images, fees, DMC amounts) are made up but stable.
 */
import type { CatalogueItem } from '../catalogue.js';
import { BUCKET_MS, marketIndex, type MarketModel } from '../model.js';
import { hash32, unit } from '../noise.js';
import { intParam, ok, type Route, type SimContext, type UpstreamResponse } from './types.js';

export const DMARKET_PATH = '/exchange/v1/market/items';
export const MAX_LIMIT = 100;
const DEFAULT_LIMIT = 50;
/** Offset paging stops after this many pages (DMarket's blog, "Changes in the API"). */
const MAX_OFFSET_PAGES = 100;

/** Game ids DMarket knows; only CS2 has offers here. */
const GAMES = new Set(['a8db', '9a92', 'tf2', 'rust']);
const ORDER_BY = ['title', 'price', 'updated', 'best_deals', 'best_discount', 'personal'] as const;
type OrderBy = (typeof ORDER_BY)[number];

/** Noise purposes of this format (the model's stop at 14, CSFloat's at 106). */
const DM = { p2p: 201, float: 202, seed: 203, age: 204, lock: 205, discount: 206, favorite: 207 } as const;

export interface DmarketOptions {
  /** Requests per fixed window (anonymous: 2 a second). */
  requests: number;
  windowMs: number;
  /**
   * Wall clock, not the simulated one: a rate limit is about how fast a client really asks, and
   * the poller reads the reset against its own clock.
   */
  now: () => number;
  /** `total.offers` stops here. */
  totalCap: number;
}

const DEFAULTS: DmarketOptions = { requests: 2, windowMs: 1000, now: Date.now, totalCap: 10_000 };

type Money = { DMC: string; USD: string };

interface DmarketOffer {
  itemId: string;
  type: 'dmarket' | 'p2p';
  amount: number;
  title: string;
  price: Money;
  createdAt: number;
  discount: number;
  extra: Record<string, unknown> & { floatValue?: number };
  [field: string]: unknown;
}

/** Grpc-gateway's error shape (the swagger's runtimeError); code 3 is INVALID_ARGUMENT. */
const invalid = (message: string): UpstreamResponse => ({
  status: 400,
  body: { error: message, code: 3, message },
});

const pad = (n: number, width: number) => String(n).padStart(width, '0');
const hex = (n: number, width: number) => (n >>> 0).toString(16).padStart(width, '0').slice(-width);
/** US cents → DMarket's money object. DMC is DMarket's own coin: a made-up amount, not cents. */
const money = (cents: number): Money => ({ DMC: String(cents * 103), USD: String(cents) });

/** Float bounds of each wear (CS2's). */
const WEAR_BOUNDS: Record<string, [number, number]> = {
  'Factory New': [0, 0.07],
  'Minimal Wear': [0.07, 0.15],
  'Field-Tested': [0.15, 0.38],
  'Well-Worn': [0.38, 0.45],
  'Battle-Scarred': [0.45, 1],
};
const WEAR_TAG: Record<string, string> = {
  'Factory New': 'FN',
  'Minimal Wear': 'MW',
  'Field-Tested': 'FT',
  'Well-Worn': 'WW',
  'Battle-Scarred': 'BS',
};
const QUALITIES = ['consumer grade', 'industrial grade', 'mil-spec', 'restricted', 'classified', 'covert'];
const RIFLES = /^(AK-47|M4A4|M4A1-S|FAMAS|Galil AR|AUG|SG 553)$/;
const SNIPERS = /^(AWP|SSG 08|SCAR-20|G3SG1)$/;

/** "Black Pearl" → "black-pearl", "Phase 2" → "phase-2": DMarket's stored spelling. */
const phaseSlug = (phase: string) => phase.toLowerCase().replace(/ /g, '-');

function itemType(i: CatalogueItem, weapon: string): string {
  if (i.category !== 'weapon') return i.category;
  if (RIFLES.test(weapon)) return 'rifle';
  if (SNIPERS.test(weapon)) return 'sniper rifle';
  return 'weapon';
}

/** The `extra` object of one offer (every field a client reads; values made up but stable). */
function extraOf(ctx: SimContext, i: CatalogueItem, k: number, id: string): DmarketOffer['extra'] {
  const seed = ctx.model.seed;
  const name = i.marketHashName.replace(/ \((Factory New|Minimal Wear|Field-Tested|Well-Worn|Battle-Scarred)\)$/, '');
  const weapon = (name.split(' | ')[0] ?? name).replace(/^(★ )?(StatTrak™ |Souvenir )?/, '');
  const type = itemType(i, weapon);
  const bounds = i.exterior ? WEAR_BOUNDS[i.exterior] : undefined;
  const u = unit(seed, DM.float, i.index, k);
  const float = bounds ? Number((bounds[0] + (bounds[1] - bounds[0]) * u).toFixed(10)) : undefined;
  const assetId = String(30_000_000_000 + (hash32(seed, i.index, k) % 9_000_000_000));
  const d = String(hash32(seed, i.index, k, 7));
  const lockDays = unit(seed, DM.lock, i.index, k) < 0.25 ? 1 + (hash32(seed, DM.lock, i.index, k) % 7) : 0;
  const wear =
    i.exterior !== null
      ? { exterior: i.exterior.toLowerCase() }
      : i.category === 'knife'
        ? { exterior: 'not painted' }
        : {};
  return {
    nameColor: i.stattrak ? 'CF6A32' : i.souvenir ? 'FFD700' : 'D2D2D2',
    backgroundColor: '000000',
    tradable: lockDays === 0,
    offerId: id.replace(/^.{4}/, 'f0ff'),
    isNew: k === 0 && i.index % 5 === 0,
    gameId: 'a8db',
    name,
    categoryPath: `${type}/${weapon.toLowerCase().replace(/[^a-z0-9]+/g, '-')}`,
    viewAtSteam: `steam://rungame/730/76561202255233023/+csgo_econ_action_preview%20S76561198084749846A${assetId}D${d}`,
    groupId: name.toLowerCase().replace(/[^a-z0-9]+/g, '-'),
    linkId: `${hex(hash32(seed, i.index, 11), 8)}-0000-4000-8000-${pad(i.index, 12)}`,
    ...wear,
    quality: i.category === 'knife' || i.category === 'gloves' ? 'covert' : QUALITIES[i.index % QUALITIES.length],
    category: i.stattrak ? 'stattrak™' : i.souvenir ? 'souvenir' : i.category === 'knife' ? '★' : 'normal',
    tradeLockDuration: lockDays * 86_400,
    itemType: type,
    ...(float === undefined || !i.exterior
      ? {}
      : {
          floatValue: float,
          floatPartValue: `${WEAR_TAG[i.exterior]}-${Math.min(4, Math.floor(u * 5))}`,
          paintSeed: Math.floor(unit(seed, DM.seed, i.index, k) * 1001),
        }),
    ...(i.paintIndex === null ? {} : { paintIndex: i.paintIndex }),
    ...(i.phase ? { phase: phaseSlug(i.phase), phaseTitle: i.phase } : {}),
    inspectInGame: `steam://rungame/730/76561202255233023/+csgo_econ_action_preview%20S76561198084749846A${assetId}D${d}`,
    collection: [],
    saleRestricted: false,
    inGameAssetID: assetId,
    emissionSerial: '',
    sagaAddress: '',
  };
}

const FEES = (() => {
  const rule = (percentage: string) => ({ default: { percentage, minFee: money(1) } });
  const channel = { sell: rule('5.00'), instantSell: rule('7.00'), exchange: rule('5.00') };
  return { f2f: { ...channel, sell: rule('2.00') }, dmarket: channel };
})();

/** Every offer of the market now: the model's count of offers per row, the cheapest first. */
function expand(ctx: SimContext): DmarketOffer[] {
  const now = ctx.clock.now();
  const bucket = Math.floor(now / BUCKET_MS) * BUCKET_MS;
  const m = marketIndex(ctx.market);
  const seed = ctx.model.seed;
  const all: DmarketOffer[] = [];
  for (const l of ctx.model.listings(ctx.market, now)) {
    if (l.priceMinor === null) continue;
    const i = l.item;
    // DMarket's estimates of the item: below every offer, and no offer anyone made.
    const estimate = Math.max(1, Math.floor(l.priceMinor * 0.9));
    for (let k = 0; k < l.count; k++) {
      // The cheapest offer first per item; the others a little dearer each.
      const cents = k === 0 ? l.priceMinor : Math.round(l.priceMinor * (1 + 0.007 * k + 0.001 * ((i.index + k) % 7)));
      const id = `${hex(hash32(seed, m, i.index, k), 8)}-${hex(m, 4)}-4${hex(i.index, 3)}-8${hex(k, 3)}-${pad(i.index, 6)}${pad(k, 6)}`;
      const owner = `${hex(hash32(seed, 19, i.index, k), 8)}-0000-4000-8000-${pad(k, 12)}`;
      const discount = Math.floor(unit(seed, DM.discount, i.index, k) * 10);
      const favorites = Math.floor(unit(seed, DM.favorite, i.index, k) * 4);
      all.push({
        itemId: id,
        type: unit(seed, DM.p2p, i.index, k) < 0.3 ? 'p2p' : 'dmarket',
        amount: 1,
        classId: `a8db:${hash32(seed, 23, ctx.model.nameIndex.get(i.marketHashName) ?? i.index)}`,
        gameId: 'a8db',
        gameType: 'steam',
        inMarket: true,
        lockStatus: false,
        title: i.marketHashName,
        description: '',
        image: `https://cdn.dmarket.com/4a0e5b5a/${hex(hash32(seed, 29, i.index), 8)}.png`,
        slug: i.marketHashName
          .toLowerCase()
          .replace(/[^a-z0-9]+/g, '-')
          .replace(/^-|-$/g, ''),
        owner,
        ownersBlockchainId: '',
        ownerDetails: { id: owner, avatar: 'https://cdn.dmarket.com/avatars/default.png', wallet: '' },
        status: 'active',
        discount,
        price: money(cents),
        instantPrice: money(Math.max(1, Math.floor(cents * 0.8))),
        exchangePrice: money(cents),
        instantTargetId: '',
        suggestedPrice: money(estimate),
        recommendedPrice: {
          offerPrice: money(estimate),
          d3: money(estimate),
          d7: money(estimate),
          d7Plus: money(estimate),
        },
        extra: extraOf(ctx, i, k, id),
        createdAt: Math.floor((bucket - Math.floor(unit(seed, DM.age, i.index, k) * 14 * 86_400_000)) / 1000),
        deliveryStats: { rate: '100', time: '1' },
        fees: FEES,
        discountPrice: money(Math.max(1, Math.floor(estimate * 0.97))),
        productId: '',
        favoriteFor: favorites,
        favoriteForUser: false,
        favorite: { count: favorites, forUser: false },
      });
    }
  }
  return all;
}

function sorted(offers: DmarketOffer[], by: OrderBy, dir: 'asc' | 'desc'): DmarketOffer[] {
  const byId = (a: DmarketOffer, b: DmarketOffer) => (a.itemId < b.itemId ? -1 : a.itemId > b.itemId ? 1 : 0);
  // Integer cents compared as integers (BigInt): a price never becomes a float here either.
  const byPrice = (a: DmarketOffer, b: DmarketOffer) => {
    const x = BigInt(a.price.USD);
    const y = BigInt(b.price.USD);
    return x < y ? -1 : x > y ? 1 : 0;
  };
  const cmp: Partial<Record<OrderBy, (a: DmarketOffer, b: DmarketOffer) => number>> = {
    price: byPrice,
    title: (a, b) => a.title.localeCompare(b.title) || byPrice(a, b),
    updated: (a, b) => a.createdAt - b.createdAt,
    best_discount: (a, b) => a.discount - b.discount,
  };
  const base = cmp[by];
  // The id breaks ties, in the same direction, so that a cursor's position is stable.
  const sign = dir === 'asc' ? 1 : -1;
  return [...offers].sort((a, b) => sign * ((base ? base(a, b) : 0) || byId(a, b)));
}

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

function marketItems(ctx: SimContext, q: URLSearchParams, options: DmarketOptions): UpstreamResponse {
  const gameId = q.get('gameId');
  if (!gameId) return invalid('gameId is required');
  if (!GAMES.has(gameId)) return invalid(`unknown gameId '${gameId}'`);
  const currency = q.get('currency');
  if (currency !== 'USD' && currency !== 'DMC') return invalid('currency: USD or DMC');
  const limit = intParam(q, 'limit', DEFAULT_LIMIT, 1, MAX_LIMIT);
  if (Number.isNaN(limit)) return invalid('limit must be an integer');
  const by = (q.get('orderBy') || 'title') as OrderBy;
  if (!ORDER_BY.includes(by)) return invalid(`orderBy: one of ${ORDER_BY.join(', ')}`);
  const dir = q.get('orderDir') || 'desc';
  if (dir !== 'asc' && dir !== 'desc') return invalid('orderDir: asc or desc');
  const from = intParam(q, 'priceFrom', 0, 0, Number.MAX_SAFE_INTEGER);
  const to = intParam(q, 'priceTo', 0, 0, Number.MAX_SAFE_INTEGER);
  if (Number.isNaN(from) || Number.isNaN(to)) return invalid('priceFrom and priceTo are integer cents');
  const types = (q.get('types') || 'dmarket,p2p').split(',');
  const rawCursor = q.get('cursor');
  let offset: number | undefined;
  if (rawCursor) {
    offset = decodeCursor(rawCursor);
    if (offset === undefined) return invalid('invalid cursor');
  } else {
    offset = intParam(q, 'offset', 0, 0, Number.MAX_SAFE_INTEGER);
    if (Number.isNaN(offset)) return invalid('offset must be an integer');
    if (offset >= MAX_OFFSET_PAGES * limit)
      return invalid(`offset paging ends after ${MAX_OFFSET_PAGES} pages: page with the cursor of the previous answer`);
  }
  const title = (q.get('title') ?? '').toLowerCase();
  const all = gameId === 'a8db' ? ctx.model.memo(ctx.market, 'dmarket', ctx.clock.now(), () => expand(ctx)) : [];
  const chosen = all.filter((o) => {
    const cents = BigInt(o.price.USD);
    // DMarket's title filter is loose: a part of the title matches.
    return (
      (title === '' || o.title.toLowerCase().includes(title)) &&
      (from === 0 || cents >= BigInt(from)) &&
      (to === 0 || cents <= BigInt(to)) &&
      types.includes(o.type)
    );
  });
  const page = sorted(chosen, by, dir).slice(offset, offset + limit);
  const next = offset + page.length;
  return ok({
    objects: page,
    total: {
      offers: Math.min(chosen.length, options.totalCap),
      targets: 0,
      items: 0,
      completedOffers: 0,
      closedTargets: 0,
    },
    // The end of the list is an empty cursor.
    cursor: next < chosen.length && page.length > 0 ? encodeCursor(next) : '',
  });
}

/** Requests used per market in the current window, per simulator (its model). */
const windows = new WeakMap<MarketModel, Map<string, { window: number; used: number }>>();

/** The routes with given limits (tests use a larger budget or a small total cap). */
export function dmarketRoutesWith(overrides: Partial<DmarketOptions> = {}): Record<string, Route> {
  const options = { ...DEFAULTS, ...overrides };
  return {
    [DMARKET_PATH]: (ctx, q) => {
      let perModel = windows.get(ctx.model);
      if (!perModel) windows.set(ctx.model, (perModel = new Map()));
      const now = options.now();
      const window = Math.floor(now / options.windowMs);
      let w = perModel.get(ctx.market);
      if (!w || w.window !== window) perModel.set(ctx.market, (w = { window, used: 0 }));
      const headers = (remaining: number) => {
        const limit = String(options.requests);
        const left = String(remaining);
        return {
          'x-ratelimit-limit-second': limit,
          'x-ratelimit-remaining-second': left,
          'ratelimit-limit': limit,
          'ratelimit-remaining': left,
          // Whole seconds until the window ends, as the IETF draft's delta-seconds.
          'ratelimit-reset': String(Math.max(1, Math.ceil(((window + 1) * options.windowMs - now) / 1000))),
        };
      };
      if (w.used >= options.requests)
        return {
          status: 429,
          body: { error: 'too many requests', code: 8, message: 'rate limit exceeded' },
          headers: headers(0),
        };
      w.used++;
      return { ...marketItems(ctx, q, options), headers: headers(options.requests - w.used) };
    },
  };
}

export const dmarketRoutes: Record<string, Route> = dmarketRoutesWith();

/**
 * Skinport's documented public API (https://docs.skinport.com/; what the documentation says and
 * how it was verified is in packages/marketplaces/src/adapters/skinport.ts):
 *
 * - GET /v1/items?app_id=730&currency=EUR&tradable=0: the whole catalogue in one JSON array, no
 *   paging; prices are JSON numbers in the currency's units, null when nothing is listed
 *   (quantity 0); created_at / updated_at in unix seconds; item_page / market_page links.
 * - GET /v1/sales/history?app_id=730&currency=EUR&market_hash_name=a,b: per item the sales of the
 *   last 24 hours, 7, 30 and 90 days as {min, max, avg, median, volume}, prices null when none
 *   sold; `version` names a Doppler phase.
 * - Both answer only in Brotli: a request without `br` in Accept-Encoding gets 406 Not Acceptable
 *   (its body is not documented; ours is a guess). Answers are cached for 5 minutes, so both show
 *   the marketplace as it was at the last 5-minute boundary.
 *
 * /v1/items has no phase: where the model holds phase rows of one name (a Doppler knife), they are
 * aggregated by name as Skinport shows them: the lowest price of them, their counts summed. The
 * truth of such a name is that aggregate of the truth's phase rows at the same (cached) moment.
 *
 * Not simulated: the rate limit (8 per 5 minutes: the pollers keep to it by the adapter's limits;
 * faults inject 429s), other games' app_ids (an empty catalogue), and currency conversion: the
 * model prices a marketplace in its own currency only, so another currency is a 400.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { DAY_MS, Dec, getMarket } from '@skinprices/domain';
import type { CatalogueItem } from '../catalogue.js';
import { formatMinor, type ListingTruth } from '../model.js';
import { ok, type Route, type SimContext, type UpstreamResponse } from './types.js';

/** Skinport caches both endpoints this long. */
export const SKINPORT_CACHE_MS = 5 * 60_000;
const CS2 = '730';
/** Apps Skinport serves besides CS2 (Dota 2, TF2, Rust): valid, but the simulator has no items of them. */
const OTHER_APPS = new Set(['570', '440', '252490']);
/** What Skinport prices in (the currency parameter's documented values). */
const SKINPORT_CURRENCIES = new Set([
  'AUD',
  'BRL',
  'CAD',
  'CHF',
  'CNY',
  'CZK',
  'DKK',
  'EUR',
  'GBP',
  'HRK',
  'NOK',
  'PLN',
  'RUB',
  'SEK',
  'TRY',
  'USD',
]);
const WINDOWS = [
  ['last_24_hours', DAY_MS],
  ['last_7_days', 7 * DAY_MS],
  ['last_30_days', 30 * DAY_MS],
  ['last_90_days', 90 * DAY_MS],
] as const;
/** Skinport's first items were created in 2018 (created_at of its oldest entries). */
const FIRST_CREATED_S = 1_535_988_253;

const CATEGORY: Record<CatalogueItem['category'], string> = {
  weapon: 'Weapon',
  knife: 'Knife',
  gloves: 'Gloves',
  sticker: 'Sticker',
  case: 'Container',
  agent: 'Agent',
  charm: 'Charm',
  other: 'Other',
};

/** The moment the cached answers show: the last 5-minute boundary. */
const skinportSnapshotAt = (now: number): number => Math.floor(now / SKINPORT_CACHE_MS) * SKINPORT_CACHE_MS;

/**
 * A price as Skinport prints it: a JSON number. Number() of our exact 2-decimal string is the
 * double nearest to it, which JSON.stringify prints back as that decimal (12.5, 250, 0.03): the
 * wire carries exactly the price, and no arithmetic touches it as a float.
 */
const price = (minor: number | null): number | null => (minor === null ? null : Number(formatMinor(minor)));

/** Whether Accept-Encoding admits Brotli (`br`, without q=0). */
export function acceptsBrotli(headers: IncomingHttpHeaders): boolean {
  const raw = headers['accept-encoding'];
  const value = Array.isArray(raw) ? raw.join(',') : (raw ?? '');
  return value.split(',').some((part) => {
    const [name, ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    const q = params.find((p) => p.startsWith('q='));
    return name === 'br' && (q === undefined || Number(q.slice(2)) > 0);
  });
}

const error = (status: number, message: string): UpstreamResponse => ({ status, body: { errors: [{ message }] } });

/** The checks both endpoints share: Brotli, app_id, currency. An answer when refused, else the items' app. */
function refuse(ctx: SimContext, q: URLSearchParams, headers: IncomingHttpHeaders): UpstreamResponse | undefined {
  if (!acceptsBrotli(headers)) return error(406, 'Not Acceptable: this endpoint answers only with Accept-Encoding: br');
  const app = q.get('app_id') ?? CS2;
  if (app !== CS2 && !OTHER_APPS.has(app)) return error(400, `app_id: unsupported ${app}`);
  const currency = q.get('currency') ?? 'EUR';
  if (!SKINPORT_CURRENCIES.has(currency)) return error(400, `currency: unsupported ${currency}`);
  if (currency !== getMarket(ctx.market).currency)
    return error(400, `currency: the simulator prices ${ctx.market} in ${getMarket(ctx.market).currency} only`);
  return undefined;
}

const brotli = (body: unknown): UpstreamResponse => ({ ...ok(body), encoding: 'br' });

/** `ak-47-redline-field-tested`: the slug of Skinport's item pages. */
export function itemSlug(name: string): string {
  return name
    .toLowerCase()
    .replace(/™/g, '')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
}

const links = (item: CatalogueItem) => {
  const finish = (item.marketHashName.split(' | ')[1] ?? item.marketHashName).replace(/ \([^)]*\)$/, '');
  return {
    item_page: `https://skinport.com/item/${itemSlug(item.marketHashName)}`,
    market_page: `https://skinport.com/market?item=${encodeURIComponent(finish)}&cat=${CATEGORY[item.category]}`,
  };
};

/** Every listing of a truth row, cheapest first: the lowest is the truth, the others a little dearer. */
function ladder(l: ListingTruth): number[] {
  if (l.priceMinor === null) return [];
  const base = l.priceMinor;
  return Array.from({ length: l.count }, (_, k) =>
    k === 0 ? base : Math.round(base * (1 + 0.007 * k + 0.001 * ((l.item.index + k) % 7))),
  );
}

/** Mean and median of integer minor units, rounded half up to a whole minor unit (decimal, not float). */
function meanMinor(values: readonly number[]): number {
  const sum = values.reduce((a, b) => a + b, 0);
  return new Dec(sum).dividedBy(values.length).toDecimalPlaces(0).toNumber();
}
function medianMinor(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : meanMinor([sorted[mid - 1] as number, sorted[mid] as number]);
}

/** The marketplace's listings at `t` grouped by name, in catalogue order. */
function byName(ctx: SimContext, t: number): ListingTruth[][] {
  const groups = new Map<string, ListingTruth[]>();
  for (const l of ctx.model.listings(ctx.market, t)) {
    const g = groups.get(l.item.marketHashName);
    if (g) g.push(l);
    else groups.set(l.item.marketHashName, [l]);
  }
  return [...groups.values()];
}

function items(ctx: SimContext, t: number): unknown[] {
  const currency = getMarket(ctx.market).currency;
  return byName(ctx, t).map((rows) => {
    const first = rows[0] as ListingTruth;
    // Phase rows aggregated by name: the lowest of their prices, all their listings counted.
    const all = rows.flatMap(ladder);
    const quantity = rows.reduce((n, l) => n + (l.priceMinor === null ? 0 : l.count), 0);
    const listed = all.length > 0;
    return {
      market_hash_name: first.item.marketHashName,
      currency,
      suggested_price: price(ctx.model.priceLevelMinor(first.item, ctx.market, t)),
      ...links(first.item),
      min_price: listed ? price(Math.min(...all)) : null,
      max_price: listed ? price(Math.max(...all)) : null,
      mean_price: listed ? price(meanMinor(all)) : null,
      median_price: listed ? price(medianMinor(all)) : null,
      quantity,
      created_at: FIRST_CREATED_S + 97 * (ctx.model.nameIndex.get(first.item.marketHashName) ?? first.item.index),
      updated_at: Math.floor(t / 1000),
    };
  });
}

function salesHistory(ctx: SimContext, t: number, names: ReadonlySet<string> | null): unknown[] {
  const currency = getMarket(ctx.market).currency;
  const longest = WINDOWS[WINDOWS.length - 1]![1];
  const sales = ctx.extras.sales(ctx.market, t - longest, t);
  const byItem = new Map<number, { soldAt: number; minor: number }[]>();
  for (const s of sales) {
    const list = byItem.get(s.item.index) ?? [];
    list.push({ soldAt: s.soldAt, minor: s.priceMinor });
    byItem.set(s.item.index, list);
  }
  return ctx.model.catalogue
    .filter((i) => ctx.model.listed(i, ctx.market) && (names === null || names.has(i.marketHashName)))
    .map((item) => {
      const sold = byItem.get(item.index) ?? [];
      const windows = Object.fromEntries(
        WINDOWS.map(([key, ms]) => {
          const minors = sold.filter((s) => s.soldAt >= t - ms).map((s) => s.minor);
          const none = minors.length === 0;
          return [
            key,
            {
              min: none ? null : price(Math.min(...minors)),
              max: none ? null : price(Math.max(...minors)),
              avg: none ? null : price(meanMinor(minors)),
              median: none ? null : price(medianMinor(minors)),
              volume: minors.length,
            },
          ];
        }),
      );
      return {
        market_hash_name: item.marketHashName,
        version: item.phase || null,
        currency,
        ...links(item),
        ...windows,
      };
    });
}

export const skinportRoutes: Record<string, Route> = {
  '/v1/items': (ctx, q, req) => {
    const refused = refuse(ctx, q, req.headers);
    if (refused) return refused;
    const tradable = q.get('tradable');
    // The simulator has no trade locks: tradable only filters nothing.
    if (tradable !== null && !['0', '1', 'true', 'false'].includes(tradable))
      return error(400, `tradable: expected a boolean, got ${tradable}`);
    if ((q.get('app_id') ?? CS2) !== CS2) return brotli([]);
    const t = skinportSnapshotAt(ctx.clock.now());
    return brotli(ctx.model.memo(ctx.market, `skinport-items:${t}`, t, () => items(ctx, t)));
  },
  '/v1/sales/history': (ctx, q, req) => {
    const refused = refuse(ctx, q, req.headers);
    if (refused) return refused;
    if ((q.get('app_id') ?? CS2) !== CS2) return brotli([]);
    const t = skinportSnapshotAt(ctx.clock.now());
    const raw = q.get('market_hash_name');
    // The documented form: the items' names, comma-delimited; absent: every item.
    const names = raw === null || raw === '' ? null : new Set(raw.split(',').map((n) => n.trim()));
    return brotli(salesHistory(ctx, t, names));
  },
};

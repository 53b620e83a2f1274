/**
 * HIST-A: daily closes of one UTC day, paged; and, asked for with `hourly`, the day's hourly
 * candles from the same upstream's hourly endpoint (kept for recent days only, as Steam's price
 * history keeps its hourly points for a month), joined to the day's closes by item.
 */
import { AppError, comparePrices, DAY_MS, utcDate, type PhaseOrNone } from '@skinprices/domain';
import type { Adapter, FetchContext, KindInput } from '../adapter.js';
import { asArray, asObj, collect, decimalPrice, identity, int, malformed, optInt, optStr, str } from '../normalize.js';
import type { HistoryHourRow, Kind, Page } from '../rows.js';

const HOUR_MS = 3_600_000;

export const historyAdapter: Adapter = {
  format: 'history',
  kinds: ['HISTORY'],
  async *pages<K extends Kind>(kind: K, ctx: FetchContext, input: KindInput): AsyncGenerator<Page<K>> {
    if (kind !== 'HISTORY' || input.day === undefined)
      throw new AppError('kind_unsupported', `${ctx.market}: HISTORY needs a day`);
    const day = input.day;
    const date = utcDate(day * DAY_MS);
    // The hours first (all pages): each close's row carries its item's hours.
    const hourly = input.hourly ? await hoursOf(ctx, date) : undefined;
    // Hours only (the poller's second pass over recent days): every item's hours in rows without a close.
    const dailyPages = input.closes === false ? [] : pagesOf(ctx, '/api/history/daily', date);
    for await (const items of dailyPages) {
      yield collect<K>(items, (raw) => {
        const o = asObj(raw, 'item');
        const price = decimalPrice(o, 'close');
        if (price === null) throw new AppError('non_positive_price', 'close missing');
        const { market_hash_name, phase } = identity(str(o, 'name'), optStr(o, 'phase'));
        const key = `${market_hash_name}\u0000${phase}`;
        const hours = hourly ? parseHours(hourly.get(key) ?? [], day) : null;
        hourly?.delete(key);
        if (hours?.length) withinHours(price, hours);
        return { market_hash_name, phase, day, price, count: optInt(o, 'volume'), hours } as Page<K>['rows'][number];
      });
    }
    // Items listed during the day but not at its end have hours and no close: a row of their own,
    // or those hours would be lost (with closes: false, every item).
    if (hourly?.size) {
      yield collect<K>([...hourly.entries()], (entry) => {
        const [key, raw] = entry as [string, unknown[]];
        const [market_hash_name, phase] = key.split('\u0000') as [string, PhaseOrNone];
        const hours = parseHours(raw, day);
        if (hours.length === 0) return [];
        return { market_hash_name, phase, day, price: null, count: null, hours } as Page<K>['rows'][number];
      });
    }
  },
};

/** The pages of one of the format's per-day endpoints, each page's items. */
async function* pagesOf(ctx: FetchContext, path: string, date: string): AsyncGenerator<unknown[]> {
  let pages = 1;
  for (let n = 1; n <= pages; n++) {
    const data = await ctx.request(async () => {
      const body = asObj(await ctx.client.getJson(path, { date, page: n, per_page: 5000 }, ctx.signal), 'response');
      if (body.date !== date) throw malformed(ctx.market, `asked for ${date}, got ${String(body.date)}`);
      const items = asArray(body.items, 'items');
      const total = int(body, 'pages', 1);
      if (items.length === 0 && n < total) throw malformed(ctx.market, `empty page ${n} of ${total}`);
      return { items, total };
    });
    pages = Math.max(pages, data.total);
    yield data.items;
  }
}

/** Every item's raw hours of the day, by item identity (parsed with the close that uses them). */
async function hoursOf(ctx: FetchContext, date: string): Promise<Map<string, unknown[]>> {
  const byItem = new Map<string, unknown[]>();
  for await (const items of pagesOf(ctx, '/api/history/hourly', date)) {
    for (const raw of items) {
      // An item the page cannot name is skipped here; its close (if any) then goes without hours.
      try {
        const o = asObj(raw, 'item');
        const { market_hash_name, phase } = identity(str(o, 'name'), optStr(o, 'phase'));
        byItem.set(`${market_hash_name}\u0000${phase}`, asArray(o.hours, 'hours'));
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
      }
    }
  }
  return byItem;
}

/**
 * One item's hours, checked as a candle each: an hour of `day` on the hour, ascending, prices
 * > 0 with low ≤ open, close ≤ high. A bad hour rejects the item's row (its close included), as
 * a bad field of any row does: the poller then knows the cycle was not clean.
 */
function parseHours(raw: readonly unknown[], day: number): HistoryHourRow[] {
  const hours: HistoryHourRow[] = [];
  for (const r of raw) {
    const o = asObj(r, 'hour');
    const hour = Date.parse(str(o, 'time'));
    if (!Number.isFinite(hour) || hour % HOUR_MS !== 0 || Math.floor(hour / DAY_MS) !== day)
      throw new AppError('invalid_item', `hour ${String(o.time)} is not an hour of the day asked for`);
    if (hours.length > 0 && hour <= hours.at(-1)!.hour)
      throw new AppError('invalid_item', `hours out of order at ${String(o.time)}`);
    const [open, high, low, close] = (['open', 'high', 'low', 'close'] as const).map((k) => {
      const p = decimalPrice(o, k);
      if (p === null) throw new AppError('non_positive_price', `hour ${String(o.time)}: ${k} missing`);
      return p;
    }) as [string, string, string, string];
    // Canonical strings (decimalPrice's): compared exactly as minor units, no Decimal per hour.
    for (const [k, v] of [
      ['open', open],
      ['close', close],
    ] as const) {
      if (comparePrices(v, low) < 0 || comparePrices(v, high) > 0)
        throw new AppError('invalid_item', `hour ${String(o.time)}: ${k} ${v} outside [${low}, ${high}]`);
    }
    hours.push({ hour, open, high, low, close, count: optInt(o, 'volume') });
  }
  return hours;
}

/** The day's close lies within its hours' range (the day's candle is built from them). */
function withinHours(close: string, hours: readonly HistoryHourRow[]): void {
  let low = hours[0]!.low;
  let high = hours[0]!.high;
  for (const h of hours) {
    if (comparePrices(h.low, low) < 0) low = h.low;
    if (comparePrices(h.high, high) > 0) high = h.high;
  }
  if (comparePrices(close, low) < 0 || comparePrices(close, high) > 0)
    throw new AppError('invalid_item', `close ${close} outside its hours' range [${low}, ${high}]`);
}

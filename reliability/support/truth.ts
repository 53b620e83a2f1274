/**
 * "No zero or invented price": every price the read model holds or the API serves must equal a
 * price the simulator really showed, for the same marketplace and item, at one of the moments the
 * pollers looked (its truth at those times, from GET /_sim/truth), and never be 0. The book of
 * those prices is built per (kind, marketplace, item) from the truth at every polled time; the
 * checks walk every price column of the read model and every price field of the list answers.
 */
import { DAY_MS, getMarket, MARKETS, type Capability, type MarketSlug } from '@skinprices/domain';
import type { Pool } from '@skinprices/store';

/** '12.30' and '12.3' are one price; integers stay as they are. */
export const normPrice = (p: string): string => (p.includes('.') ? p.replace(/0+$/, '').replace(/\.$/, '') : p);

const TRUTH_KIND: Partial<Record<Capability, string>> = {
  listings: 'listings',
  buyorders: 'buyorders',
  floatRanged: 'float-ranged',
  floatBuyorders: 'float-buyorders',
  orderBook: 'order-book',
};

type Rec = Record<string, unknown>;
const s = (v: unknown): string => (v === null || v === undefined ? '' : String(v));

export interface PriceCheck {
  checked: number;
  zero: number;
  invented: number;
  /** The first few offenders: where, which price, and what the truth had for that item. */
  examples: { where: string; key: string; price: string; truth: string[] }[];
}

export class TruthBook {
  private readonly prices = new Map<string, Set<string>>();
  /** Truth requests made (the book's size is the number of distinct items × kinds). */
  requests = 0;

  constructor(private readonly controlUrl: string) {}

  private add(key: string, price: unknown): void {
    if (price === null || price === undefined) return;
    let set = this.prices.get(key);
    if (!set) this.prices.set(key, (set = new Set()));
    set.add(normPrice(String(price)));
  }

  private async truth(market: string, kind: string, at: number, from?: number): Promise<Rec[]> {
    this.requests++;
    const q = `market=${market}&kind=${kind}&at=${at}${from === undefined ? '' : `&from=${from}`}`;
    const res = await fetch(`${this.controlUrl}/_sim/truth?${q}`);
    if (!res.ok) throw new Error(`GET /_sim/truth?${q}: ${res.status} ${await res.text()}`);
    return ((await res.json()) as { records: Rec[] }).records;
  }

  /**
   * Adds the truth of every kind `market` offers at each of `times` (the moments it was polled);
   * sales are the ones sold in [salesFrom, max(times)].
   */
  async addMarket(market: MarketSlug, times: readonly number[], salesFrom: number): Promise<void> {
    const caps = getMarket(market).capabilities;
    for (const at of new Set(times)) {
      for (const cap of caps) {
        const kind = TRUTH_KIND[cap];
        if (!kind) continue;
        for (const r of await this.truth(market, kind, at)) this.addRecord(market, cap, r);
      }
    }
    if (caps.includes('sales') && times.length > 0)
      for (const r of await this.truth(market, 'sales', Math.max(...times) + 1, salesFrom))
        this.add(`S|${market}|${s(r.sale_id)}`, r.price);
  }

  /** History closes of `market` for each UTC day number in `days`. */
  async addHistoryDays(market: MarketSlug, days: readonly number[]): Promise<void> {
    for (const day of new Set(days))
      for (const r of await this.truth(market, 'history', (day + 1) * DAY_MS))
        this.add(`H|${market}|${s(r.market_hash_name)}|${s(r.phase)}|${day}`, r.price);
  }

  private addRecord(market: string, cap: Capability, r: Rec): void {
    const item = `${market}|${s(r.market_hash_name)}|${s(r.phase)}`;
    switch (cap) {
      case 'listings':
        this.add(`L|${item}`, r.price);
        // Liquidity's lowest ask is some marketplace's listing price of the item.
        this.add(`A|${s(r.market_hash_name)}|${s(r.phase)}`, r.price);
        break;
      case 'buyorders': {
        this.add(`B|${item}|${s(r.tier)}`, r.price);
        this.add(`B|${item}|${s(r.tier)}`, r.blue_price);
        // The API names a buy-order row by its tier or phase label (readmodel.ts).
        const label = s(r.tier) || s(r.phase);
        const shown = label ? `${s(r.market_hash_name)} (${label})` : s(r.market_hash_name);
        this.add(`BA|${market}|${shown}`, r.price);
        this.add(`BA|${market}|${shown}`, r.blue_price);
        this.add(`BB|${s(r.market_hash_name)}|${s(r.phase)}`, r.price);
        this.add(`BB|${s(r.market_hash_name)}|${s(r.phase)}`, r.blue_price);
        break;
      }
      case 'floatRanged':
        this.add(`F|${item}|${Number(r.float_min)}`, r.first_price);
        this.add(`F|${item}|${Number(r.float_min)}`, r.fifth_price);
        break;
      case 'floatBuyorders':
        this.add(`FB|${market}|${s(r.order_id)}`, r.price);
        break;
      case 'orderBook':
        for (const side of ['asks', 'bids'] as const)
          for (const level of (r[side] as { price: string }[] | undefined) ?? []) this.add(`OB|${item}`, level.price);
        break;
      default:
        break;
    }
  }

  /** Judges one price found at `where` under `key`. */
  judge(check: PriceCheck, where: string, key: string, price: unknown): void {
    if (price === null || price === undefined) return;
    check.checked++;
    const p = normPrice(String(price));
    const known = this.prices.get(key);
    const zero = !(Number(p) > 0);
    if (zero) check.zero++;
    else if (!known?.has(p)) check.invented++;
    else return;
    if (check.examples.length < 20)
      check.examples.push({ where, key, price: String(price), truth: [...(known ?? [])].slice(0, 5) });
  }
}

export const emptyCheck = (): PriceCheck => ({ checked: 0, zero: 0, invented: 0, examples: [] });

/** Every price column of the read model, judged against the book. */
export async function checkReadModel(pool: Pool, book: TruthBook, check = emptyCheck()): Promise<PriceCheck> {
  const q = async (sql: string) => (await pool.query<Rec>(sql)).rows;
  const history = new Set<string>(MARKETS.filter((m) => m.capabilities.includes('history')).map((m) => m.slug));
  for (const r of await q('SELECT market, market_hash_name, phase, price::text FROM listings_current'))
    book.judge(check, 'listings_current', `L|${s(r.market)}|${s(r.market_hash_name)}|${s(r.phase)}`, r.price);
  for (const r of await q('SELECT market, market_hash_name, phase, hour, price::text FROM listing_hourly'))
    book.judge(check, 'listing_hourly', `L|${s(r.market)}|${s(r.market_hash_name)}|${s(r.phase)}`, r.price);
  for (const r of await q(
    `SELECT market, market_hash_name, phase, (day - date '1970-01-01') AS day, close::text FROM listing_daily`,
  )) {
    const item = `${s(r.market)}|${s(r.market_hash_name)}|${s(r.phase)}`;
    book.judge(check, 'listing_daily', history.has(s(r.market)) ? `H|${item}|${s(r.day)}` : `L|${item}`, r.close);
  }
  for (const r of await q(
    'SELECT market, market_hash_name, phase, tier, price::text, blue_price::text, prior_price::text FROM buyorders_current',
  )) {
    const key = `B|${s(r.market)}|${s(r.market_hash_name)}|${s(r.phase)}|${s(r.tier)}`;
    book.judge(check, 'buyorders_current.price', key, r.price);
    book.judge(check, 'buyorders_current.blue_price', key, r.blue_price);
    // The bid held when the day began (liquidity's): an earlier observation of the same order.
    book.judge(check, 'buyorders_current.prior_price', key, r.prior_price);
  }
  for (const r of await q(
    'SELECT market, market_hash_name, phase, float_min::text, first_price::text, fifth_price::text FROM float_ranged_current',
  )) {
    const key = `F|${s(r.market)}|${s(r.market_hash_name)}|${s(r.phase)}|${Number(r.float_min)}`;
    book.judge(check, 'float_ranged_current.first_price', key, r.first_price);
    book.judge(check, 'float_ranged_current.fifth_price', key, r.fifth_price);
  }
  for (const r of await q('SELECT market, order_id, price::text FROM float_buyorders_current'))
    book.judge(check, 'float_buyorders_current', `FB|${s(r.market)}|${s(r.order_id)}`, r.price);
  for (const r of await q('SELECT market, market_hash_name, phase, asks, bids FROM order_book_current'))
    for (const side of ['asks', 'bids'] as const)
      for (const level of (r[side] as { price: string }[]) ?? [])
        book.judge(
          check,
          `order_book_current.${side}`,
          `OB|${s(r.market)}|${s(r.market_hash_name)}|${s(r.phase)}`,
          level.price,
        );
  for (const r of await q('SELECT market, sale_id, price::text FROM sales'))
    book.judge(check, 'sales', `S|${s(r.market)}|${s(r.sale_id)}`, r.price);
  for (const r of await q('SELECT market_hash_name, phase, best_bid::text, lowest_ask::text FROM item_liquidity')) {
    book.judge(check, 'item_liquidity.best_bid', `BB|${s(r.market_hash_name)}|${s(r.phase)}`, r.best_bid);
    book.judge(check, 'item_liquidity.lowest_ask', `A|${s(r.market_hash_name)}|${s(r.phase)}`, r.lowest_ask);
  }
  return check;
}

/** Every price field of the list answers (4.1, 4.2, 4.3, 4.7), judged against the book. */
export async function checkApi(
  apiUrl: string,
  key: string,
  book: TruthBook,
  listMarkets: readonly string[],
  buyorderMarkets: readonly string[],
  check = emptyCheck(),
): Promise<PriceCheck & { answers: number }> {
  let answers = 0;
  const get = async (path: string): Promise<Rec> => {
    const res = await fetch(`${apiUrl}${path}`, { headers: { 'x-api-key': key } });
    if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
    answers++;
    return (await res.json()) as Rec;
  };
  for (const m of listMarkets)
    for (const r of (await get(`/v1/prices/${m}`)).data as Rec[])
      book.judge(check, `GET /v1/prices/${m}`, `L|${m}|${s(r.market_hash_name)}|${s(r.phase)}`, r.price_rmb ?? r.price);
  for (const m of buyorderMarkets)
    for (const r of (await get(`/v1/prices/${m}/buyorder`)).data as Rec[]) {
      book.judge(check, `GET /v1/prices/${m}/buyorder`, `BA|${m}|${s(r.market_hash_name)}`, r.buyorder_price);
      book.judge(check, `GET /v1/prices/${m}/buyorder`, `BA|${m}|${s(r.market_hash_name)}`, r.blue_buyorder_price);
    }
  const items = (await get('/v1/prices/latest')).items as Record<string, Record<string, Rec>>;
  for (const [k, byMarket] of Object.entries(items))
    for (const [m, e] of Object.entries(byMarket)) {
      const phase = s(e.phase);
      const name = phase && k.endsWith(` (${phase})`) ? k.slice(0, -(phase.length + 3)) : k;
      book.judge(check, 'GET /v1/prices/latest', `L|${m}|${name}|${phase}`, e.price_rmb ?? e.price);
    }
  for (const r of (await get('/v1/store')).data as Rec[]) {
    const item = `store|${s(r.market_hash_name)}|${s(r.phase)}`;
    book.judge(check, 'GET /v1/store', `L|${item}`, r.price);
    const book_ = r.order_book as { asks: { price: string }[]; bids: { price: string }[] } | null;
    for (const level of [...(book_?.asks ?? []), ...(book_?.bids ?? [])])
      book.judge(check, 'GET /v1/store order_book', `OB|${item}`, level.price);
  }
  return { ...check, answers };
}

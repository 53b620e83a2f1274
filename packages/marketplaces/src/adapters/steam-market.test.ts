import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { AppError } from '@skinprices/domain';
import { afterEach, describe, expect, it } from 'vitest';
import type { FetchContext } from '../adapter.js';
import { UpstreamClient } from '../client.js';
import type { Kind, Page } from '../rows.js';
import { failure, fetchAll as fetchPages, fakeUpstream, type Query } from '../testing/fake-upstream.js';
import {
  STEAM_APPID,
  STEAM_BUDGET,
  STEAM_PAGE,
  STEAM_SEARCH_PATH,
  parseSteamPrice,
  parseSteamPriceOverview,
  parseSteamVolume,
  steamMarketAdapter,
  steamMarketLimits,
} from './steam-market.js';

// ---- fixtures shaped like Steam's answers (search/render with norender=1, priceoverview) ----

const fixture = (name: string): unknown =>
  JSON.parse(readFileSync(new URL(`./fixtures/steam-market/${name}`, import.meta.url), 'utf8')) as unknown;
type SearchBody = { total_count: number; results: Record<string, unknown>[] } & Record<string, unknown>;
const USD_0 = fixture('search-render-usd-start0.json') as SearchBody;
const USD_10 = fixture('search-render-usd-start10.json') as SearchBody;
const EUR = fixture('search-render-eur.json') as SearchBody;
const REFUSED = fixture('search-render-refused.json') as SearchBody;

/** Serves `pages[start]`; any other request fails the test loudly. */
function byStart(pages: Record<number, unknown>) {
  return (path: string, q: Query): unknown => {
    expect(path).toBe(STEAM_SEARCH_PATH);
    const start = Number(q.start);
    if (!(start in pages)) throw new Error(`unexpected start ${String(q.start)}`);
    return pages[start];
  };
}

const fakeContext = (
  answer: (path: string, query: Query) => unknown,
  market = 'usd-4',
  request?: FetchContext['request'],
) => fakeUpstream(market, answer, request);
const fetchAll = <K extends Kind>(kind: K, ctx: FetchContext, pages: Page<K>[] = []): Promise<Page<K>[]> =>
  fetchPages(steamMarketAdapter, kind, ctx, {}, pages);

const row = (market_hash_name: string, price: string | null, count: number, over: Record<string, unknown> = {}) => ({
  market_hash_name,
  phase: '',
  price,
  count,
  exterior: null,
  stattrak: false,
  souvenir: false,
  template_id: null,
  item_page_url: null,
  ...over,
});
const FN = { exterior: 'Factory New' };
const FT = { exterior: 'Field-Tested' };

/** The query every search page is asked with, at `start`. */
const query = (start: number) => ({
  appid: 730,
  norender: 1,
  start,
  count: 100,
  sort_column: 'name',
  sort_dir: 'asc',
  query: '',
  search_descriptions: 0,
});

/** A search page of `n` generated results starting at `from` (for paging tests). */
function generated(from: number, n: number, total: number, pagesize = n): SearchBody {
  const results = Array.from({ length: n }, (_, k) => {
    const name = `Sticker | Test ${String(from + k).padStart(4, '0')}`;
    const cents = 100 + from + k;
    return {
      ...(USD_0.results[8] as Record<string, unknown>),
      name,
      hash_name: name,
      sell_listings: 1,
      sell_price: cents,
      sell_price_text: `$${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, '0')}`,
      asset_description: {
        ...(USD_0.results[8]!.asset_description as Record<string, unknown>),
        name,
        market_name: name,
        market_hash_name: name,
      },
    };
  });
  return { ...USD_0, start: from, pagesize, total_count: total, results };
}

describe('parseSteamPrice', () => {
  it.each([
    ['$11.43', '11.43'],
    ['$0.03', '0.03'],
    ['$1,234.56', '1234.56'],
    ['$123,456.78', '123456.78'],
    ['$1,234,567.00', '1234567.00'],
    ['$1234.56', '1234.56'],
    // a wallet outside the US sees " USD" after the amount
    ['$11.43 USD', '11.43'],
    [' $5.00 ', '5.00'],
    ['$0.00', '0.00'],
  ])('USD %j → %j', (text, want) => {
    expect(parseSteamPrice(text, 'USD')).toBe(want);
  });

  it.each([
    ['11,43€', '11.43'],
    ['0,03€', '0.03'],
    // Steam writes a whole euro amount with ",--"
    ['5,--€', '5.00'],
    ['1 234,56€', '1234.56'],
    ['1\u00a0234,56€', '1234.56'],
    ['1.234,56€', '1234.56'],
    ['1 234 567,89€', '1234567.89'],
    ['1234,56€', '1234.56'],
  ])('EUR %j → %j', (text, want) => {
    expect(parseSteamPrice(text, 'EUR')).toBe(want);
  });

  it.each([
    ['¥ 71.50', '71.50'],
    ['¥71.50', '71.50'],
    ['¥ 1,234.56', '1234.56'],
  ])('CNY %j → %j', (text, want) => {
    expect(parseSteamPrice(text, 'CNY')).toBe(want);
  });

  it.each([
    ['USD', '11.43'],
    ['USD', '$11.4'],
    ['USD', '$11'],
    ['USD', '$1,2345.00'],
    ['USD', '$12,345,00'],
    ['USD', '$1.234,56'],
    ['USD', '$-1.00'],
    ['USD', '$ 11.43'],
    ['USD', '$11.43 EUR'],
    ['USD', 'USD 11.43'],
    ['USD', '11,43€'],
    ['USD', '471,50 pуб.'],
    ['USD', ''],
    ['EUR', '€11,43'],
    ['EUR', '11.43€'],
    ['EUR', '11,4€'],
    ['EUR', '1 234.567,00€'],
    ['EUR', '1,234,56€'],
    ['EUR', '$11.43'],
    ['EUR', '11,43 €'],
    ['CNY', '$71.50'],
    ['CNY', '¥ 71,50'],
    ['CNY', '71.50'],
  ] as const)('%s refuses %j (wrong currency, format or grouping) as a non-retryable input error', (currency, text) => {
    let err: unknown;
    try {
      parseSteamPrice(text, currency);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: 'invalid_item', retryable: false });
  });
});

describe('parseSteamVolume', () => {
  it.each([
    ['1,247', 1247],
    ['59,613', 59613],
    ['1,234,567', 1234567],
    ['7', 7],
    ['0', 0],
  ])('%j → %d', (text, n) => {
    expect(parseSteamVolume(text)).toBe(n);
  });

  it.each(['1.247', '12,34', '1 247', '-1', '', '1,2345', '7.5'])('refuses %j', (text) => {
    expect(() => parseSteamVolume(text)).toThrow(AppError);
  });
});

describe('parseSteamPriceOverview (per item, not used by catalogue cycles)', () => {
  it('reads all three formatted fields: prices as decimals, the volume without its separators', () => {
    expect(parseSteamPriceOverview(fixture('priceoverview.json'), 'USD')).toEqual({
      lowest_price: '11.43',
      median_price: '11.00',
      volume: 1247,
    });
  });

  it('fields Steam leaves out (no sales, no listings) are null, never zero', () => {
    expect(parseSteamPriceOverview(fixture('priceoverview-no-sales.json'), 'USD')).toEqual({
      lowest_price: '0.05',
      median_price: null,
      volume: null,
    });
    expect(parseSteamPriceOverview(fixture('priceoverview-no-listings.json'), 'USD')).toEqual({
      lowest_price: null,
      median_price: '3412.50',
      volume: 3,
    });
  });

  it('reads the currency it was asked for (currency=3: "1,--€", "1 001,01€")', () => {
    expect(parseSteamPriceOverview(fixture('priceoverview-eur.json'), 'EUR')).toEqual({
      lowest_price: '1.00',
      median_price: '1001.01',
      volume: 11855,
    });
  });

  it('refuses success:false (an unknown name), a zero price, another currency, a numeric volume, a non-object', () => {
    const bad: [unknown, RegExp][] = [
      [fixture('priceoverview-unknown-item.json'), /success is false/],
      [{ success: true, lowest_price: '$0.00' }, /lowest_price: price must be > 0/],
      [fixture('priceoverview-eur.json'), /not a Steam USD price/],
      [{ success: true, volume: 1247 }, /volume: expected a string/],
      [{ success: true, median_price: 11 }, /median_price: expected a string/],
      [null, /not an object/],
    ];
    for (const [body, reason] of bad) {
      let err: unknown;
      try {
        parseSteamPriceOverview(body, 'USD');
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(body)).toBeInstanceOf(AppError);
      expect((err as AppError).retryable).toBe(false);
      expect((err as AppError).message).toMatch(reason);
    }
  });
});

describe('steam-market adapter (search/render)', () => {
  it('asks for JSON (norender=1) of CS2 (appid 730), 100 a page sorted by name, and pages by what arrived', async () => {
    const { ctx, calls } = fakeContext(byStart({ 0: USD_0, 10: USD_10 }));
    const pages = await fetchAll('LISTINGS', ctx);
    // Steam sent 10 although 100 were asked for: the second page starts at 10, not 100.
    expect(calls).toEqual([
      { path: STEAM_SEARCH_PATH, query: query(0) },
      { path: STEAM_SEARCH_PATH, query: query(10) },
    ]);
    expect(pages.map((p) => p.rejected)).toEqual([[], []]);
    expect(pages[0]!.rows).toEqual([
      row('AK-47 | Redline (Field-Tested)', '11.43', 1247, FT),
      row('AK-47 | Safari Mesh (Battle-Scarred)', '0.03', 3910, { exterior: 'Battle-Scarred' }),
      row('AWP | Dragon Lore (Factory New)', '123456.78', 2, FN),
      row('Dreams & Nightmares Case', '2.23', 245097),
      row('Glock-18 | Fade (Factory New)', '1049.00', 31, FN),
      // listed, nothing on offer: sell_listings 0 and "$0.00" are "no price", not a zero price
      row('M4A4 | Howl (Minimal Wear)', null, 0, { exterior: 'Minimal Wear' }),
      row('Souvenir AWP | Dragon Lore (Field-Tested)', '98765.43', 4, { ...FT, souvenir: true }),
      row('StatTrak™ AWP | Asiimov (Field-Tested)', '152.50', 88, { ...FT, stattrak: true }),
      row('Sticker | Crown (Foil)', '895.00', 19),
      row('★ Karambit', '765.43', 12),
    ]);
    // No phase in Steam's names: a Doppler is one row with phase ''.
    expect(pages[1]!.rows).toEqual([
      row('★ Karambit | Doppler (Factory New)', '1234.56', 57, FN),
      row('★ StatTrak™ Karambit | Doppler (Factory New)', '2110.00', 6, { ...FN, stattrak: true }),
    ]);
  });

  it('pages by 100 where Steam honours count, until total_count', async () => {
    const { ctx, calls } = fakeContext(
      byStart({ 0: generated(0, 100, 250), 100: generated(100, 100, 250), 200: generated(200, 50, 250) }),
    );
    const pages = await fetchAll('LISTINGS', ctx);
    expect(calls.map((c) => c.query.start)).toEqual([0, 100, 200]);
    expect(pages.map((p) => p.rows.length)).toEqual([100, 100, 50]);
    expect(pages[2]!.rows.at(-1)).toEqual(row('Sticker | Test 0249', '3.49', 1));
    expect(STEAM_PAGE).toBe(100);
  });

  it('reads another currency from its text when the marketplace is priced in it ("5,--€" is 5.00)', async () => {
    const { ctx } = fakeContext(byStart({ 0: EUR }), 'eu-a');
    const [page, ...more] = await fetchAll('LISTINGS', ctx);
    expect(more).toEqual([]);
    expect(page).toEqual({
      rows: [
        row('AK-47 | Redline (Field-Tested)', '10.43', 1247, FT),
        row('AK-47 | Safari Mesh (Battle-Scarred)', '0.03', 3910, { exterior: 'Battle-Scarred' }),
        row('Dreams & Nightmares Case', '5.00', 245097),
        row('★ Karambit | Doppler (Factory New)', '1234.56', 57, FN),
      ],
      rejected: [],
    });
  });

  it('refuses, row by row, a page in another currency than the marketplace: nothing is converted or guessed', async () => {
    const { ctx } = fakeContext(byStart({ 0: EUR }), 'usd-4');
    const [page] = await fetchAll('LISTINGS', ctx);
    expect(page!.rows).toEqual([]);
    expect(page!.rejected.map((r) => r.reason)).toEqual(
      EUR.results.map(() => expect.stringMatching(/not a Steam USD price/)),
    );
  });

  it('refuses every row it cannot vouch for and keeps the rest', async () => {
    const { ctx } = fakeContext(byStart({ 0: REFUSED }));
    const [page] = await fetchAll('LISTINGS', ctx);
    expect(page!.rows).toEqual([row('Desert Eagle | Blaze (Factory New)', '649.99', 75, FN)]);
    expect(page!.rejected).toEqual(
      [
        /Redline \(Field-Tested\): sell_price_text \$11\.34 disagrees with sell_price 1143/,
        /sell_price: price must be > 0/,
        /not a Steam USD price: "471,50 pуб\."/,
        /Howl \(Minimal Wear\): a price of \$3,500\.00 with no listing/,
        /asset_description\.market_hash_name is "AK-47 \| Redline \(Well-Worn\)"/,
        /Mann Co\. Supply Crate Key: appid 440 is not CS2/,
        /not a Steam USD price: "\$12,345,00"/,
        /sell_price_text: expected a non-empty string/,
      ].map((reason, i) => ({ reason: expect.stringMatching(reason), raw: REFUSED.results[i] })),
    );
  });

  it('refuses a non-integer or negative sell_price or sell_listings', async () => {
    const base = USD_0.results[0] as Record<string, unknown>;
    const bad = [
      { ...base, sell_price: 11.43 },
      { ...base, sell_price: '1143' },
      { ...base, sell_listings: -1 },
      { ...base, sell_listings: null },
      { ...base, hash_name: '' },
      { ...base, asset_description: null },
    ];
    const { ctx } = fakeContext(byStart({ 0: { ...USD_0, total_count: bad.length, results: bad } }));
    const [page] = await fetchAll('LISTINGS', ctx);
    expect(page!.rows).toEqual([]);
    expect(page!.rejected.map((r) => r.raw)).toEqual(bad);
  });

  describe('paging ends and envelope faults', () => {
    it('ends when start reaches total_count, also when the total shrinks while paging', async () => {
      const { ctx, calls } = fakeContext(
        byStart({ 0: { ...USD_0, total_count: 12 }, 10: { ...USD_10, total_count: 10, results: [] } }),
      );
      const pages = await fetchAll('LISTINGS', ctx);
      expect(calls.map((c) => c.query.start)).toEqual([0, 10]);
      expect(pages.map((p) => p.rows.length)).toEqual([10]);
    });

    it('an empty catalogue is one request and no page', async () => {
      const { ctx, calls } = fakeContext(byStart({ 0: { ...USD_0, total_count: 0, results: [] } }));
      expect(await fetchAll('LISTINGS', ctx)).toEqual([]);
      expect(calls).toHaveLength(1);
    });

    it('an empty page before total_count is malformed and retried in place, not taken as the end', async () => {
      let served = 0;
      const answer = (path: string, q: Query) => {
        if (q.start === 10 && served++ === 0) return { ...USD_10, results: [] };
        return byStart({ 0: USD_0, 10: USD_10 })(path, q);
      };
      // Once without retry: the cycle fails instead of ending early.
      const once = fakeContext(answer);
      const err = await failure(fetchAll('LISTINGS', once.ctx));
      expect(err).toMatchObject({ code: 'upstream_malformed', retryable: true });
      expect(err.message).toMatch(/empty page at 10 of 12/);
      // With the poller's retry wrapper the same page is asked again; the cycle does not restart.
      served = 0;
      const retrying: FetchContext['request'] = async (fn) => {
        try {
          return await fn();
        } catch {
          return fn();
        }
      };
      const { ctx, calls } = fakeContext(answer, 'usd-4', retrying);
      const pages = await fetchAll('LISTINGS', ctx);
      expect(calls.map((c) => c.query.start)).toEqual([0, 10, 10]);
      expect(pages.map((p) => p.rows.length)).toEqual([10, 2]);
    });

    it.each([
      ['success:false', { ...USD_0, success: false }, /success is false/],
      ['a null body (Steam under load)', null, /answer is not an object/],
      ['no total_count', { ...USD_0, total_count: undefined }, /total_count is undefined/],
      ['a string total_count', { ...USD_0, total_count: '12' }, /total_count is "12"/],
      [
        'the HTML answer (norender ignored)',
        { success: true, total_count: 12, results_html: '<div>' },
        /no results array/,
      ],
    ])('%s is malformed (retryable)', async (_what, body, reason) => {
      const { ctx } = fakeContext(() => body);
      const err = await failure(fetchAll('LISTINGS', ctx));
      expect(err).toMatchObject({ code: 'upstream_malformed', retryable: true });
      expect(err.message).toMatch(reason);
    });

    it('a page that fails after earlier pages keeps what was yielded and ends the fetch with the error', async () => {
      const { ctx } = fakeContext((path, q) => {
        if (q.start === 10) throw new AppError('upstream_rate_limited', 'usd-4: 429 on /market/search/render/');
        return byStart({ 0: USD_0 })(path, q);
      });
      const yielded: Page<'LISTINGS'>[] = [];
      const err = await failure(fetchAll('LISTINGS', ctx, yielded));
      expect(err.code).toBe('upstream_rate_limited');
      expect(yielded.map((p) => p.rows.length)).toEqual([10]);
    });
  });

  it('serves LISTINGS only', async () => {
    expect(steamMarketAdapter.kinds).toEqual(['LISTINGS']);
    const { ctx, calls } = fakeContext(() => USD_0);
    expect(await failure(fetchAll('SALES', ctx))).toMatchObject({ code: 'kind_unsupported' });
    expect(calls).toEqual([]);
  });
});

describe('steam-market limits and headers', () => {
  it('needs no key and sends none; asks for gzip', () => {
    expect(steamMarketAdapter.needsApiKey).toBe(false);
    expect(steamMarketAdapter.requestHeaders?.({})).toEqual({ 'accept-encoding': 'gzip' });
    expect(steamMarketAdapter.requestHeaders?.({ apiKey: 'secret' })).toEqual({ 'accept-encoding': 'gzip' });
    // Steam sends no rate-limit headers to read.
    expect(steamMarketLimits.pauseFromHeaders).toBeUndefined();
    expect(steamMarketAdapter.limits).toBe(steamMarketLimits);
  });

  it('the bucket never lets more than the documented 20 requests into any minute, and uses all 20', () => {
    const { requestsPerSecond: rate, burst } = steamMarketLimits;
    // The greedy schedule of a full bucket: `burst` at once, then one per 1/rate s.
    const times = Array.from({ length: 300 }, (_, k) => (k < burst ? 0 : ((k - burst + 1) / rate) * 1000));
    let most = 0;
    for (const t of times) {
      // The requests of the minute up to this one, both ends included (the strictest reading).
      const inWindow = times.filter((u) => u <= t && u >= t - STEAM_BUDGET.windowMs).length;
      most = Math.max(most, inWindow);
    }
    expect(most).toBe(STEAM_BUDGET.requests);
    expect(burst + rate * (STEAM_BUDGET.windowMs / 1000)).toBeLessThanOrEqual(STEAM_BUDGET.requests);
    expect(STEAM_BUDGET).toEqual({ requests: 20, windowMs: 60_000 });
  });

  it('after a bare 429 waits out the ban: longer than the window, and past the two minutes measured', () => {
    expect(steamMarketLimits.bare429BackoffMs).toBeGreaterThan(STEAM_BUDGET.windowMs);
    expect(steamMarketLimits.bare429BackoffMs).toBeGreaterThan(2 * 60_000);
  });

  describe('through the real client', () => {
    let server: Server | undefined;
    afterEach(async () => {
      await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
      server = undefined;
    });

    async function serve(
      handler: (
        url: string,
        headers: IncomingHttpHeaders,
      ) => { status: number; body: Buffer; headers?: Record<string, string> },
    ) {
      server = createServer((req, res) => {
        const a = handler(req.url ?? '', req.headers);
        res.writeHead(a.status, { 'content-type': 'application/json', ...a.headers });
        res.end(a.body);
      });
      await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
      const client = new UpstreamClient({
        baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        market: 'usd-4',
        headers: steamMarketAdapter.requestHeaders?.({}),
      });
      return client;
    }

    it('a gzip answer is decoded; the request carries the query and accept-encoding', async () => {
      const seen: { url: string; headers: IncomingHttpHeaders }[] = [];
      const client = await serve((url, headers) => {
        seen.push({ url, headers });
        const body = { ...USD_10, start: 0, total_count: 2 };
        return { status: 200, body: gzipSync(JSON.stringify(body)), headers: { 'content-encoding': 'gzip' } };
      });
      try {
        const pages = await fetchPages(steamMarketAdapter, 'LISTINGS', {
          client,
          market: 'usd-4',
          request: (fn) => fn(),
        });
        expect(pages.flatMap((p) => p.rows.map((r) => r.price))).toEqual(['1234.56', '2110.00']);
      } finally {
        await client.close();
      }
      expect(seen).toHaveLength(1);
      expect(seen[0]!.url).toBe(
        `${STEAM_SEARCH_PATH}?appid=${STEAM_APPID}&norender=1&start=0&count=100&sort_column=name&sort_dir=asc&query=&search_descriptions=0`,
      );
      expect(seen[0]!.headers['accept-encoding']).toBe('gzip');
      expect(seen[0]!.headers.authorization).toBeUndefined();
    });

    it("Steam's 429 carries no Retry-After: the error has no retryAfterMs, so the poller waits bare429BackoffMs", async () => {
      const client = await serve(() => ({ status: 429, body: Buffer.from('null') }));
      try {
        const err = await failure(
          fetchPages(steamMarketAdapter, 'LISTINGS', { client, market: 'usd-4', request: (fn) => fn() }),
        );
        expect(err.code).toBe('upstream_rate_limited');
        expect(err.retryable).toBe(true);
        expect(err.details.retryAfterMs).toBeUndefined();
      } finally {
        await client.close();
      }
    });
  });
});

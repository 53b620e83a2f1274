import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliCompressSync } from 'node:zlib';
import { AppError } from '@skinprices/domain';
import { afterEach, describe, expect, it } from 'vitest';
import type { FetchContext, UpstreamLimits } from '../adapter.js';
import { UpstreamClient } from '../client.js';
import type { Kind, Page } from '../rows.js';
import { failure, fakeUpstream, fetchAll as fetchPages, type Query } from '../testing/fake-upstream.js';
import {
  parseSkinportSalesHistory,
  SKINPORT_LIMITS,
  skinportAdapter,
  skinportPrice,
  type SkinportSalesHistoryRow,
} from './skinport.js';

// ---- fixtures shaped like Skinport's documented answers, and a fake upstream serving them ----

const fixture = (name: string): unknown[] =>
  JSON.parse(readFileSync(new URL(`./fixtures/skinport/${name}`, import.meta.url), 'utf8')) as unknown[];
const ITEMS = fixture('items.json') as Record<string, unknown>[];
const SALES_HISTORY = fixture('sales-history.json') as Record<string, unknown>[];

const fakeContext = (answer: (path: string, query: Query) => unknown, market = 'eu-a') => fakeUpstream(market, answer);

const fetchAll = <K extends Kind>(kind: K, ctx: FetchContext, pages: Page<K>[] = []): Promise<Page<K>[]> =>
  fetchPages(skinportAdapter, kind, ctx, {}, pages);

/** The fixture's item `i` with some fields changed. */
const item = (i: number, over: Record<string, unknown> = {}) => ({ ...ITEMS[i], ...over });
const REDLINE = 0;
const FADE_NONE_LISTED = 3;

async function listingsOf(body: unknown) {
  const { ctx, calls } = fakeContext(() => body);
  const pages = await fetchAll('LISTINGS', ctx);
  expect(pages).toHaveLength(1);
  return { page: pages[0]!, calls };
}

const row = (market_hash_name: string, price: string | null, count: number, over: Record<string, unknown>) => ({
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

describe('skinport adapter: GET /v1/items', () => {
  it('reads every fixture item: decimal prices from JSON numbers, names, wear, flags and its own item page', async () => {
    const { page } = await listingsOf(ITEMS);
    expect(page.rejected).toEqual([]);
    expect(page.rows).toEqual([
      row('AK-47 | Redline (Field-Tested)', '12.34', 25, {
        exterior: 'Field-Tested',
        item_page_url: 'https://skinport.com/item/ak-47-redline-field-tested',
      }),
      row('StatTrak™ M4A1-S | Hyper Beast (Minimal Wear)', '41.00', 3, {
        exterior: 'Minimal Wear',
        stattrak: true,
        item_page_url: 'https://skinport.com/item/stattrak-m4a1-s-hyper-beast-minimal-wear',
      }),
      // No `version` in /v1/items: a Doppler knife is one entry for all phases, phase ''.
      row('★ Karambit | Doppler (Factory New)', '1450.00', 17, {
        exterior: 'Factory New',
        item_page_url: 'https://skinport.com/item/karambit-doppler-factory-new',
      }),
      // Listed with no offer: quantity 0 and every listing price null → price null, count 0.
      row('★ M9 Bayonet | Fade (Factory New)', null, 0, {
        exterior: 'Factory New',
        item_page_url: 'https://skinport.com/item/m9-bayonet-fade-factory-new',
      }),
      row('Souvenir AWP | Dragon Lore (Factory New)', '98500.50', 1, {
        exterior: 'Factory New',
        souvenir: true,
        item_page_url: 'https://skinport.com/item/souvenir-awp-dragon-lore-factory-new',
      }),
      row('Sticker | Crown (Foil)', '989.99', 6, { item_page_url: 'https://skinport.com/item/sticker-crown-foil' }),
      row('Kilowatt Case', '0.03', 2417, { item_page_url: 'https://skinport.com/item/kilowatt-case' }),
    ]);
  });

  it('asks once for the whole catalogue of CS2 in the market currency, every listing (tradable=0)', async () => {
    const { calls } = await listingsOf(ITEMS);
    expect(calls).toEqual([{ path: '/v1/items', query: { app_id: 730, currency: 'EUR', tradable: 0 } }]);
    const usd = fakeContext(() => [item(REDLINE, { currency: 'USD' })], 'usd-1');
    const [page] = await fetchAll('LISTINGS', usd.ctx);
    expect(usd.calls[0]?.query).toMatchObject({ currency: 'USD' });
    expect(page?.rows.map((r) => r.price)).toEqual(['12.34']);
  });

  it('an empty catalogue is one empty page after one request: no paging, nothing more to ask', async () => {
    const { page, calls } = await listingsOf([]);
    expect(page).toEqual({ rows: [], rejected: [] });
    expect(calls).toHaveLength(1);
  });

  it('runs its one request inside the poller retry wrapper, so a retried request is the same request', async () => {
    let attempts = 0;
    const { ctx, calls } = fakeUpstream(
      'eu-a',
      () => {
        attempts++;
        if (attempts === 1) throw new AppError('upstream_unavailable', 'eu-a: HTTP 503 on /v1/items');
        return [item(REDLINE)];
      },
      async (fn) => {
        try {
          return await fn();
        } catch {
          return fn();
        }
      },
    );
    const pages = await fetchAll('LISTINGS', ctx);
    expect(calls).toHaveLength(2);
    expect(pages.map((p) => p.rows.length)).toEqual([1]);
  });

  it('an answer that is not an array is upstream_malformed (retryable), and nothing is yielded', async () => {
    for (const body of [{ items: ITEMS }, null, 'Not Acceptable']) {
      const { ctx } = fakeContext(() => body);
      const yielded: Page<'LISTINGS'>[] = [];
      const err = await failure(fetchAll('LISTINGS', ctx, yielded));
      expect(err.code).toBe('upstream_malformed');
      expect(err.retryable).toBe(true);
      expect(yielded).toEqual([]);
    }
  });

  it('an upstream error ends the fetch with that error and yields nothing (no partial catalogue)', async () => {
    const { ctx } = fakeContext(() => {
      throw new AppError('upstream_rejected', 'eu-a: HTTP 406 on /v1/items', { details: { status: 406 } });
    });
    const yielded: Page<'LISTINGS'>[] = [];
    const err = await failure(fetchAll('LISTINGS', ctx, yielded));
    expect(err).toMatchObject({ code: 'upstream_rejected', retryable: false });
    expect(yielded).toEqual([]);
  });

  it('refuses every kind but LISTINGS without asking', async () => {
    const { ctx, calls } = fakeContext(() => ITEMS);
    for (const kind of ['BUYORDERS', 'SALES', 'HISTORY'] as const)
      expect((await failure(fetchAll(kind, ctx))).code).toBe('kind_unsupported');
    expect(calls).toEqual([]);
  });

  describe('rows it refuses (rejected rows; the rest of the catalogue still counts)', () => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ['listed without min_price', item(REDLINE, { min_price: null }), /min_price missing although quantity is 25/],
      [
        'an offer although quantity is 0',
        item(FADE_NONE_LISTED, { min_price: 310.5 }),
        /min_price 310.50 although quantity is 0/,
      ],
      [
        'a mean although quantity is 0',
        item(FADE_NONE_LISTED, { mean_price: 1 }),
        /mean_price 1.00 although quantity is 0/,
      ],
      ['a zero price', item(REDLINE, { min_price: 0 }), /min_price: price must be > 0/],
      ['a negative price', item(REDLINE, { min_price: -12.34 }), /min_price: -12.34 is not a plain decimal/],
      ['a price as a string', item(REDLINE, { min_price: '12.34' }), /min_price: expected a JSON number/],
      ['three decimals (not rounded)', item(REDLINE, { min_price: 12.345 }), /12.345 has more than 2 decimals/],
      ['float noise', item(REDLINE, { min_price: 0.1 + 0.2 }), /0.30000000000000004 has more than 2 decimals/],
      ['a tiny price printed with an exponent', item(REDLINE, { min_price: 1e-7 }), /1e-7 is not a plain decimal/],
      ['a bad max_price', item(REDLINE, { max_price: 19.999 }), /max_price: 19.999/],
      ['a bad suggested_price', item(REDLINE, { suggested_price: 'n/a' }), /suggested_price: expected a JSON number/],
      ['another currency than asked', item(REDLINE, { currency: 'USD' }), /currency: asked for EUR, got USD/],
      ['a fractional quantity', item(REDLINE, { quantity: 2.5 }), /quantity: expected an integer >= 0/],
      ['a negative quantity', item(REDLINE, { quantity: -1 }), /quantity: expected an integer >= 0/],
      ['no name', item(REDLINE, { market_hash_name: '' }), /market_hash_name: expected a non-empty string/],
      ['no item_page', item(REDLINE, { item_page: undefined }), /item_page: expected a non-empty string/],
      [
        'an item_page that is no link',
        item(REDLINE, { item_page: 'javascript:alert(1)' }),
        /item_page: not an http\(s\) link/,
      ],
      ['a market_page that is no URL', item(REDLINE, { market_page: 'skinport market' }), /market_page: not a URL/],
      [
        'created_at as a date string',
        item(REDLINE, { created_at: '2018-09-03' }),
        /created_at: expected an integer >= 1/,
      ],
      [
        'updated_at in fractional seconds',
        item(REDLINE, { updated_at: 1568073728.5 }),
        /updated_at: expected an integer/,
      ],
      ['not an object', ['AK-47 | Redline (Field-Tested)', 12.34] as never, /not an object/],
    ];

    it.each(cases)('%s', async (_what, bad, reason) => {
      const good = item(REDLINE, { market_hash_name: 'AK-47 | Redline (Battle-Scarred)' });
      const { page } = await listingsOf([bad, good]);
      expect(page.rejected).toEqual([{ reason: expect.stringMatching(reason), raw: bad }]);
      expect(page.rows.map((r) => [r.market_hash_name, r.price, r.count])).toEqual([
        ['AK-47 | Redline (Battle-Scarred)', '12.34', 25],
      ]);
    });
  });
});

describe('skinportPrice: JSON numbers to decimal strings without float arithmetic', () => {
  const of = (v: unknown) => skinportPrice({ p: v }, 'p');

  it.each([
    [12.34, '12.34'],
    [12.5, '12.50'],
    [250, '250.00'],
    [0.03, '0.03'],
    [0.1, '0.10'],
    [98500.5, '98500.50'],
    [1234567890123.45, '1234567890123.45'],
  ])('%s → %s', (v, want) => expect(of(v)).toBe(want));

  it('null and absent are "none", for the caller to judge', () => {
    expect(of(null)).toBeNull();
    expect(of(undefined)).toBeNull();
  });

  it.each([
    [12.345],
    [0.001],
    [1e-7],
    [1e21],
    [12345678901234.56],
    [0],
    [-0.5],
    [Number.NaN],
    [Infinity],
    ['1.00'],
    [true],
  ])('refuses %s', (v) => {
    expect(() => of(v)).toThrow(AppError);
  });

  it('every 2-decimal literal Skinport can print reads back as itself (0.00 … 2000.00 and large ones)', () => {
    const texts: string[] = [];
    for (let minor = 1; minor <= 200_000; minor++)
      texts.push(`${Math.floor(minor / 100)}.${String(minor % 100).padStart(2, '0')}`);
    for (const whole of ['99999', '123456789', '9999999999999'])
      for (const frac of ['01', '10', '29', '57', '99']) texts.push(`${whole}.${frac}`);
    const wrong = texts.filter((t) => of(JSON.parse(t)) !== t);
    expect(wrong).toEqual([]);
  });
});

describe('skinport limits: 8 requests per 5 minutes', () => {
  /**
   * When requests leave a token bucket run at `limits` the way the poller runs it (TokenBucket:
   * `burst` tokens at the start, refilled at `requestsPerSecond`, at least one token), each sent
   * as soon as it may be.
   */
  function sendTimes(limits: UpstreamLimits, n: number): number[] {
    const burst = Math.max(1, limits.burst);
    let tokens = burst;
    let last = 0;
    let now = 0;
    const out: number[] = [];
    while (out.length < n) {
      tokens = Math.min(burst, tokens + ((now - last) / 1000) * limits.requestsPerSecond);
      last = now;
      if (tokens >= 1) {
        tokens -= 1;
        out.push(now);
      } else now += Math.ceil(((1 - tokens) / limits.requestsPerSecond) * 1000);
    }
    return out;
  }

  /** The most requests any window of `ms` (half-open, starting at a request) holds. */
  const mostInWindow = (times: number[], ms: number) =>
    Math.max(...times.map((t) => times.filter((u) => u >= t && u < t + ms).length));

  const FIVE_MIN = 300_000;

  it('never sends more than 8 in any 5 minutes, one every 37.5 s at most', () => {
    const times = sendTimes(SKINPORT_LIMITS, 40);
    expect(mostInWindow(times, FIVE_MIN)).toBe(8);
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(37_500);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(37_501);
  });

  it('a burst of 8 at the same rate would send 15 in the first 5 minutes: why the burst is 1', () => {
    const times = sendTimes({ ...SKINPORT_LIMITS, burst: 8 }, 40);
    expect(mostInWindow(times, FIVE_MIN)).toBe(15);
  });

  it('waits one whole window after a 429 without Retry-After', () => {
    expect(SKINPORT_LIMITS.bare429BackoffMs).toBe(FIVE_MIN);
    expect(skinportAdapter.limits).toBe(SKINPORT_LIMITS);
  });
});

describe('skinport over HTTP: Brotli is required', () => {
  let server: Server | undefined;
  const seen: IncomingHttpHeaders[] = [];
  afterEach(async () => {
    await new Promise((r) => server?.close(r));
    server = undefined;
    seen.length = 0;
  });

  /** A stand-in for api.skinport.com: 406 without `br`, else the fixture in Brotli. */
  async function skinport(): Promise<string> {
    server = createServer((req, res) => {
      seen.push(req.headers);
      if (!/(^|,)\s*br\s*(;|,|$)/.test(String(req.headers['accept-encoding'] ?? ''))) {
        res.writeHead(406, { 'content-type': 'application/json' });
        return void res.end(JSON.stringify({ error: 'Not Acceptable' }));
      }
      const body = brotliCompressSync(JSON.stringify(ITEMS));
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-encoding': 'br',
        'content-length': body.length,
      });
      res.end(body);
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(server!.address() as AddressInfo).port}`;
  }

  const contextFor = (client: UpstreamClient): FetchContext => ({ client, market: 'eu-a', request: (fn) => fn() });

  it('sends Accept-Encoding: br and needs no key; the client decodes the Brotli answer', async () => {
    expect(skinportAdapter.needsApiKey).toBe(false);
    const headers = skinportAdapter.requestHeaders?.({});
    expect(headers).toEqual({ 'accept-encoding': 'br' });
    const client = new UpstreamClient({ baseUrl: await skinport(), market: 'eu-a', headers });
    try {
      const [page] = await fetchAll('LISTINGS', contextFor(client));
      expect(page?.rows).toHaveLength(ITEMS.length);
      expect(page?.rows[0]).toMatchObject({ market_hash_name: 'AK-47 | Redline (Field-Tested)', price: '12.34' });
      expect(seen[0]?.['accept-encoding']).toBe('br');
    } finally {
      await client.close();
    }
  });

  it('without the header Skinport answers 406, which is not worth retrying', async () => {
    const client = new UpstreamClient({ baseUrl: await skinport(), market: 'eu-a' });
    try {
      const err = await failure(fetchAll('LISTINGS', contextFor(client)));
      expect(err).toMatchObject({ code: 'upstream_rejected', retryable: false, details: { status: 406 } });
    } finally {
      await client.close();
    }
  });
});

describe('parseSkinportSalesHistory (GET /v1/sales/history; parsed, not ingested yet)', () => {
  const window = (
    min: string | null,
    max: string | null,
    avg: string | null,
    median: string | null,
    volume: number,
  ) => ({
    min,
    max,
    avg,
    median,
    volume,
  });
  const NONE = window(null, null, null, null, 0);

  it('reads every field of the fixture: decimal strings, null where nothing sold, version → phase', () => {
    const { rows, rejected } = parseSkinportSalesHistory(SALES_HISTORY, 'EUR');
    expect(rejected).toEqual([]);
    expect(rows).toEqual<SkinportSalesHistoryRow[]>([
      {
        market_hash_name: 'Glove Case Key',
        phase: '',
        currency: 'EUR',
        item_page: 'https://skinport.com/item/glove-case-key',
        market_page: 'https://skinport.com/market?item=Glove%20Case%20Key&cat=Key',
        last_24_hours: window('8.27', '8.27', '8.27', '8.27', 1),
        last_7_days: window('8.27', '8.27', '8.27', '8.27', 4),
        last_30_days: window('6.90', '8.27', '7.58', '7.49', 14),
        last_90_days: window('5.32', '8.27', '6.61', '6.50', 49),
      },
      {
        market_hash_name: '★ Karambit | Slaughter (Minimal Wear)',
        phase: '',
        currency: 'EUR',
        item_page: 'https://skinport.com/item/karambit-slaughter-minimal-wear',
        market_page: 'https://skinport.com/market?item=Slaughter&cat=Knife&type=Karambit',
        last_24_hours: NONE,
        last_7_days: NONE,
        last_30_days: window('250.00', '250.00', '250.00', '250.00', 1),
        last_90_days: window('250.00', '300.00', '275.00', '275.00', 2),
      },
      {
        market_hash_name: '★ Karambit | Doppler (Factory New)',
        phase: 'Ruby',
        currency: 'EUR',
        item_page: 'https://skinport.com/item/karambit-doppler-factory-new',
        market_page: 'https://skinport.com/market?item=Doppler&cat=Knife&type=Karambit',
        last_24_hours: NONE,
        last_7_days: window('9650.50', '9650.50', '9650.50', '9650.50', 1),
        last_30_days: window('9100.00', '9800.00', '9516.83', '9650.50', 3),
        last_90_days: window('8800.00', '9800.00', '9314.10', '9375.25', 6),
      },
    ]);
  });

  it('an absent version is no phase, as null is', () => {
    const { version: _v, ...without } = SALES_HISTORY[0]!;
    expect(parseSkinportSalesHistory([without], 'EUR').rows[0]?.phase).toBe('');
  });

  const base = SALES_HISTORY[0]!;
  const bad: [string, Record<string, unknown>, RegExp][] = [
    [
      'a price although nothing sold',
      { ...base, last_24_hours: { ...window(null, null, null, null, 0), min: 8.27 } },
      /last_24_hours.min 8.27 with volume 0/,
    ],
    [
      'a null average although 4 sold',
      { ...base, last_7_days: { min: 8.27, max: 8.27, avg: null, median: 8.27, volume: 4 } },
      /last_7_days.avg null with volume 4/,
    ],
    [
      'an average with 3 decimals',
      { ...base, last_30_days: { min: 6.9, max: 8.27, avg: 7.583, median: 7.49, volume: 14 } },
      /avg: 7.583 has more than 2 decimals/,
    ],
    ['a window missing', { ...base, last_90_days: undefined }, /last_90_days: not an object/],
    [
      'no volume',
      { ...base, last_24_hours: { min: null, max: null, avg: null, median: null } },
      /volume: expected an integer/,
    ],
    ['an unknown version', { ...base, version: 'Phase 9' }, /unknown phase 'Phase 9'/],
    ['another currency', { ...base, currency: 'USD' }, /currency: asked for EUR, got USD/],
  ];
  it.each(bad)('refuses %s as a rejected row; the other rows still parse', (_what, raw, reason) => {
    const { rows, rejected } = parseSkinportSalesHistory([raw, SALES_HISTORY[1]], 'EUR');
    expect(rejected).toEqual([{ reason: expect.stringMatching(reason), raw }]);
    expect(rows.map((r) => r.market_hash_name)).toEqual(['★ Karambit | Slaughter (Minimal Wear)']);
  });

  it('a body that is not an array is upstream_malformed', () => {
    expect(() => parseSkinportSalesHistory({ data: SALES_HISTORY }, 'EUR')).toThrow(
      expect.objectContaining({ code: 'upstream_malformed' }),
    );
  });
});

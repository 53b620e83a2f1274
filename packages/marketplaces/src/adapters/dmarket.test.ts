import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { AppError, Dec } from '@skinprices/domain';
import { afterEach, describe, expect, it } from 'vitest';
import type { FetchContext } from '../adapter.js';
import { UpstreamClient } from '../client.js';
import type { Kind, Page } from '../rows.js';
import { failure, fetchAll as fetchPages, fakeUpstream, type Query } from '../testing/fake-upstream.js';
import {
  DMARKET_ANONYMOUS_RPS,
  DMARKET_CS2,
  DMARKET_LIMITS,
  DMARKET_PAGE,
  DMARKET_PATH,
  MAX_HEADER_PAUSE_MS,
  dmarketAdapter,
  dmarketPause,
} from './dmarket.js';

// ---- fixtures shaped like DMarket's answers (every field a client library reads) ----

interface Body {
  objects: Record<string, unknown>[];
  total: Record<string, number>;
  cursor: string;
}
const fixture = (name: string): Body =>
  JSON.parse(readFileSync(new URL(`./fixtures/dmarket/${name}`, import.meta.url), 'utf8')) as Body;
const PAGE_1 = fixture('market-items-page-1.json');
const PAGE_2 = fixture('market-items-page-2.json');
const REFUSED = fixture('market-items-refused.json');

/** Serves `pages[cursor ?? '']`; any other request fails the test loudly. */
function byCursor(pages: Record<string, unknown>) {
  return (path: string, q: Query): unknown => {
    expect(path).toBe(DMARKET_PATH);
    const key = q.cursor === undefined ? '' : String(q.cursor);
    if (!(key in pages)) throw new Error(`unexpected cursor ${key}`);
    return pages[key];
  };
}

const MARKET = 'usd-2';
const fakeContext = (answer: (path: string, query: Query) => unknown, request?: FetchContext['request']) =>
  fakeUpstream(MARKET, answer, request);
const fetchAll = <K extends Kind>(kind: K, ctx: FetchContext, pages: Page<K>[] = []): Promise<Page<K>[]> =>
  fetchPages(dmarketAdapter, kind, ctx, {}, pages);

const POSEIDON = 'M4A4 | Poseidon (Factory New)';
const KARAMBIT = '★ Karambit | Doppler (Factory New)';
const REDLINE = 'StatTrak™ AK-47 | Redline (Field-Tested)';
const STICKER = 'Sticker | nitr0 (Foil) | Cluj-Napoca 2015';
const SAFARI = 'Souvenir AWP | Safari Mesh (Battle-Scarred)';
const VANILLA = '★ Karambit';

const row = (market_hash_name: string, price: string, count: number, over: Record<string, unknown> = {}) => ({
  market_hash_name,
  phase: '',
  price,
  count,
  exterior: 'Factory New',
  stattrak: false,
  souvenir: false,
  template_id: null,
  item_page_url: null,
  ...over,
});

const QUERY = { gameId: DMARKET_CS2, limit: DMARKET_PAGE, orderBy: 'price', orderDir: 'asc', currency: 'USD' };

/** A copy of an offer with some fields replaced. */
const withOffer = (o: Record<string, unknown> | undefined, over: Record<string, unknown>) => ({ ...o, ...over });

describe('dmarket adapter: fields', () => {
  it('derives the lowest price (cent strings → decimal) and count per (title, phase) across all pages', async () => {
    const { ctx, calls } = fakeContext(byCursor({ '': PAGE_1, [PAGE_1.cursor]: PAGE_2 }));
    const pages = await fetchAll('LISTINGS', ctx);
    // The first page without a cursor, the next with the cursor the first answer gave.
    expect(calls).toEqual([
      { path: DMARKET_PATH, query: { ...QUERY, cursor: undefined } },
      { path: DMARKET_PATH, query: { ...QUERY, cursor: PAGE_1.cursor } },
    ]);
    // One page, yielded only after the last one: a minimum over page 1 alone would be too high.
    expect(pages).toEqual([
      {
        rows: [
          // 3 cents; no wear: a sticker has no exterior in extra.
          row(STICKER, '0.03', 1, { exterior: null }),
          row(SAFARI, '1.20', 1, { exterior: 'Battle-Scarred', souvenir: true }),
          // 45.99 and 47.00; the 45.99 offer repeated on page 2 counts once.
          row(REDLINE, '45.99', 2, { exterior: 'Field-Tested', stattrak: true }),
          // A vanilla knife: exterior "not painted", none in the name.
          row(VANILLA, '450.00', 1, { exterior: null }),
          // extra.phase in DMarket's spelling ("phase-2", "ruby"), normalised; phases stay apart.
          row(KARAMBIT, '980.00', 2, { phase: 'Phase 2' }),
          // 2600.00 on page 1, 2550.00 on page 2; suggestedPrice (2400.00) is no offer.
          row(POSEIDON, '2550.00', 2),
          row(KARAMBIT, '12345.67', 2, { phase: 'Ruby' }),
        ],
        rejected: [],
      },
    ]);
  });

  it('reads price.USD only: DMC, suggested, instant and discount prices never become the price', async () => {
    const [offer] = PAGE_1.objects.filter((o) => o.title === POSEIDON);
    const cheapElsewhere = withOffer(offer, {
      price: { DMC: '1', USD: '260000' },
      suggestedPrice: { DMC: '1', USD: '1' },
      instantPrice: { DMC: '1', USD: '1' },
      discountPrice: { DMC: '1', USD: '1' },
      exchangePrice: { DMC: '1', USD: '1' },
    });
    const { ctx } = fakeContext(byCursor({ '': { objects: [cheapElsewhere], cursor: '' } }));
    const [page] = await fetchAll('LISTINGS', ctx);
    expect(page?.rows).toEqual([row(POSEIDON, '2600.00', 1)]);
  });

  it('compares prices as decimals: "999" cents is below "1000", whatever the string order says', async () => {
    const [a] = PAGE_1.objects.filter((o) => o.title === POSEIDON);
    const dear = withOffer(a, { itemId: 'x-1', price: { DMC: '1', USD: '1000' } });
    const cheap = withOffer(a, { itemId: 'x-2', price: { DMC: '1', USD: '999' } });
    const { ctx } = fakeContext(byCursor({ '': { objects: [dear, cheap], cursor: '' } }));
    const [page] = await fetchAll('LISTINGS', ctx);
    expect(page?.rows).toEqual([row(POSEIDON, '9.99', 2)]);
  });

  it('counts an offer by its amount (a stack counts as many)', async () => {
    const [a] = PAGE_1.objects.filter((o) => o.title === STICKER);
    const { ctx } = fakeContext(byCursor({ '': { objects: [withOffer(a, { amount: 3 })], cursor: '' } }));
    const [page] = await fetchAll('LISTINGS', ctx);
    expect(page?.rows).toEqual([row(STICKER, '0.03', 3, { exterior: null })]);
  });

  it('refuses offers it cannot trust without counting them; a good one beside them still counts', async () => {
    const { ctx } = fakeContext(byCursor({ '': REFUSED }));
    const [page] = await fetchAll('LISTINGS', ctx);
    const raws = REFUSED.objects;
    expect(page?.rows).toEqual([row(REDLINE, '47.00', 1, { exterior: 'Field-Tested', stattrak: true })]);
    expect(page?.rejected).toEqual([
      { reason: 'price.USD: price must be > 0, got 0.00', raw: raws[0] },
      { reason: 'price.USD: expected integer cents as a string, got 2600', raw: raws[1] },
      { reason: 'price.USD: expected integer cents as a string, got "26.00"', raw: raws[2] },
      { reason: 'price.USD: expected integer cents as a string, got undefined', raw: raws[3] },
      { reason: "unknown phase 'phase-9'", raw: raws[4] },
      { reason: "phaseTitle 'Ruby' contradicts phase 'phase-2'", raw: raws[5] },
      { reason: `exterior 'minimal wear' contradicts the name '${REDLINE}'`, raw: raws[6] },
      { reason: "category 'stattrak™' contradicts the name", raw: raws[7] },
      { reason: 'amount: expected an integer >= 1, got 0', raw: raws[8] },
      { reason: 'title: expected a non-empty string', raw: raws[9] },
      { reason: 'gameId "9a92" is not CS2', raw: raws[10] },
      { reason: 'extra: not an object', raw: raws[11] },
    ]);
    // Not one invented price: every row that came out has a price above zero.
    for (const r of page?.rows ?? []) expect(new Dec(r.price as string).greaterThan(0)).toBe(true);
  });

  it('refuses an offer without an itemId (it could not be told from a repeat), and one that is not an object', async () => {
    const { itemId: _id, ...noId } = PAGE_2.objects[1] as Record<string, unknown>;
    const { ctx } = fakeContext(byCursor({ '': { objects: [noId, 'offer'], cursor: '' } }));
    const [page] = await fetchAll('LISTINGS', ctx);
    expect(page).toEqual({
      rows: [],
      rejected: [
        { reason: 'itemId: expected a non-empty string', raw: noId },
        { reason: 'offer: not an object', raw: 'offer' },
      ],
    });
  });

  it('refuses a marketplace of another currency before asking: DMarket prices are US cents', async () => {
    const { ctx, calls } = fakeUpstream('eu-a', byCursor({ '': PAGE_2 }));
    const err = await failure(fetchAll('LISTINGS', ctx));
    expect(err.code).toBe('config_invalid');
    expect(err.retryable).toBe(false);
    expect(calls).toEqual([]);
  });
});

describe('dmarket adapter: paging', () => {
  it('ends on a page whose cursor is empty, missing or null', async () => {
    for (const cursor of ['', undefined, null]) {
      const { ctx, calls } = fakeContext(byCursor({ '': { ...PAGE_2, cursor } }));
      const [page] = await fetchAll('LISTINGS', ctx);
      expect(page?.rows.map((r) => r.count)).toEqual([1, 1, 1, 1]);
      expect(calls).toHaveLength(1);
    }
  });

  it('ignores total: it stops at 10,000, so a total below what arrived does not end the walk early', async () => {
    const capped = { offers: 10_000, targets: 0, items: 0, completedOffers: 0, closedTargets: 0 };
    const { ctx, calls } = fakeContext(
      byCursor({ '': { ...PAGE_1, total: { ...capped, offers: 1 } }, [PAGE_1.cursor]: { ...PAGE_2, total: capped } }),
    );
    const [page] = await fetchAll('LISTINGS', ctx);
    expect(calls).toHaveLength(2);
    expect(page?.rows).toHaveLength(7);
  });

  it('an empty market is one empty page', async () => {
    const { ctx } = fakeContext(byCursor({ '': { objects: [], total: { offers: 0 }, cursor: '' } }));
    expect(await fetchAll('LISTINGS', ctx)).toEqual([{ rows: [], rejected: [] }]);
  });

  it('an empty page that names a next cursor is upstream_malformed and retryable; nothing is yielded', async () => {
    const { ctx } = fakeContext(byCursor({ '': PAGE_1, [PAGE_1.cursor]: { objects: [], cursor: 'eyJvIjoxMDB9' } }));
    const yielded: Page<'LISTINGS'>[] = [];
    const err = await failure(fetchAll('LISTINGS', ctx, yielded));
    expect(err.code).toBe('upstream_malformed');
    expect(err.retryable).toBe(true);
    expect(yielded).toEqual([]);
  });

  it('a cursor that comes back again is a loop: not retryable, nothing yielded', async () => {
    const again = { ...PAGE_2, cursor: PAGE_1.cursor };
    const { ctx, calls } = fakeContext(byCursor({ '': PAGE_1, [PAGE_1.cursor]: again }));
    const yielded: Page<'LISTINGS'>[] = [];
    const err = await failure(fetchAll('LISTINGS', ctx, yielded));
    expect(err.code).toBe('upstream_malformed');
    expect(err.retryable).toBe(false);
    expect(calls).toHaveLength(2);
    expect(yielded).toEqual([]);
  });

  it.each([
    ['objects is not a list', { objects: { items: [] }, cursor: '' }],
    ['objects is not a list', { items: [], cursor: '' }],
    ['cursor is not a string', { objects: [], cursor: 7 }],
    ['answer is not an object', [PAGE_2.objects[0]]],
    ['answer is not an object', 'Too Many Requests'],
  ])('an answer whose %s is upstream_malformed', async (what, body) => {
    const { ctx } = fakeContext(byCursor({ '': body }));
    const err = await failure(fetchAll('LISTINGS', ctx));
    expect(err.code).toBe('upstream_malformed');
    expect(err.message).toContain(what);
  });

  it('a page that fails fails the whole fetch and yields nothing: no minimum over part of the offers', async () => {
    const { ctx } = fakeContext((path, q) => {
      if (q.cursor !== undefined) throw new AppError('upstream_rejected', `${MARKET}: HTTP 400 on ${DMARKET_PATH}`);
      return byCursor({ '': PAGE_1 })(path, q);
    });
    const yielded: Page<'LISTINGS'>[] = [];
    const err = await failure(fetchAll('LISTINGS', ctx, yielded));
    expect(err.code).toBe('upstream_rejected');
    expect(yielded).toEqual([]);
  });

  it('each page goes through the poller request wrapper: a retried page does not restart the walk', async () => {
    let failOnce = true;
    const answer = byCursor({ '': PAGE_1, [PAGE_1.cursor]: PAGE_2 });
    const { ctx, calls } = fakeContext(
      (path, q) => {
        if (q.cursor !== undefined && failOnce) {
          failOnce = false;
          throw new AppError('upstream_rate_limited', `${MARKET}: 429 on ${DMARKET_PATH}`);
        }
        return answer(path, q);
      },
      async (fn) => {
        try {
          return await fn();
        } catch (err) {
          if (err instanceof AppError && err.retryable) return fn();
          throw err;
        }
      },
    );
    const [page] = await fetchAll('LISTINGS', ctx);
    expect(calls.map((c) => c.query.cursor)).toEqual([undefined, PAGE_1.cursor, PAGE_1.cursor]);
    expect(page?.rows.find((r) => r.market_hash_name === POSEIDON)).toEqual(row(POSEIDON, '2550.00', 2));
  });

  it('refuses every kind but LISTINGS without asking the upstream', async () => {
    const { ctx, calls } = fakeContext(byCursor({}));
    expect((await failure(fetchAll('SALES', ctx))).code).toBe('kind_unsupported');
    expect((await failure(fetchAll('BUYORDERS', ctx))).code).toBe('kind_unsupported');
    expect(calls).toEqual([]);
    expect(dmarketAdapter.kinds).toEqual(['LISTINGS']);
  });
});

describe('dmarket adapter: headers', () => {
  it('needs no key and sends none (signed access needs a per-request signature); asks for gzip', () => {
    expect(dmarketAdapter.needsApiKey).toBe(false);
    expect(dmarketAdapter.requestHeaders?.({ apiKey: 'k3y' })).toEqual({ 'accept-encoding': 'gzip' });
    expect(dmarketAdapter.requestHeaders?.({})).toEqual({ 'accept-encoding': 'gzip' });
  });

  describe('through a real client', () => {
    let server: Server | undefined;
    afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

    it('the query reaches the upstream, a gzip answer decodes, and the rate-limit headers pause', async () => {
      const seen: { url: string; headers: IncomingHttpHeaders }[] = [];
      server = createServer((req, res) => {
        seen.push({ url: req.url ?? '', headers: req.headers });
        const last = (req.url ?? '').includes('cursor=');
        res.writeHead(200, {
          'content-type': 'application/json',
          'content-encoding': 'gzip',
          'x-ratelimit-limit-second': '2',
          'x-ratelimit-remaining-second': last ? '0' : '1',
          'ratelimit-limit': '2',
          'ratelimit-remaining': last ? '0' : '1',
          'ratelimit-reset': '1',
        });
        res.end(gzipSync(JSON.stringify(last ? PAGE_2 : PAGE_1)));
      });
      await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
      const client = new UpstreamClient({
        baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        market: MARKET,
        headers: dmarketAdapter.requestHeaders?.({}),
      });
      const pauses: (number | undefined)[] = [];
      const now = Date.UTC(2026, 10, 20, 12);
      client.onHeaders((h) => pauses.push(DMARKET_LIMITS.pauseFromHeaders?.(h, now)));
      try {
        const [page] = await fetchAll('LISTINGS', { client, market: MARKET, request: (fn) => fn() });
        expect(page?.rows).toHaveLength(7);
      } finally {
        await client.close();
      }
      expect(seen[0]?.headers['accept-encoding']).toBe('gzip');
      expect(seen[0]?.headers['x-api-key']).toBeUndefined();
      const first = new URL(seen[0]!.url, 'http://x').searchParams;
      expect(Object.fromEntries(first)).toEqual({
        gameId: 'a8db',
        limit: '100',
        orderBy: 'price',
        orderDir: 'asc',
        currency: 'USD',
      });
      expect(new URL(seen[1]!.url, 'http://x').searchParams.get('cursor')).toBe(PAGE_1.cursor);
      expect(pauses).toEqual([undefined, now + 1000]);
    });
  });
});

describe('dmarket limits', () => {
  const now = Date.UTC(2026, 10, 20, 5, 50);
  const h = (over: Record<string, string | undefined>) => ({
    'x-ratelimit-limit-second': '2',
    'x-ratelimit-remaining-second': '1',
    'ratelimit-limit': '2',
    'ratelimit-remaining': '1',
    'ratelimit-reset': '1',
    ...over,
  });

  it('documents the anonymous budget of the market items endpoint: 2 a second', () => {
    expect(DMARKET_ANONYMOUS_RPS).toBe(2);
    expect(DMARKET_LIMITS.requestsPerSecond).toBe(2);
    expect(DMARKET_LIMITS.bare429BackoffMs).toBe(1000);
  });

  it('pauses for RateLimit-Reset seconds once nothing remains (either remaining header)', () => {
    expect(dmarketPause(h({ 'ratelimit-remaining': '0' }), now)).toBe(now + 1000);
    expect(dmarketPause(h({ 'x-ratelimit-remaining-second': '0' }), now)).toBe(now + 1000);
    expect(dmarketPause(h({ 'ratelimit-remaining': '0', 'ratelimit-reset': '3' }), now)).toBe(now + 3000);
    // Only the per-second header: its window is a second.
    expect(dmarketPause({ 'x-ratelimit-remaining-second': '0' }, now)).toBe(now + 1000);
    expect(dmarketPause({ 'ratelimit-remaining': ['0'], 'ratelimit-reset': ['2'] }, now)).toBe(now + 2000);
  });

  it('says nothing while requests remain, or when the headers are missing or garbled', () => {
    expect(dmarketPause(h({}), now)).toBeUndefined();
    expect(dmarketPause({}, now)).toBeUndefined();
    expect(dmarketPause(h({ 'ratelimit-remaining': 'none', 'x-ratelimit-remaining-second': undefined }), now)).toBe(
      undefined,
    );
    expect(dmarketPause(h({ 'ratelimit-remaining': '0', 'ratelimit-reset': 'soon' }), now)).toBeUndefined();
    expect(dmarketPause(h({ 'ratelimit-remaining': '0', 'ratelimit-reset': '0' }), now)).toBeUndefined();
  });

  it('caps an implausible reset (milliseconds sent as seconds) at a minute', () => {
    expect(dmarketPause(h({ 'ratelimit-remaining': '0', 'ratelimit-reset': String(now) }), now)).toBe(
      now + MAX_HEADER_PAUSE_MS,
    );
  });

  /**
   * The poller's token bucket (burst, then a token every 1/rate s) against DMarket's fixed
   * one-second window of 2: asking as fast as the bucket lets it, a client is never refused.
   */
  it('the bucket alone never sends more than 2 requests within one one-second window', () => {
    const { requestsPerSecond: rate, burst } = DMARKET_LIMITS;
    let t = Date.UTC(2026, 10, 20, 5, 59, 59, 700);
    let tokens = burst;
    let last = t;
    const sent: number[] = [];
    while (sent.length < 40) {
      tokens = Math.min(burst, tokens + ((t - last) / 1000) * rate);
      last = t;
      if (tokens >= 1) {
        tokens -= 1;
        sent.push(t);
      } else t += Math.ceil(((1 - tokens) / rate) * 1000);
    }
    const perWindow = new Map<number, number>();
    for (const s of sent) perWindow.set(Math.floor(s / 1000), (perWindow.get(Math.floor(s / 1000)) ?? 0) + 1);
    expect(Math.max(...perWindow.values())).toBe(DMARKET_ANONYMOUS_RPS);
    // And it keeps to the pace: 40 requests take about 20 seconds.
    expect(sent.at(-1)! - sent[0]!).toBe(19_500);
  });

  it('honouring the headers alone, a client never runs into a 429 and waits for each window', () => {
    const budget = 2;
    let t = Date.UTC(2026, 10, 20, 5, 59, 59, 900);
    let pausedUntil = 0;
    const state = { window: -1, used: 0 };
    const sent: number[] = [];
    for (let i = 0; i < 10; i++) {
      t = Math.max(t + 10, pausedUntil);
      const window = Math.floor(t / 1000);
      if (window !== state.window) Object.assign(state, { window, used: 0 });
      expect(state.used, `request ${i} would be a 429`).toBeLessThan(budget);
      state.used++;
      sent.push(t);
      const left = String(budget - state.used);
      const headers = { 'ratelimit-remaining': left, 'x-ratelimit-remaining-second': left, 'ratelimit-reset': '1' };
      pausedUntil = Math.max(pausedUntil, dmarketPause(headers, t) ?? 0);
    }
    expect(sent).toHaveLength(10);
    // Two, then a second's wait: five windows.
    expect(new Set(sent.map((s) => Math.floor(s / 1000))).size).toBe(5);
  });
});

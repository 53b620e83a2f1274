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
  CSFLOAT_LIMITS,
  CSFLOAT_PAGE,
  CSFLOAT_PATH,
  CSFLOAT_WINDOW_REQUESTS,
  MAX_HEADER_PAUSE_MS,
  csfloatAdapter,
  csfloatPause,
} from './csfloat.js';

// ---- fixtures shaped like the documented answers (docs.csfloat.com, "Get All Listings") ----

const fixture = (name: string): unknown =>
  JSON.parse(readFileSync(new URL(`./fixtures/csfloat/${name}`, import.meta.url), 'utf8')) as unknown;
const PAGE_1 = fixture('listings-page-1.json') as { data: unknown[]; cursor: string };
const PAGE_2 = fixture('listings-page-2.json') as { data: unknown[] };
const REFUSED = fixture('listings-refused.json') as { data: unknown[] };
const DOCS_EXAMPLE = fixture('listings-docs-example.json') as unknown[];

/** Serves `pages[cursor ?? '']`; any other request fails the test loudly. */
function byCursor(pages: Record<string, unknown>) {
  return (path: string, q: Query): unknown => {
    expect(path).toBe(CSFLOAT_PATH);
    const key = q.cursor === undefined ? '' : String(q.cursor);
    if (!(key in pages)) throw new Error(`unexpected cursor ${key}`);
    return pages[key];
  };
}

const fakeContext = (answer: (path: string, query: Query) => unknown, request?: FetchContext['request']) =>
  fakeUpstream('usd-3', answer, request);
const fetchAll = <K extends Kind>(kind: K, ctx: FetchContext, pages: Page<K>[] = []): Promise<Page<K>[]> =>
  fetchPages(csfloatAdapter, kind, ctx, {}, pages);

const POSEIDON = 'M4A4 | Poseidon (Factory New)';
const KARAMBIT = '★ Karambit | Doppler (Factory New)';
const REDLINE = 'StatTrak™ AK-47 | Redline (Field-Tested)';
const STICKER = 'Sticker | nitr0 (Foil) | Cluj-Napoca 2015';
const SAFARI = 'Souvenir AWP | Safari Mesh (Battle-Scarred)';

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

const QUERY = { limit: CSFLOAT_PAGE, sort_by: 'lowest_price', type: 'buy_now' };

describe('csfloat adapter: fields', () => {
  it('derives the lowest buy-now price (cents → decimal string) and count per (name, phase) across all pages', async () => {
    const { ctx, calls } = fakeContext(byCursor({ '': PAGE_1, [PAGE_1.cursor]: PAGE_2 }));
    const pages = await fetchAll('LISTINGS', ctx);
    // The first page without a cursor, the next one with the cursor the first answer gave.
    expect(calls).toEqual([
      { path: CSFLOAT_PATH, query: { cursor: undefined, ...QUERY } },
      { path: CSFLOAT_PATH, query: { cursor: PAGE_1.cursor, ...QUERY } },
    ]);
    // One page, yielded only after the last one: a minimum over page 1 alone would be too high.
    expect(pages).toEqual([
      {
        rows: [
          // 2600.00 on page 1, 2550.00 on page 2; the 2000.00 auction bid is no offer.
          row(POSEIDON, '2550.00', 2),
          // item.phase, normalised; phases of one name are separate items.
          row(KARAMBIT, '12345.67', 2, { phase: 'Ruby' }),
          row(KARAMBIT, '980.00', 2, { phase: 'Phase 2' }),
          // A delisted listing and one repeated on page 2 do not count.
          row(REDLINE, '45.99', 2, { exterior: 'Field-Tested', stattrak: true }),
          // No wear, no float, no flags: a sticker as the API sends one; 3 cents.
          row(STICKER, '0.03', 1, { exterior: null }),
          row(SAFARI, '1.20', 1, { exterior: 'Battle-Scarred', souvenir: true }),
        ],
        rejected: [],
      },
    ]);
  });

  it('compares prices as decimals: 999 cents is below 1000', async () => {
    const [a, b] = PAGE_2.data as Record<string, unknown>[];
    const cheap = { ...a, id: 'x-1', price: 999 };
    const dear = { ...b, id: 'x-2', price: 1000, item: (a as { item: unknown }).item };
    const { ctx } = fakeContext(byCursor({ '': { data: [dear, cheap] } }));
    const [page] = await fetchAll('LISTINGS', ctx);
    expect(page?.rows).toEqual([row(POSEIDON, '9.99', 2)]);
  });

  it('refuses listings it cannot trust without counting them; a good one beside them still counts', async () => {
    const { ctx } = fakeContext(byCursor({ '': REFUSED }));
    const [page] = await fetchAll('LISTINGS', ctx);
    const raws = REFUSED.data;
    expect(page?.rows).toEqual([row(REDLINE, '47.00', 1, { exterior: 'Field-Tested', stattrak: true })]);
    expect(page?.rejected).toEqual([
      { reason: 'price: price must be > 0, got 0.00', raw: raws[0] },
      { reason: 'price: expected integer cents, got "2500"', raw: raws[1] },
      { reason: 'price: expected integer cents, got 12.5', raw: raws[2] },
      { reason: "unknown phase 'Phase 9'", raw: raws[3] },
      { reason: 'is_stattrak false contradicts the name', raw: raws[4] },
      { reason: `exterior 'Minimal Wear' contradicts the name '${REDLINE}'`, raw: raws[5] },
      { reason: 'item: not an object', raw: raws[6] },
      { reason: "type 'raffle' is neither buy_now nor auction", raw: raws[7] },
      { reason: 'price: expected integer cents, got null', raw: raws[8] },
    ]);
    // Not one invented price: every row that came out has a price above zero.
    for (const r of page?.rows ?? []) expect(new Dec(r.price as string).greaterThan(0)).toBe(true);
  });

  it('refuses a listing without an id (it could not be told from a repeat)', async () => {
    const { id: _id, ...noId } = PAGE_2.data[0] as Record<string, unknown>;
    const { ctx } = fakeContext(byCursor({ '': { data: [noId] } }));
    const [page] = await fetchAll('LISTINGS', ctx);
    expect(page).toEqual({ rows: [], rejected: [{ reason: 'id: expected a non-empty string', raw: noId }] });
  });

  it('reads the documented example answer (a bare array, no cursor) as one last page', async () => {
    const { ctx, calls } = fakeContext(byCursor({ '': DOCS_EXAMPLE }));
    expect(await fetchAll('LISTINGS', ctx)).toEqual([{ rows: [row(POSEIDON, '2600.00', 1)], rejected: [] }]);
    expect(calls).toHaveLength(1);
  });
});

describe('csfloat adapter: paging', () => {
  it('ends on a page without a cursor, or with a null or empty one', async () => {
    for (const cursor of [undefined, null, '']) {
      const { ctx, calls } = fakeContext(byCursor({ '': { data: PAGE_2.data, cursor } }));
      const [page] = await fetchAll('LISTINGS', ctx);
      expect(page?.rows.map((r) => r.count)).toEqual([1, 2, 1, 1]);
      expect(calls).toHaveLength(1);
    }
  });

  it('an empty market is one empty page', async () => {
    const { ctx } = fakeContext(byCursor({ '': { data: [] } }));
    expect(await fetchAll('LISTINGS', ctx)).toEqual([{ rows: [], rejected: [] }]);
  });

  it('an empty page that names a next cursor is upstream_malformed and retryable', async () => {
    const { ctx } = fakeContext(byCursor({ '': PAGE_1, [PAGE_1.cursor]: { data: [], cursor: 'eyJvIjoxMDB9' } }));
    const yielded: Page<'LISTINGS'>[] = [];
    const err = await failure(fetchAll('LISTINGS', ctx, yielded));
    expect(err.code).toBe('upstream_malformed');
    expect(err.retryable).toBe(true);
    expect(yielded).toEqual([]);
  });

  it('a cursor that comes back again is a loop: not retryable, nothing yielded', async () => {
    const again = { data: PAGE_2.data, cursor: PAGE_1.cursor };
    const { ctx, calls } = fakeContext(byCursor({ '': PAGE_1, [PAGE_1.cursor]: again }));
    const yielded: Page<'LISTINGS'>[] = [];
    const err = await failure(fetchAll('LISTINGS', ctx, yielded));
    expect(err.code).toBe('upstream_malformed');
    expect(err.retryable).toBe(false);
    expect(calls).toHaveLength(2);
    expect(yielded).toEqual([]);
  });

  it('a full bare array cannot be paged further: refused rather than taken for the whole market', async () => {
    const full = Array.from({ length: CSFLOAT_PAGE }, (_, i) => ({ ...(DOCS_EXAMPLE[0] as object), id: `b-${i}` }));
    const { ctx } = fakeContext(byCursor({ '': full }));
    const err = await failure(fetchAll('LISTINGS', ctx));
    expect(err.code).toBe('upstream_malformed');
    expect(err.retryable).toBe(false);
  });

  it.each([
    ['data is not a list', { data: { listings: [] } }],
    ['cursor is not a string', { data: [], cursor: 7 }],
    ['neither an object nor a list', 'Too Many Requests'],
  ])('an answer whose %s is upstream_malformed', async (what, body) => {
    const { ctx } = fakeContext(byCursor({ '': body }));
    const err = await failure(fetchAll('LISTINGS', ctx));
    expect(err.code).toBe('upstream_malformed');
    expect(err.message).toContain(what);
  });

  it('a page that fails fails the whole fetch and yields nothing: no minimum over part of the listings', async () => {
    const { ctx } = fakeContext((path, q) => {
      if (q.cursor !== undefined) throw new AppError('upstream_rejected', 'usd-3: HTTP 401 on /api/v1/listings');
      return byCursor({ '': PAGE_1 })(path, q);
    });
    const yielded: Page<'LISTINGS'>[] = [];
    const err = await failure(fetchAll('LISTINGS', ctx, yielded));
    expect(err.code).toBe('upstream_rejected');
    expect(yielded).toEqual([]);
  });

  it('each page goes through the poller request wrapper: a retried page does not restart the cycle', async () => {
    let failOnce = true;
    const answer = byCursor({ '': PAGE_1, [PAGE_1.cursor]: PAGE_2 });
    const { ctx, calls } = fakeContext(
      (path, q) => {
        if (q.cursor !== undefined && failOnce) {
          failOnce = false;
          throw new AppError('upstream_rate_limited', 'usd-3: 429 on /api/v1/listings');
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
    expect(page?.rows[0]).toEqual(row(POSEIDON, '2550.00', 2));
  });

  it('refuses every kind but LISTINGS without asking the upstream', async () => {
    const { ctx, calls } = fakeContext(byCursor({}));
    expect((await failure(fetchAll('SALES', ctx))).code).toBe('kind_unsupported');
    expect(calls).toEqual([]);
    expect(csfloatAdapter.kinds).toEqual(['LISTINGS']);
  });
});

describe('csfloat adapter: key and headers', () => {
  it('needs a key, sent bare in Authorization (no scheme); without one no Authorization at all', () => {
    expect(csfloatAdapter.needsApiKey).toBe(true);
    expect(csfloatAdapter.requestHeaders?.({ apiKey: 'k3y-123' })).toEqual({
      authorization: 'k3y-123',
      'accept-encoding': 'gzip',
    });
    expect(csfloatAdapter.requestHeaders?.({})).toEqual({ 'accept-encoding': 'gzip' });
  });

  describe('through a real client', () => {
    let server: Server | undefined;
    afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

    it('the key reaches the upstream, a gzip answer decodes, and the rate-limit headers pause', async () => {
      const seen: IncomingHttpHeaders[] = [];
      const reset = Math.floor(Date.now() / 1000) + 120;
      server = createServer((req, res) => {
        seen.push(req.headers);
        const body = gzipSync(JSON.stringify(PAGE_2));
        res.writeHead(200, {
          'content-type': 'application/json',
          'content-encoding': 'gzip',
          'x-ratelimit-limit': '200',
          'x-ratelimit-remaining': '0',
          'x-ratelimit-reset': String(reset),
        });
        res.end(body);
      });
      await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
      const client = new UpstreamClient({
        baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        market: 'usd-3',
        headers: csfloatAdapter.requestHeaders?.({ apiKey: 'test-key' }),
      });
      const pauses: (number | undefined)[] = [];
      client.onHeaders((h) => pauses.push(CSFLOAT_LIMITS.pauseFromHeaders?.(h, Date.now())));
      try {
        const [page] = await fetchAll('LISTINGS', { client, market: 'usd-3', request: (fn) => fn() });
        expect(page?.rows).toHaveLength(4);
      } finally {
        await client.close();
      }
      expect(seen[0]?.authorization).toBe('test-key');
      expect(seen[0]?.['accept-encoding']).toBe('gzip');
      expect(pauses).toEqual([reset * 1000 + 1000]);
    });
  });
});

describe('csfloat limits', () => {
  const h = (remaining: string | undefined, reset: string | undefined) => ({
    'x-ratelimit-limit': '200',
    'x-ratelimit-remaining': remaining,
    'x-ratelimit-reset': reset,
  });
  const now = Date.UTC(2026, 10, 20, 5, 50);
  const reset = String(Date.UTC(2026, 10, 20, 6, 0) / 1000);

  it('pauses until the reset (epoch seconds, plus a second) once nothing remains', () => {
    expect(csfloatPause(h('0', reset), now)).toBe(Number(reset) * 1000 + 1000);
    expect(
      csfloatPause({ ...h(undefined, undefined), 'x-ratelimit-remaining': ['0'], 'x-ratelimit-reset': [reset] }, now),
    ).toBe(Number(reset) * 1000 + 1000);
  });

  it('says nothing while requests remain, after the reset, or when the headers are missing or garbled', () => {
    expect(csfloatPause(h('1', reset), now)).toBeUndefined();
    expect(csfloatPause(h('0', String(now / 1000 - 5)), now)).toBeUndefined();
    expect(csfloatPause(h(undefined, reset), now)).toBeUndefined();
    expect(csfloatPause(h('0', undefined), now)).toBeUndefined();
    expect(csfloatPause(h('none', reset), now)).toBeUndefined();
    expect(csfloatPause(h('0', 'Fri, 20 Nov 2026 06:00:00 GMT'), now)).toBeUndefined();
    expect(csfloatPause({}, now)).toBeUndefined();
  });

  it('caps a reset implausibly far away (milliseconds sent as seconds) at an hour', () => {
    expect(csfloatPause(h('0', String(now)), now)).toBe(now + MAX_HEADER_PAUSE_MS);
  });

  it('the bucket alone never spends more than a window budget in an hour (burst plus sustained rate)', () => {
    const { requestsPerSecond, burst } = CSFLOAT_LIMITS;
    expect(burst + requestsPerSecond * 3600).toBeCloseTo(CSFLOAT_WINDOW_REQUESTS, 9);
    expect(burst).toBeGreaterThanOrEqual(12); // a 60-item market's pages go at once
    expect(requestsPerSecond).toBeLessThan(CSFLOAT_WINDOW_REQUESTS / 3600);
  });

  /**
   * A client that asks as fast as it may against an upstream with a fixed window of `budget`
   * requests, honouring only the headers: it must never be refused, and must wait for each reset.
   */
  it('honouring the headers alone, a client never runs into a 429 and waits out every window', () => {
    const budget = 5;
    const windowMs = 60_000;
    let t = Date.UTC(2026, 10, 20, 5, 59, 30);
    let pausedUntil = 0;
    const sent: number[] = [];
    const state = { window: -1, used: 0 };
    for (let i = 0; i < 3 * budget; i++) {
      t = Math.max(t + 10, pausedUntil);
      const window = Math.floor(t / windowMs);
      if (window !== state.window) Object.assign(state, { window, used: 0 });
      expect(state.used, `request ${i} at ${new Date(t).toISOString()} would be a 429`).toBeLessThan(budget);
      state.used++;
      sent.push(t);
      const headers = {
        'x-ratelimit-remaining': String(budget - state.used),
        'x-ratelimit-reset': String(Math.ceil(((window + 1) * windowMs) / 1000)),
      };
      pausedUntil = Math.max(pausedUntil, csfloatPause(headers, t) ?? 0);
    }
    // The first window ends 30 s in; each later window gets exactly `budget` requests.
    const perWindow = new Map<number, number>();
    for (const s of sent) perWindow.set(Math.floor(s / windowMs), (perWindow.get(Math.floor(s / windowMs)) ?? 0) + 1);
    expect([...perWindow.values()]).toEqual([5, 5, 5]);
    expect(sent[budget]).toBe((Math.floor(sent[0]! / windowMs) + 1) * windowMs + 1000);
  });
});

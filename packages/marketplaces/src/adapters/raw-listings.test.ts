import { AppError } from '@skinprices/domain';
import { describe, expect, it } from 'vitest';
import type { FetchContext } from '../adapter.js';
import type { Kind, Page } from '../rows.js';
import { failure, fetchAll as fetchPages, fakeUpstream, type Query } from '../testing/fake-upstream.js';
import { rawListingsAdapter, splitPhase } from './raw-listings.js';

// ---- a fake CN-D upstream: canned pages keyed by offset, no network ----

/** The adapter's page size: the second page starts at offset 5000. */
const PAGE = 5000;

const fakeContext = (answer: (path: string, query: Query) => unknown) => fakeUpstream('cn-d', answer);

/** Serves `pages[i]` at offset i × 5000, each claiming the given total. */
function byOffset(pages: unknown[][], total = pages.reduce((n, p) => n + p.length, 0)) {
  return (_path: string, q: Query): unknown => {
    const i = Number(q.offset) / PAGE;
    const listings = pages[i];
    if (listings === undefined) throw new Error(`unexpected offset ${String(q.offset)}`);
    return { total, offset: q.offset, limit: q.limit, listings };
  };
}

const listing = (listing_id: string, name: string, price: string) => ({ listing_id, name, price, currency: 'CNY' });

/** `n` listings of a filler item, so that a page is full and the next one starts at offset 5000. */
const filler = (n: number, from = 0) =>
  Array.from({ length: n }, (_, k) => listing(`f-${from + k}`, 'P250 | Sand Dune (Field-Tested)', '0.05'));

const fetchAll = <K extends Kind>(kind: K, ctx: FetchContext, pages: Page<K>[] = []): Promise<Page<K>[]> =>
  fetchPages(rawListingsAdapter, kind, ctx, {}, pages);

const KARAMBIT = '★ Karambit | Doppler (Factory New)';
const REDLINE = 'AK-47 | Redline (Field-Tested)';

const row = (market_hash_name: string, price: string, count: number, over: Record<string, unknown> = {}) => ({
  market_hash_name,
  phase: '',
  price,
  count,
  exterior: 'Field-Tested',
  stattrak: false,
  souvenir: false,
  template_id: null,
  item_page_url: null,
  ...over,
});

describe('raw-listings adapter (CN-D / EU-B)', () => {
  it('derives the lowest price and the count across all pages: the cheapest listing may be on page 2', async () => {
    const { ctx, calls } = fakeContext(
      byOffset([
        [listing('r-1', REDLINE, '25.40'), listing('r-2', REDLINE, '25.10'), ...filler(4998)],
        [listing('r-3', REDLINE, '24.95'), listing('r-4', REDLINE, '26')],
      ]),
    );
    const pages = await fetchAll('LISTINGS', ctx);
    expect(calls).toEqual([
      { path: '/v2/listings', query: { offset: 0, limit: PAGE } },
      { path: '/v2/listings', query: { offset: PAGE, limit: PAGE } },
    ]);
    expect(pages).toHaveLength(1);
    expect(pages[0]).toEqual({
      rows: [row(REDLINE, '24.95', 4), row('P250 | Sand Dune (Field-Tested)', '0.05', 4998)],
      rejected: [],
    });
  });

  it('compares prices as decimals, not as strings ("9.5" is below "10.00")', async () => {
    const { ctx } = fakeContext(byOffset([[listing('a', REDLINE, '10.00'), listing('b', REDLINE, '9.5')]]));
    const [page] = await fetchAll('LISTINGS', ctx);
    expect(page?.rows).toEqual([row(REDLINE, '9.50', 2)]);
  });

  it('reads the phase from a " - Ruby" name suffix; phases of one name stay separate items', async () => {
    const { ctx } = fakeContext(
      byOffset([
        [
          listing('k-1', `${KARAMBIT} - Ruby`, '9800'),
          listing('k-2', `${KARAMBIT} - Ruby`, '9650.5'),
          listing('k-3', `${KARAMBIT} - Phase 2`, '1800'),
          listing('k-4', `${KARAMBIT} - Black Pearl`, '7000.00'),
        ],
      ]),
    );
    const [page] = await fetchAll('LISTINGS', ctx);
    const knife = { exterior: 'Factory New' };
    expect(page).toEqual({
      rows: [
        row(KARAMBIT, '9650.50', 2, { ...knife, phase: 'Ruby' }),
        row(KARAMBIT, '1800.00', 1, { ...knife, phase: 'Phase 2' }),
        row(KARAMBIT, '7000.00', 1, { ...knife, phase: 'Black Pearl' }),
      ],
      rejected: [],
    });
  });

  it('counts a listing repeated across pages (same listing_id) once', async () => {
    const { ctx } = fakeContext(
      byOffset([
        [listing('r-1', REDLINE, '25.40'), ...filler(4999)],
        // The list moved while we paged: the last filler and r-1 show up again.
        [listing('f-4998', 'P250 | Sand Dune (Field-Tested)', '0.05'), listing('r-1', REDLINE, '25.40')],
      ]),
    );
    const [page] = await fetchAll('LISTINGS', ctx);
    expect(page?.rows).toEqual([row(REDLINE, '25.40', 1), row('P250 | Sand Dune (Field-Tested)', '0.05', 4999)]);
  });

  it('a page that fails makes the whole fetch fail and yields nothing: no minimum over part of the listings', async () => {
    const { ctx } = fakeContext((path, q) => {
      if (q.offset === PAGE) throw new AppError('upstream_unavailable', 'cn-d: HTTP 503 on /v2/listings');
      return byOffset([[listing('r-1', REDLINE, '25.40'), ...filler(4999)]], 7000)(path, q);
    });
    const yielded: Page<'LISTINGS'>[] = [];
    const err = await failure(fetchAll('LISTINGS', ctx, yielded));
    expect(err.code).toBe('upstream_unavailable');
    expect(yielded).toEqual([]);
  });

  it('an empty page before the total is upstream_malformed (retryable), and yields nothing', async () => {
    const { ctx } = fakeContext(byOffset([[...filler(5000)], []], 5002));
    const yielded: Page<'LISTINGS'>[] = [];
    const err = await failure(fetchAll('LISTINGS', ctx, yielded));
    expect(err.code).toBe('upstream_malformed');
    expect(err.retryable).toBe(true);
    expect(yielded).toEqual([]);
  });

  it('refuses a listing with a zero or missing price without counting it; the others still count', async () => {
    const zero = listing('r-2', REDLINE, '0.00');
    const none = { listing_id: 'r-3', name: REDLINE, price: null, currency: 'CNY' };
    const { ctx } = fakeContext(byOffset([[listing('r-1', REDLINE, '25.40'), zero, none]]));
    const [page] = await fetchAll('LISTINGS', ctx);
    expect(page).toEqual({
      rows: [row(REDLINE, '25.40', 1)],
      rejected: [
        { reason: expect.stringContaining('> 0'), raw: zero },
        { reason: 'listing without a price', raw: none },
      ],
    });
  });

  it('an empty market is one empty page', async () => {
    const { ctx } = fakeContext(byOffset([[]]));
    expect(await fetchAll('LISTINGS', ctx)).toEqual([{ rows: [], rejected: [] }]);
  });

  it('refuses every kind but LISTINGS', async () => {
    const { ctx, calls } = fakeContext(byOffset([[]]));
    expect((await failure(fetchAll('BUYORDERS', ctx))).code).toBe('kind_unsupported');
    expect(calls).toEqual([]);
  });
});

describe('splitPhase', () => {
  it.each([
    [`${KARAMBIT} - Ruby`, KARAMBIT, 'Ruby'],
    [`${KARAMBIT} - Phase 4`, KARAMBIT, 'Phase 4'],
    [`${KARAMBIT} - Black Pearl`, KARAMBIT, 'Black Pearl'],
    [KARAMBIT, KARAMBIT, ''],
    // Only a known phase at the very end is a phase.
    ['Sticker | Team - Ruby Edition', 'Sticker | Team - Ruby Edition', ''],
    [`${KARAMBIT} - ruby`, `${KARAMBIT} - ruby`, ''],
  ])('%j → name %j, phase %j', (full, name, phase) => {
    expect(splitPhase(full)).toEqual({ name, phase });
  });
});

import { DAY_MS } from '@skinprices/domain';
import { describe, expect, it } from 'vitest';
import type { FetchContext, KindInput } from '../adapter.js';
import type { Kind, Page } from '../rows.js';
import { failure, fetchAll as fetchPages, fakeUpstream, keyedBodies } from '../testing/fake-upstream.js';
import { historyAdapter } from './history.js';

// ---- a fake HIST-A upstream: canned bodies keyed by date and page, no network ----

const fakeContext = (bodies: Record<string, unknown>) =>
  fakeUpstream(
    'hist-a',
    keyedBodies(bodies, (path, q) => `${path}?date=${String(q.date)}&page=${String(q.page)}`),
  );

const fetchAll = <K extends Kind>(kind: K, ctx: FetchContext, input: KindInput): Promise<Page<K>[]> =>
  fetchPages(historyAdapter, kind, ctx, input);

/** 2024-03-01 as days since the epoch. */
const DAY = Date.UTC(2024, 2, 1) / DAY_MS;
const url = (date: string, page: number) => `/api/history/daily?date=${date}&page=${page}`;
const answer = (date: string, items: unknown[], page = 1, pages = 1) => ({ date, page, pages, items });

const REDLINE = 'AK-47 | Redline (Field-Tested)';
const KARAMBIT = '★ Karambit | Doppler (Factory New)';

describe('history adapter (HIST-A)', () => {
  it('asks for the UTC date of the requested day, page by page; every row carries the day number', async () => {
    expect(DAY).toBe(19_783);
    const { ctx, calls } = fakeContext({
      [url('2024-03-01', 1)]: answer(
        '2024-03-01',
        [
          { name: REDLINE, phase: null, close: '25.1', volume: 140 },
          { name: KARAMBIT, phase: 'Ruby', close: '9650.00', volume: null },
        ],
        1,
        2,
      ),
      [url('2024-03-01', 2)]: answer(
        '2024-03-01',
        [{ name: KARAMBIT, phase: 'Phase 2', close: '1800', volume: 3 }],
        2,
        2,
      ),
    });
    const pages = await fetchAll('HISTORY', ctx, { day: DAY });
    expect(pages).toEqual([
      {
        rows: [
          { market_hash_name: REDLINE, phase: '', day: DAY, price: '25.10', count: 140 },
          { market_hash_name: KARAMBIT, phase: 'Ruby', day: DAY, price: '9650.00', count: null },
        ],
        rejected: [],
      },
      { rows: [{ market_hash_name: KARAMBIT, phase: 'Phase 2', day: DAY, price: '1800.00', count: 3 }], rejected: [] },
    ]);
    expect(calls).toEqual([
      { path: '/api/history/daily', query: { date: '2024-03-01', page: 1, per_page: 5000 } },
      { path: '/api/history/daily', query: { date: '2024-03-01', page: 2, per_page: 5000 } },
    ]);
  });

  it('an answer for another date than the one asked is upstream_malformed', async () => {
    const { ctx } = fakeContext({
      [url('2024-03-01', 1)]: answer('2024-02-29', [{ name: REDLINE, phase: null, close: '25.10', volume: 1 }]),
    });
    const err = await failure(fetchAll('HISTORY', ctx, { day: DAY }));
    expect(err.code).toBe('upstream_malformed');
    expect(err.message).toContain('asked for 2024-03-01, got 2024-02-29');
  });

  it('an answer without a date is upstream_malformed too', async () => {
    const { ctx } = fakeContext({ [url('2024-03-01', 1)]: { page: 1, pages: 1, items: [] } });
    expect((await failure(fetchAll('HISTORY', ctx, { day: DAY }))).code).toBe('upstream_malformed');
  });

  it('a day with no trading is one empty page', async () => {
    const { ctx } = fakeContext({ [url('2024-03-01', 1)]: answer('2024-03-01', []) });
    expect(await fetchAll('HISTORY', ctx, { day: DAY })).toEqual([{ rows: [], rejected: [] }]);
  });

  it('refuses a zero or missing close and an unknown phase; the other rows stay', async () => {
    const zero = { name: REDLINE, phase: null, close: '0.00', volume: 2 };
    const none = { name: REDLINE, phase: null, close: null, volume: 0 };
    const phase = { name: KARAMBIT, phase: 'Phase 7', close: '1500.00', volume: 1 };
    const { ctx } = fakeContext({
      [url('2024-03-01', 1)]: answer('2024-03-01', [
        zero,
        none,
        phase,
        { name: REDLINE, phase: null, close: '25.10', volume: 1 },
      ]),
    });
    const [page] = await fetchAll('HISTORY', ctx, { day: DAY });
    expect(page).toEqual({
      rows: [{ market_hash_name: REDLINE, phase: '', day: DAY, price: '25.10', count: 1 }],
      rejected: [
        { reason: expect.stringContaining('close: price must be > 0'), raw: zero },
        { reason: 'close missing', raw: none },
        { reason: "unknown phase 'Phase 7'", raw: phase },
      ],
    });
  });

  it('without a day, or for another kind, refuses before asking the upstream', async () => {
    const { ctx, calls } = fakeContext({});
    expect((await failure(fetchAll('HISTORY', ctx, {}))).code).toBe('kind_unsupported');
    expect((await failure(fetchAll('LISTINGS', ctx, { day: DAY }))).code).toBe('kind_unsupported');
    expect(calls).toEqual([]);
  });
});

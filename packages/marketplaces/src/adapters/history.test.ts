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
const hourlyUrl = (date: string, page: number) => `/api/history/hourly?date=${date}&page=${page}`;
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
          { market_hash_name: REDLINE, phase: '', day: DAY, price: '25.10', count: 140, hours: null },
          { market_hash_name: KARAMBIT, phase: 'Ruby', day: DAY, price: '9650.00', count: null, hours: null },
        ],
        rejected: [],
      },
      {
        rows: [{ market_hash_name: KARAMBIT, phase: 'Phase 2', day: DAY, price: '1800.00', count: 3, hours: null }],
        rejected: [],
      },
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
      rows: [{ market_hash_name: REDLINE, phase: '', day: DAY, price: '25.10', count: 1, hours: null }],
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

  describe('hourly candles (asked for with hourly)', () => {
    const hour = (h: number, open: string, high: string, low: string, close: string, volume: number | null = 5) => ({
      time: `2024-03-01T${String(h).padStart(2, '0')}:00:00.000Z`,
      open,
      high,
      low,
      close,
      volume,
    });

    it('fetches the hours first, then attaches each item its hours (none: []); hours without a close are a row of their own', async () => {
      const { ctx, calls } = fakeContext({
        [hourlyUrl('2024-03-01', 1)]: answer('2024-03-01', [
          {
            name: REDLINE,
            phase: null,
            hours: [hour(0, '25', '26.5', '24.9', '25.1'), hour(23, '25.1', '25.1', '25.1', '25.1', 140)],
          },
          // Listed during the day, not at its end: no close, its hours in a row of their own.
          { name: 'Gone', phase: null, hours: [hour(1, '1', '1', '1', '1')] },
        ]),
        [url('2024-03-01', 1)]: answer('2024-03-01', [
          { name: REDLINE, phase: null, close: '25.1', volume: 140 },
          { name: KARAMBIT, phase: 'Ruby', close: '9650.00', volume: 2 },
        ]),
      });
      const pages = await fetchAll('HISTORY', ctx, { day: DAY, hourly: true });
      const t0 = Date.UTC(2024, 2, 1);
      expect(pages).toEqual([
        {
          rows: [
            {
              market_hash_name: REDLINE,
              phase: '',
              day: DAY,
              price: '25.10',
              count: 140,
              hours: [
                { hour: t0, open: '25.00', high: '26.50', low: '24.90', close: '25.10', count: 5 },
                { hour: t0 + 23 * 3_600_000, open: '25.10', high: '25.10', low: '25.10', close: '25.10', count: 140 },
              ],
            },
            { market_hash_name: KARAMBIT, phase: 'Ruby', day: DAY, price: '9650.00', count: 2, hours: [] },
          ],
          rejected: [],
        },
        {
          rows: [
            {
              market_hash_name: 'Gone',
              phase: '',
              day: DAY,
              price: null,
              count: null,
              hours: [{ hour: t0 + 3_600_000, open: '1.00', high: '1.00', low: '1.00', close: '1.00', count: 5 }],
            },
          ],
          rejected: [],
        },
      ]);
      expect(calls.map((c) => c.path)).toEqual(['/api/history/hourly', '/api/history/daily']);
    });

    it.each([
      ['an hour of another day', hour(0, '1', '1', '1', '1'), '2024-02-29T23:00:00.000Z'],
      ['a time off the hour', hour(0, '1', '1', '1', '1'), '2024-03-01T00:30:00.000Z'],
      ['an open above the high', hour(0, '2', '1.5', '1', '1'), undefined],
      ['a close below the low', hour(0, '1', '1.5', '1', '0.9'), undefined],
      ['a zero price', hour(0, '0', '1', '0', '1'), undefined],
    ])('%s rejects the item (its close too), not the page', async (_what, h, time) => {
      const { ctx } = fakeContext({
        [hourlyUrl('2024-03-01', 1)]: answer('2024-03-01', [
          { name: REDLINE, phase: null, hours: [time ? { ...h, time } : h] },
        ]),
        [url('2024-03-01', 1)]: answer('2024-03-01', [
          { name: REDLINE, phase: null, close: '25.1', volume: 140 },
          { name: KARAMBIT, phase: 'Ruby', close: '9650.00', volume: 2 },
        ]),
      });
      const [page] = await fetchAll('HISTORY', ctx, { day: DAY, hourly: true });
      expect(page!.rows.map((r) => r.market_hash_name)).toEqual([KARAMBIT]);
      expect(page!.rejected).toHaveLength(1);
    });

    it('closes: false asks for the hours only: every item a row without a close', async () => {
      const { ctx, calls } = fakeContext({
        [hourlyUrl('2024-03-01', 1)]: answer('2024-03-01', [
          { name: REDLINE, phase: null, hours: [hour(7, '25', '25', '25', '25')] },
        ]),
      });
      const pages = await fetchAll('HISTORY', ctx, { day: DAY, hourly: true, closes: false });
      expect(pages.flatMap((p) => p.rows)).toEqual([
        {
          market_hash_name: REDLINE,
          phase: '',
          day: DAY,
          price: null,
          count: null,
          hours: [
            { hour: Date.UTC(2024, 2, 1, 7), open: '25.00', high: '25.00', low: '25.00', close: '25.00', count: 5 },
          ],
        },
      ]);
      expect(calls.map((c) => c.path)).toEqual(['/api/history/hourly']);
    });

    it("a close outside its hours' range rejects the item", async () => {
      const { ctx } = fakeContext({
        [hourlyUrl('2024-03-01', 1)]: answer('2024-03-01', [
          { name: REDLINE, phase: null, hours: [hour(23, '1', '1.2', '1', '1.1')] },
        ]),
        [url('2024-03-01', 1)]: answer('2024-03-01', [{ name: REDLINE, phase: null, close: '1.30', volume: 1 }]),
      });
      const [page] = await fetchAll('HISTORY', ctx, { day: DAY, hourly: true });
      expect(page!.rows).toEqual([]);
      expect(page!.rejected[0]!.reason).toContain("outside its hours' range");
    });

    it('hours out of order reject the item', async () => {
      const { ctx } = fakeContext({
        [hourlyUrl('2024-03-01', 1)]: answer('2024-03-01', [
          { name: REDLINE, phase: null, hours: [hour(5, '1', '1', '1', '1'), hour(4, '1', '1', '1', '1')] },
        ]),
        [url('2024-03-01', 1)]: answer('2024-03-01', [{ name: REDLINE, phase: null, close: '1', volume: 1 }]),
      });
      const [page] = await fetchAll('HISTORY', ctx, { day: DAY, hourly: true });
      expect(page!.rows).toEqual([]);
      expect(page!.rejected[0]!.reason).toContain('out of order');
    });
  });
});

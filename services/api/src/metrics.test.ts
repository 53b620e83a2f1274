import { describe, expect, it, vi } from 'vitest';
import { ApiMetrics } from './metrics.js';
import type { FreshnessRow, MaterializerRow } from './readmodel-status.js';
import { statusReport, type StatusInputs } from './status.js';

const NOW = new Date('2026-11-23T12:00:00.000Z');
const ago = (s: number | null) => (s === null ? null : new Date(NOW.getTime() - s * 1000));

const fresh = (market: string, kind: string, appliedAgoS: number | null): FreshnessRow => ({
  market,
  kind,
  last_outcome: 'COMPLETE',
  last_finished_at: NOW,
  last_complete_at: NOW,
  consecutive_failed: 0,
  last_applied_at: ago(appliedAgoS),
  last_complete_applied_at: ago(appliedAgoS),
});

const member = (id: string, heartbeatAgoS: number, batchAgoS: number | null, lag: string | null): MaterializerRow => ({
  member_id: id,
  group_id: 'materializer',
  host: 'h',
  pid: 1,
  state: 'consuming',
  started_at: ago(3_600) as Date,
  heartbeat_at: ago(heartbeatAgoS) as Date,
  last_batch_at: ago(batchAgoS),
  lag,
});

const PRIMARY = { standby: false, lag_bytes: null, lag_s: null, receiving: null };

/** A report as /v1/status builds it, on the primary unless `database` says otherwise. */
const report = (over: Partial<StatusInputs> = {}) => {
  const r = statusReport({
    now: NOW,
    dataTime: NOW,
    freshness: [fresh('cn-a', 'LISTINGS', 60), fresh('cn-b', 'LISTINGS', 700), fresh('hist-a', 'HISTORY', null)],
    materializers: [member('a', 2, 5, '10'), member('b', 40, 100, '7')],
    deadLetters: [{ topic: 'listings.v1', reason: 'decode', count: 3, last_at: NOW }],
    database: PRIMARY,
    ...over,
  } as StatusInputs);
  return r;
};

/** The scrape's text, only the lines of the api_status_up, api_market_* … series. */
async function scrape(m: ApiMetrics): Promise<string[]> {
  const text = await m.registry.metrics();
  return text
    .split('\n')
    .filter((l) => /^api_(status_up|market_|materializers_|pipeline_|dead_letters|db_)/.test(l))
    .sort();
}

describe('ApiMetrics.observeStatus', () => {
  it('exports what /v1/status computes: ages, stale flags, live materializers, the last batch, lag, dead letters', async () => {
    const m = new ApiMetrics();
    m.observeStatus(async () => report());
    // The database's series are the next tests'.
    expect((await scrape(m)).filter((l) => !l.startsWith('api_db_'))).toEqual([
      'api_dead_letters{topic="listings.v1",reason="decode"} 3',
      'api_market_age_seconds{market="cn-a",kind="LISTINGS"} 60',
      'api_market_age_seconds{market="cn-b",kind="LISTINGS"} 700',
      // Never completed: infinitely old, so an age threshold holds for it too.
      'api_market_age_seconds{market="hist-a",kind="HISTORY"} +Inf',
      'api_market_stale{market="cn-a",kind="LISTINGS"} 0',
      'api_market_stale{market="cn-b",kind="LISTINGS"} 1',
      'api_market_stale{market="hist-a",kind="HISTORY"} 1',
      'api_materializers_alive 1',
      'api_pipeline_lag 10',
      'api_pipeline_last_batch_age_seconds 5',
      'api_status_up 1',
    ]);
  });

  it('a standby: its role, lag and receiver; the last batch judged as of what it replayed, as /v1/status does', async () => {
    const m = new ApiMetrics();
    const r = report({
      materializers: [member('a', 32, 35, '0')],
      database: { standby: true, lag_bytes: '4096', lag_s: 30, receiving: false },
    } as Partial<StatusInputs>);
    m.observeStatus(async () => ({
      ...r,
      database: { role: 'standby', replay_lag_seconds: 30, replay_lag_bytes: 4096, receiving: false },
    }));
    const lines = await scrape(m);
    expect(lines.filter((l) => l.startsWith('api_db_'))).toEqual([
      'api_db_replay_lag_bytes 4096',
      'api_db_replay_lag_seconds 30',
      'api_db_standby 1',
      'api_db_wal_receiving 0',
    ]);
    expect(lines).toContain('api_pipeline_last_batch_age_seconds 5');
  });

  it('a primary: api_db_standby 0 and no lag or receiver series', async () => {
    const m = new ApiMetrics();
    m.observeStatus(async () => ({
      ...report(),
      database: { role: 'primary', replay_lag_seconds: null, replay_lag_bytes: null, receiving: null },
    }));
    expect((await scrape(m)).filter((l) => l.startsWith('api_db_'))).toEqual(['api_db_standby 0']);
  });

  it('no batch ever and lag unknown: the age is +Inf and the lag series absent', async () => {
    const m = new ApiMetrics();
    m.observeStatus(async () => report({ materializers: [member('a', 1, null, null)] }));
    const lines = await scrape(m);
    expect(lines).toContain('api_pipeline_last_batch_age_seconds +Inf');
    expect(lines.some((l) => l.startsWith('api_pipeline_lag '))).toBe(false);
  });

  // Root cause guarded: a standby whose replay stopped judged heartbeats as of its last replayed
  // commit, so it reported a materializer alive after it died, and the max over every API hid it.
  it('a lagging standby exports no pipeline series', async () => {
    const m = new ApiMetrics();
    const lagging = {
      ...report(),
      database: { role: 'standby', replay_lag_seconds: 600, replay_lag_bytes: 0, receiving: false, status: 'lagging' },
    };
    m.observeStatus(() => Promise.resolve(lagging), { ttlMs: 0 });
    const lines = await scrape(m);
    expect(lines).toContain('api_db_wal_receiving 0');
    expect(lines.some((l) => /^api_(materializers_alive|pipeline_)/.test(l))).toBe(false);
  });

  // Root cause guarded: a scrape that threw, or repeated the last good values, would hide a
  // database outage from every alert that reads these series.
  it('a failed or hung load sets api_status_up 0 and drops the other series; the scrape still answers', async () => {
    const m = new ApiMetrics();
    let fail: 'throw' | 'hang' | false = false;
    m.observeStatus(
      () =>
        fail === 'throw'
          ? Promise.reject(new Error('db down'))
          : fail === 'hang'
            ? new Promise(() => {})
            : Promise.resolve(report()),
      { ttlMs: 0, timeoutMs: 50, stuckAfterMs: 200 },
    );
    expect(await scrape(m)).toContain('api_status_up 1');
    fail = 'throw';
    expect(await scrape(m)).toEqual(['api_status_up 0']);
    fail = 'hang';
    expect(await scrape(m)).toEqual(['api_status_up 0']);
    fail = false;
    // The hung load still holds its connections: no second one beside it until it counts as stuck.
    expect(await scrape(m)).toEqual(['api_status_up 0']);
    await new Promise((r) => setTimeout(r, 220));
    expect(await scrape(m)).toContain('api_market_stale{market="cn-b",kind="LISTINGS"} 1');
  });

  it('scrapes within ttlMs share one load; the next one after it loads again', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(NOW);
      const m = new ApiMetrics();
      const load = vi.fn(async () => report());
      m.observeStatus(load, { ttlMs: 5_000 });
      await Promise.all([scrape(m), scrape(m)]);
      vi.setSystemTime(NOW.getTime() + 4_000);
      await scrape(m);
      expect(load).toHaveBeenCalledTimes(1);
      vi.setSystemTime(NOW.getTime() + 5_000);
      await scrape(m);
      expect(load).toHaveBeenCalledTimes(2);
    } finally {
      vi.useRealTimers();
    }
  });

  it('without observeStatus, no status series at all', async () => {
    expect(await scrape(new ApiMetrics())).toEqual([]);
  });
});

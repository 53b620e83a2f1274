import { describe, expect, it } from 'vitest';
import type { FreshnessRow, MaterializerRow } from './readmodel-status.js';
import { DEFAULT_STATUS_OPTIONS, statusReport, type StatusInputs } from './status.js';

const NOW = new Date('2026-11-23T12:00:00.000Z');
const ago = (s: number) => new Date(NOW.getTime() - s * 1000);

const fresh = (
  market: string,
  kind: string,
  appliedAgoS: number | null,
  extra: Partial<FreshnessRow> = {},
): FreshnessRow => ({
  market,
  kind,
  last_outcome: 'COMPLETE',
  // Upstream times: an accelerated simulator's clock, deliberately far from the wall clock.
  last_finished_at: new Date('2030-01-01T00:00:00.000Z'),
  last_complete_at: new Date('2030-01-01T00:00:00.000Z'),
  consecutive_failed: 0,
  last_applied_at: appliedAgoS === null ? null : ago(appliedAgoS),
  last_complete_applied_at: appliedAgoS === null ? null : ago(appliedAgoS),
  ...extra,
});

const member = (
  heartbeatAgoS: number,
  batchAgoS: number | null,
  extra: Partial<MaterializerRow> = {},
): MaterializerRow => ({
  member_id: 'h/1/x',
  group_id: 'materializer',
  host: 'h',
  pid: 1,
  state: 'consuming',
  started_at: ago(3_600),
  heartbeat_at: ago(heartbeatAgoS),
  last_batch_at: batchAgoS === null ? null : ago(batchAgoS),
  lag: '0',
  ...extra,
});

const PRIMARY = { standby: false, lag_bytes: null, lag_s: null, receiving: null };
const standby = (lagS: number, receiving: boolean | null = true) => ({
  standby: true,
  lag_bytes: String(lagS * 1_000),
  lag_s: lagS,
  receiving,
});

const input = (over: Partial<StatusInputs>): StatusInputs => ({
  now: NOW,
  dataTime: new Date('2030-01-01T00:00:00.000Z'),
  freshness: [],
  materializers: [member(2, 5)],
  deadLetters: [],
  database: PRIMARY,
  ...over,
});

describe('statusReport', () => {
  // Root cause guarded: one 900 s threshold for every kind flagged CN-A buy orders (every 30 min)
  // and daily history as always stale.
  it('judges each kind by its own refresh interval', () => {
    const r = statusReport(
      input({
        freshness: [
          fresh('cn-a', 'LISTINGS', 600), // 5 min interval: stale after 11 min
          fresh('cn-a', 'BUYORDERS', 1_800), // 30 min interval: 30 min old is fine
          fresh('hist-a', 'HISTORY', 30 * 3_600), // daily
          fresh('cn-b', 'LISTINGS', 700),
        ],
      }),
    );
    expect(r.markets.map((m) => [m.market, m.kind, m.stale])).toEqual([
      ['cn-a', 'LISTINGS', false],
      ['cn-a', 'BUYORDERS', false],
      ['hist-a', 'HISTORY', false],
      ['cn-b', 'LISTINGS', true],
    ]);
    expect(r.markets[1]?.refresh_interval_seconds).toBe(1_800);
  });

  // Root cause guarded: ages were measured against the read model's own (data) clock, so a stall
  // of the whole pipeline never looked stale; the data clock here is years ahead and ignored.
  it('measures ages on the wall clock, not the data clock', () => {
    const r = statusReport(input({ freshness: [fresh('cn-a', 'LISTINGS', 3_600)] }));
    expect(r.markets[0]).toMatchObject({ age_seconds: 3_600, stale: true });
    expect(statusReport(input({ freshness: [fresh('eu-a', 'LISTINGS', null)] })).markets[0]?.stale).toBe(true);
  });

  // Root cause guarded: a dead materializer showed nothing in /v1/status.
  it('a materializer without a heartbeat for 30 s is down', () => {
    const r = statusReport(input({ materializers: [member(45, 50)] }));
    expect(r.pipeline.status).toBe('down');
    expect(r.status).toBe('degraded');
    expect(r.pipeline.materializers[0]?.alive).toBe(false);
    expect(statusReport(input({ materializers: [] })).pipeline.status).toBe('down');
  });

  it('a live materializer that commits nothing for 90 s, or cannot measure lag, means a stalled pipeline', () => {
    expect(statusReport(input({ materializers: [member(2, 120)] })).pipeline).toMatchObject({
      status: 'stalled',
      problems: ['no batch committed for 120 s'],
    });
    expect(statusReport(input({ materializers: [member(2, 5, { lag: null })] })).pipeline.status).toBe('stalled');
    expect(statusReport(input({ materializers: [member(2, 5, { state: 'erroring' })] })).pipeline.status).toBe(
      'stalled',
    );
  });

  it('all well: ok, with the total lag of live members and dead letters per topic', () => {
    const r = statusReport(
      input({
        freshness: [fresh('cn-a', 'LISTINGS', 60)],
        materializers: [member(2, 5, { lag: '7' }), member(3, 4, { member_id: 'h/2/y', lag: '5' })],
        deadLetters: [{ topic: 'listings.v1', reason: 'sql', count: 1, last_at: ago(10) }],
      }),
      DEFAULT_STATUS_OPTIONS,
    );
    expect(r).toMatchObject({ status: 'ok', pipeline: { status: 'ok', lag: 12, problems: [] }, stale_count: 0 });
    expect(r.dead_letters).toEqual([{ topic: 'listings.v1', reason: 'sql', count: 1, last_at: ago(10).toISOString() }]);
  });

  describe('on a standby', () => {
    const o = { ...DEFAULT_STATUS_OPTIONS, maxReplicaLagMs: 10_000 };

    it('reports the replay lag and stays ok within the threshold', () => {
      const r = statusReport(input({ freshness: [fresh('cn-a', 'LISTINGS', 60)], database: standby(2.5) }), o);
      expect(r.status).toBe('ok');
      expect(r.database).toEqual({
        role: 'standby',
        replay_lag_seconds: 2.5,
        replay_lag_bytes: 2_500,
        receiving: true,
        degraded_after_seconds: 10,
        status: 'ok',
      });
    });

    it('degrades past the threshold, and when no WAL arrives at all', () => {
      const behind = statusReport(input({ freshness: [fresh('cn-a', 'LISTINGS', 60)], database: standby(11) }), o);
      expect(behind).toMatchObject({ status: 'degraded', database: { status: 'lagging', replay_lag_seconds: 11 } });
      const cut = statusReport(input({ freshness: [fresh('cn-a', 'LISTINGS', 60)], database: standby(1, false) }), o);
      expect(cut).toMatchObject({ status: 'degraded', database: { status: 'lagging', receiving: false } });
      // Restarted while its primary is away: nothing replayed since, so how far behind is unknown.
      const unknown = statusReport(
        input({ freshness: [fresh('cn-a', 'LISTINGS', 60)], database: { ...standby(0, false), lag_s: null } }),
        o,
      );
      expect(unknown).toMatchObject({ status: 'degraded', database: { status: 'lagging', replay_lag_seconds: null } });
    });

    // Root cause guarded: on a standby 40 s behind, the heartbeat it replayed last is 40 s older
    // than the wall clock, which read as "materializer down" when only the replica was behind.
    it('judges the materializers as of what it has replayed, not the wall clock', () => {
      const r = statusReport(input({ materializers: [member(42, 45)], database: standby(40) }), {
        ...o,
        maxReplicaLagMs: 60_000,
      });
      expect(r.pipeline.status).toBe('ok');
      expect(r.pipeline.materializers[0]?.heartbeat_age_seconds).toBe(2);
      expect(statusReport(input({ materializers: [member(42, 45)] }), o).pipeline.status).toBe('down');
    });

    it('says nothing of lag on a primary', () => {
      expect(statusReport(input({ freshness: [fresh('cn-a', 'LISTINGS', 60)] })).database).toMatchObject({
        role: 'primary',
        replay_lag_seconds: null,
        replay_lag_bytes: null,
        status: 'ok',
      });
    });
  });
});

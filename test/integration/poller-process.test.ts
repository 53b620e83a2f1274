/**
 * The poller as it is deployed: its own process, configured by environment, wired by main.ts.
 * It polls, publishes a marker, serves /metrics, and on SIGTERM ends its cycle, flushes the
 * producer and exits 0.
 */
import { spawn } from 'node:child_process';
import { topicFor, type PollCycleEvent } from '@skinprices/events';
import { afterAll, describe, expect, it } from 'vitest';
import type { MarketSlug } from '@skinprices/domain';
import { projectTopics, readTopic, startSimulator, type Sim } from '../support/pipeline.js';
import { TestStack } from '../support/stack.js';

describe('poller process', () => {
  const stack = new TestStack();
  afterAll(() => stack.cleanup());

  /** A poller process of `market` on the test's stack and topics; killed at clean-up if still running. */
  const spawnPoller = (sim: Sim, market: MarketSlug, suffix: string, env: Record<string, string>) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'services/poller/src/main.ts'], {
      env: {
        ...process.env,
        MARKET: market,
        UPSTREAM_BASE_URL: sim.running.marketUrls[market],
        KAFKA_BROKERS: stack.env.brokers,
        SCHEMA_REGISTRY_URL: stack.env.registryUrl,
        TOPIC_SUFFIX: suffix,
        LOG_LEVEL: 'warn',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    stack.defer(async () => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    return { child, exited, output: () => output };
  };

  it('polls on its schedule, serves metrics, and stops cleanly on SIGTERM', async () => {
    const sim = await startSimulator(stack, 200);
    const suffix = await projectTopics(stack);
    const metricsPort = 17_000 + Math.floor(Math.random() * 1000);
    const {
      child,
      exited,
      output: out,
    } = spawnPoller(sim, 'eu-a', suffix, {
      POLL_LISTINGS_MS: '1000',
      METRICS_PORT: String(metricsPort),
    });

    // Two cycles a second apart: the schedule runs, the first FULL, the second DELTA.
    const markers = await readTopic(
      stack,
      `${topicFor('pollCycle').name}${suffix}`,
      'pollCycle',
      (e) => e.length >= 2,
      40_000,
    );
    expect(markers.length, out()).toBeGreaterThanOrEqual(2);
    expect(markers.slice(0, 2).map((m) => [m.market, m.kind, m.mode, m.outcome])).toEqual([
      ['eu-a', 'LISTINGS', 'FULL', 'COMPLETE'],
      ['eu-a', 'LISTINGS', 'DELTA', 'COMPLETE'],
    ]);
    // The clock is frozen: nothing changed, so the delta cycle sent nothing.
    expect(markers[1]?.events_emitted).toBe(0);

    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/poller_cycles_total\{market="eu-a",kind="LISTINGS",mode="FULL",outcome="COMPLETE"\} 1/);
    expect(metrics).toMatch(/poller_upstream_requests_total\{market="eu-a",status="200"\} \d+/);

    child.kill('SIGTERM');
    const code = await Promise.race([exited, new Promise<string>((r) => setTimeout(() => r('timeout'), 15_000))]);
    expect(code, out()).toBe(0);
  }, 90_000);

  it('resumes its history import and sales window after a restart: nothing is published twice', async () => {
    // A frozen clock: after the restart nothing new happens upstream, so every record a restarted
    // poller publishes would be one published before.
    const sim = await startSimulator(stack, 150, Date.UTC(2026, 10, 20, 12), {}, { dailyHistory: true });
    const suffix = await projectTopics(stack);
    const BACKFILL_DAYS = 4;
    /** Of those, the days whose hours are imported too (history-hours.v1): a HISTORY cycle each. */
    const HOURLY_DAYS = 2;
    const HISTORY_CYCLES = BACKFILL_DAYS + HOURLY_DAYS;
    const start = (market: 'hist-a' | 'cn-a') =>
      spawnPoller(sim, market, suffix, {
        CATALOGUE_GATE_MS: '0',
        HISTORY_BACKFILL_DAYS: String(BACKFILL_DAYS),
        HOURLY_BACKFILL_DAYS: String(HOURLY_DAYS),
        HOURLY_PACE_MS: '0',
        POLL_SALES_MS: '600000',
        // A listing marketplace's daily closes from its upstream's history endpoint (the warm demo).
        ...(market === 'cn-a' ? { DAILY_HISTORY: 'history' } : {}),
      });
    const stopAll = async (procs: ReturnType<typeof start>[]) => {
      for (const p of procs) p.child.kill('SIGTERM');
      for (const p of procs) expect(await p.exited, p.output()).toBe(0);
    };
    const markersTopic = `${topicFor('pollCycle').name}${suffix}`;
    const markersUntil = (done: (m: PollCycleEvent[]) => boolean) =>
      readTopic(stack, markersTopic, 'pollCycle', done, 60_000);
    const count = (m: PollCycleEvent[], market: string, kind: string) =>
      m.filter((x) => x.market === market && x.kind === kind && x.outcome === 'COMPLETE').length;
    const admin = stack.kafka.admin();
    await admin.connect();
    stack.defer(() => admin.disconnect());
    const records = async (event: 'historyPoint' | 'historyHours' | 'sale') =>
      (await admin.fetchTopicOffsets(`${topicFor(event).name}${suffix}`)).reduce((n, p) => n + Number(p.high), 0);

    const first = [start('hist-a'), start('cn-a')];
    const warm = await markersUntil(
      (m) =>
        count(m, 'hist-a', 'HISTORY') >= HISTORY_CYCLES &&
        count(m, 'cn-a', 'HISTORY') >= HISTORY_CYCLES &&
        count(m, 'cn-a', 'SALES') >= 1,
    );
    expect(count(warm, 'hist-a', 'HISTORY'), first.map((p) => p.output()).join('\n')).toBe(HISTORY_CYCLES);
    expect(count(warm, 'cn-a', 'HISTORY')).toBe(HISTORY_CYCLES);
    await stopAll(first);
    const history = await records('historyPoint');
    const hours = await records('historyHours');
    const sales = await records('sale');
    expect(history).toBeGreaterThan(100);
    expect(hours).toBeGreaterThan(100);
    expect(sales).toBeGreaterThan(0);

    const again = [start('hist-a'), start('cn-a')];
    // The restarted cn-a has run its first cycles again (its sales window among them); a history
    // import that started over would have published its first day by then.
    const after = await markersUntil((m) => count(m, 'cn-a', 'SALES') >= 2);
    expect(count(after, 'cn-a', 'SALES'), again.map((p) => p.output()).join('\n')).toBe(2);
    await new Promise((r) => setTimeout(r, 2_000));
    await stopAll(again);
    expect(await records('historyPoint')).toBe(history);
    expect(await records('historyHours')).toBe(hours);
    expect(await records('sale')).toBe(sales);
    const markers = await readTopic(stack, markersTopic, 'pollCycle', () => false, 5_000);
    expect(count(markers, 'hist-a', 'HISTORY')).toBe(HISTORY_CYCLES);
    expect(count(markers, 'cn-a', 'HISTORY')).toBe(HISTORY_CYCLES);
    // What each resumed from: one record per [market, kind] that moved.
    const kept = await readTopic(
      stack,
      `${topicFor('pollerCursor').name}${suffix}`,
      'pollerCursor',
      () => false,
      5_000,
    );
    const latest = new Map(kept.map((c) => [`${c.market} ${c.kind}`, c]));
    expect([...latest.keys()].sort()).toEqual(['cn-a HISTORY', 'cn-a SALES', 'hist-a HISTORY']);
    const days = markers
      .filter((m) => m.market === 'hist-a' && m.kind === 'HISTORY')
      .map((m) => Date.parse(m.cycle_id.split(':')[2] as string) / 86_400_000);
    expect(latest.get('hist-a HISTORY')?.history?.closes_next).toBe(Math.max(...days) + 1);
  }, 180_000);

  it('refuses to start with a bad configuration, naming the variable', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'services/poller/src/main.ts'], {
      env: { ...process.env, MARKET: 'cn-z', UPSTREAM_BASE_URL: 'not a url' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).not.toBe(0);
    expect(output).toMatch(/MARKET/);
    expect(output).toMatch(/UPSTREAM_BASE_URL/);
  }, 30_000);
});

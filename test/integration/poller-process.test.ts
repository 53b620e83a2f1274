/**
 * The poller as it is deployed: its own process, configured by environment, wired by main.ts.
 * It polls, publishes a marker, serves /metrics, and on SIGTERM ends its cycle, flushes the
 * producer and exits 0.
 */
import { spawn } from 'node:child_process';
import { topicFor } from '@skinprices/events';
import { afterAll, describe, expect, it } from 'vitest';
import { projectTopics, readTopic, startSimulator } from '../support/pipeline.js';
import { TestStack } from '../support/stack.js';

describe('poller process', () => {
  const stack = new TestStack();
  afterAll(() => stack.cleanup());

  it('polls on its schedule, serves metrics, and stops cleanly on SIGTERM', async () => {
    const sim = await startSimulator(stack, 200);
    const suffix = await projectTopics(stack);
    const metricsPort = 17_000 + Math.floor(Math.random() * 1000);
    const child = spawn(process.execPath, ['--import', 'tsx', 'services/poller/src/main.ts'], {
      env: {
        ...process.env,
        MARKET: 'eu-a',
        UPSTREAM_BASE_URL: sim.running.marketUrls['eu-a'],
        KAFKA_BROKERS: stack.env.brokers,
        SCHEMA_REGISTRY_URL: stack.env.registryUrl,
        TOPIC_SUFFIX: suffix,
        POLL_LISTINGS_MS: '1000',
        METRICS_PORT: String(metricsPort),
        LOG_LEVEL: 'warn',
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

    // Two cycles a second apart: the schedule runs, the first FULL, the second DELTA.
    const markers = await readTopic(
      stack,
      `${topicFor('pollCycle').name}${suffix}`,
      'pollCycle',
      (e) => e.length >= 2,
      40_000,
    );
    expect(markers.length, output).toBeGreaterThanOrEqual(2);
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
    expect(code, output).toBe(0);
  }, 90_000);

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

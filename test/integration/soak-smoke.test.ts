/**
 * `make soak` in its smoke size (reliability/soak.ts, two minutes, a sample every 10 s, listings
 * polled every 20 s so the burst in the middle arrives within the run): the whole platform as
 * `make run` starts it, under the steady mix of every customer endpoint, the stream and the feed
 * followed. What must hold in any soak, however short: no 5xx and no request without an answer,
 * every endpoint class answered, a sample at every interval, both readers received events (and
 * the same ones), the burst's moved prices all arrived in both, every process alive at the end
 * and never restarted, and all of them stopped cleanly. Whether memory levels off needs the hour
 * of the full run: not judged here.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { SoakResult } from '../../reliability/support/soak-report.js';
import { SOAKED_ENDPOINT_IDS } from '../../reliability/support/soak-mix.js';
import { EXPECTED_PROCESSES } from '../../reliability/support/soak-run.js';

const MINUTES = 2;
const SAMPLE_S = 10;

describe('soak: make soak at smoke size', () => {
  let child: ChildProcess | undefined;
  // Past the time-out the soak is still running: SIGINT makes it stop and remove its platform.
  afterAll(() => {
    if (child?.exitCode === null && child.signalCode === null) child.kill('SIGINT');
  });

  it('runs the mix, samples every interval, the burst arrives, every process lives and stops cleanly', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'soak-smoke-'));
    const out = join(dir, 'soak.json');
    let output = '';
    const code = await new Promise<number | null>((resolve) => {
      child = spawn(
        process.execPath,
        ['--import', 'tsx', 'reliability/soak.ts', '--out', out, '--log', join(dir, 'platform.log')],
        {
          env: {
            ...process.env,
            SOAK_MINUTES: String(MINUTES),
            SOAK_SAMPLE_S: String(SAMPLE_S),
            SOAK_POLL_LISTINGS_MS: '20000',
            SOAK_BURST_ITEMS: '20',
            SOAK_READY_S: '120',
            // The materializer builds the first sales export within seconds, not the minute it
            // waits by default (the soak starts once the export answers).
            EXPORT_CHECK_INTERVAL_MS: '5000',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      child.stdout?.on('data', (c: Buffer) => (output += c.toString()));
      child.stderr?.on('data', (c: Buffer) => (output += c.toString()));
      child.once('exit', resolve);
    });
    const tail = output.slice(-4_000);
    const r = JSON.parse(readFileSync(out, 'utf8')) as SoakResult;
    expect(r.problems, tail).toEqual([]);
    expect(r.errors_5xx).toBe(0);
    expect(r.server_5xx).toBe(0);
    expect(r.no_answer).toBe(0);
    expect(r.samples).toHaveLength((MINUTES * 60) / SAMPLE_S);
    r.samples.forEach((s, i) => expect(s.t_s).toBeCloseTo((i + 1) * SAMPLE_S, -1));
    const answered = new Set(r.samples.flatMap((s) => Object.keys(s.classes)));
    for (const e of SOAKED_ENDPOINT_IDS) expect(answered, e).toContain(e);
    // Every sample has every process's memory, and the API's heap and handles.
    for (const s of r.samples) {
      expect(Object.keys(s.processes).sort()).toEqual(EXPECTED_PROCESSES);
      for (const p of Object.values(s.processes)) expect(p.rss_mb).toBeGreaterThan(0);
      expect(s.processes.api?.heap_used_mb).toBeGreaterThan(0);
      expect(s.processes.api?.handles).toBeGreaterThan(0);
      expect(s.consumer_lag).not.toBeNull();
    }
    expect(r.stream_events).toBeGreaterThan(0);
    expect(r.feed_events).toBeGreaterThan(0);
    expect(r.readers.stream_missed + r.readers.feed_missed).toBe(0);
    expect(r.bursts).toHaveLength(1);
    const [burst] = r.bursts;
    expect(burst?.changes).toBeGreaterThan(0);
    expect(burst?.arrived_feed).toBe(burst?.changes);
    expect(burst?.arrived_stream).toBe(burst?.changes);
    expect(r.missing_at_end).toEqual([]);
    expect(r.restarts).toEqual({});
    expect(r.stopped_cleanly, JSON.stringify(r.stop)).toBe(true);
    // The summary's keys exist, with a figure per process and class.
    expect(Object.keys(r.soak_rss_growth_mb).sort()).toEqual([...EXPECTED_PROCESSES, 'total'].sort());
    expect(r.soak_heap_growth_mb.api).toEqual(expect.any(Number));
    expect(r.soak_p99_drift.all).toEqual(expect.any(Number));
    expect(readFileSync(out.replace(/\.json$/, '.md'), 'utf8')).toMatch(/^\| process +\| RSS first/m);
    expect(code, tail).toBe(0);
  }, 300_000);
});

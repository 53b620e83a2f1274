/**
 * `make bench` in its smoke mode (300 names, one run, 2 s loads): every benchmark runs end to end
 * against the real stack, nginx and wrk, and the summary carries every headline number. The
 * numbers of a smoke run are not judged against the targets (a 300-name catalogue is not the
 * workload); that they exist, are finite and are sane is what keeps the harness from rotting
 * between full runs.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatted } from '../../bench/support/format.js';

describe('bench: make bench --smoke', () => {
  it('runs every benchmark and writes results.json and results.md with every headline number', async () => {
    const out = mkdtempSync(join(tmpdir(), 'bench-smoke-'));
    let output = '';
    const code = await new Promise<number | null>((resolve) => {
      const child = spawn(process.execPath, ['--import', 'tsx', 'bench/run.ts', '--smoke', '--out', out], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout.on('data', (c: Buffer) => (output += c.toString()));
      child.stderr.on('data', (c: Buffer) => (output += c.toString()));
      child.once('exit', resolve);
    });
    expect(code, output).toBe(0);
    const results = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as Record<string, unknown>;
    expect(results.failed).toEqual([]);
    const ratios = [
      'produce_ratio',
      'materialize_ratio',
      'api_ratio',
      'replay_vs_ingest',
      'materialize_write_set_ratio',
      'post_latest_vs_floor',
      'search_vs_floor',
      'history_vs_floor',
    ];
    const positive = [
      'api_p99_ms',
      'cold_catalogue_s',
      'freshness_p99_s',
      'api_rss_mb',
      'api_rss_total_mb',
      'post_latest_p99_ms',
      'api_p99_vs_nginx',
      'post_latest_p99_vs_nginx',
      'webhook_p99_s',
      'webhook_deliveries_per_s',
      'history_p99_vs_nginx',
      'search_p99_vs_nginx',
      'replay_events_per_s',
      'derive_seconds',
      'calm_rows_changed_per_price_change',
      'api_rows_read_per_change',
      'replay_vs_copy',
      'repeat_ingest_ratio',
      'topic_bytes_per_day_35k',
      'standby_freshness_p99_s',
    ];
    // Counts that may be 0 (what a FULL cycle of repeats rewrites), measured all the same.
    for (const key of ['full_cycle_row_versions', 'full_cycle_segments_redeflated'])
      expect(Number.isInteger(results[key]), key).toBe(true);
    for (const key of [...ratios, ...positive]) {
      expect(typeof results[key], key).toBe('number');
      expect(Number.isFinite(results[key]), key).toBe(true);
      expect(results[key] as number, key).toBeGreaterThan(0);
    }
    // A ratio far above 1 means the two sides measured different work. Except produce's at smoke
    // size: ~2,800 records are ProducerPerformance's cold start more than its throughput (a fresh
    // JVM's first sends), against our warm process's one-pass encoder — 5.3 on a CI run. That
    // both sides sent the same records bench/produce.ts checks itself (ProducerPerformance's count).
    for (const key of ratios) if (key !== 'produce_ratio') expect(results[key] as number, key).toBeLessThan(5);
    expect(results.freshness_p50_s as number).toBeLessThanOrEqual(results.freshness_p99_s as number);
    // Written through prettier, as `make lint` checks it: table cells padded to their column.
    const written = readFileSync(join(out, 'results.md'), 'utf8');
    expect(written).toBe(await formatted('bench/results.md', written));
    const md = written.replace(/ {2,}/g, ' ');
    expect(md).toContain('| what | target | measured (median) | ratio | met | detail |');
    expect(md.match(/^\| .* \| [≥≤=] /gm)?.length).toBe(24);
    expect(md).toContain('## Topic growth at the full catalogue');
    expect(md).not.toContain('not measured');
  }, 900_000);
});

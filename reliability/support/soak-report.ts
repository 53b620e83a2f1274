/**
 * The soak's result: reliability/results/soak.json (the headline keys, what must hold, every
 * sample) and soak.md beside it (the same as tables a reader can judge at a glance).
 */
import { SOAKED_ENDPOINT_IDS } from './soak-mix.js';
import { writeResult } from '../../bench/support/harness.js';
import { writeFormatted } from '../../bench/support/format.js';
import { windows, type SoakConfig } from './soak-config.js';
import { MIX } from './soak-mix.js';
import type { StopResult } from './soak-platform.js';
import { EXPECTED_PROCESSES, type SoakRun } from './soak-run.js';
import { FLAT_MB_PER_MIN, summarize, type Summary } from './soak-summary.js';

export type SoakResult = ReturnType<typeof soakResult>;

/** What must hold in any soak, however short: each broken rule is one line. */
function problemsOf(run: SoakRun, s: Summary, stop: StopResult, c: SoakConfig): string[] {
  const out = [...run.problems];
  const n = Math.round((c.SOAK_MINUTES * 60) / c.SOAK_SAMPLE_S);
  if (run.ready.not_ready.length) out.push(`not ready after ${c.SOAK_READY_S} s: ${run.ready.not_ready.join(', ')}`);
  if (s.errors_5xx > 0 || s.server_5xx)
    out.push(`${s.errors_5xx} answers with a 5xx (the API counted ${String(s.server_5xx)})`);
  if (s.no_answer > 0) out.push(`${s.no_answer} requests without an answer`);
  const unanswered = SOAKED_ENDPOINT_IDS.filter((e) => !run.answered.includes(e));
  if (unanswered.length) out.push(`endpoint classes never answered 200: ${unanswered.join(', ')}`);
  if (run.samples.length !== n) out.push(`${run.samples.length} samples of ${n}`);
  const gaps = run.samples.map((x, i) => x.t_s - (run.samples[i - 1]?.t_s ?? 0));
  if (gaps.some((g) => g > 1.5 * c.SOAK_SAMPLE_S)) out.push(`a sample came late: gaps ${gaps.join(', ')} s`);
  if (run.stream.events === 0) out.push('the stream received no event');
  if (run.feed.events === 0) out.push('the feed received no event');
  for (const b of run.bursts)
    if (b.changes === 0 || b.arrived_feed < b.changes || b.arrived_stream < b.changes)
      out.push(
        `burst at ${b.at_s} s: ${b.changes} moved, ${b.arrived_feed} in the feed, ${b.arrived_stream} in the stream`,
      );
  if (run.bursts.length === 0) out.push('no burst was fired');
  if (run.readers.stream_missed || run.readers.feed_missed)
    out.push(`the readers differ: ${JSON.stringify(run.readers)}`);
  if (run.missing_at_end.length) out.push(`not running at the end: ${run.missing_at_end.join(', ')}`);
  if (Object.keys(run.restarts).length) out.push(`restarted: ${JSON.stringify(run.restarts)}`);
  if (stop.exit !== 0 || stop.survivors.length)
    out.push(`not stopped cleanly: exit ${String(stop.exit)}, survivors ${stop.survivors.join(', ') || 'none'}`);
  return out;
}

export function soakResult(run: SoakRun, c: SoakConfig, stop: StopResult, limiter: string) {
  const totalS = c.SOAK_MINUTES * 60;
  const s = summarize(run.samples, run.history, totalS);
  const problems = problemsOf(run, s, stop, c);
  return {
    what: 'the whole platform as make run starts it, under a steady mix of every customer endpoint, the change stream and feed followed, bursts of upstream price moves',
    machine: '2 cores; Kafka, registry, PostgreSQL, the platform and the soak on one machine',
    minutes: c.SOAK_MINUTES,
    sample_s: c.SOAK_SAMPLE_S,
    catalogue_names: c.SOAK_CATALOGUE,
    poll_listings_ms: c.SOAK_POLL_LISTINGS_MS || 'registry default',
    limiter,
    mix_per_minute: Object.fromEntries(MIX.map((m) => [m.endpoint, m.perMinute])),
    ready_s: run.ready.seconds,
    windows_s: windows(totalS),
    verdict: s.levels_off
      ? `memory levels off: no process grows faster than ${FLAT_MB_PER_MIN} MB a minute in the last third, or half as fast as in the middle third`
      : `memory still grows in the last third: ${s.growing.join(', ')}`,
    ...s,
    stream_events: run.stream.events,
    feed_events: run.feed.events,
    stream_reconnects: run.stream.connects - 1,
    stream_interruptions: run.stream.interruptions,
    feed_refusals: run.feed.refusals,
    readers: run.readers,
    bursts: run.bursts,
    processes: EXPECTED_PROCESSES,
    missing_at_end: run.missing_at_end,
    restarts: run.restarts,
    stop,
    stopped_cleanly: stop.exit === 0 && stop.survivors.length === 0,
    tail: run.tail,
    problems,
    samples: run.samples,
  };
}

export async function writeSoak(out: string, r: SoakResult): Promise<void> {
  await writeResult(out, r);
  await writeFormatted(out.replace(/\.json$/, '.md'), markdown(r));
}

const show = (v: unknown) => (v === null || v === undefined ? '—' : String(v));

function markdown(r: SoakResult): string {
  const procs = Object.keys(r.soak_rss_growth_mb);
  const classes = Object.keys(r.soak_p99_drift);
  const perClass = (cls: string) =>
    r.samples.reduce(
      (n, x) =>
        n + (cls === 'all' ? Object.values(x.classes) : [x.classes[cls]]).reduce((a, c) => a + (c?.requests ?? 0), 0),
      0,
    );
  const errorsOf = (cls: string) => {
    const e: Record<string, number> = {};
    for (const x of r.samples)
      for (const [k, c] of Object.entries(x.classes))
        if (cls === 'all' || k === cls) for (const [st, n] of Object.entries(c.errors)) e[st] = (e[st] ?? 0) + n;
    return (
      Object.entries(e)
        .map(([st, n]) => `${st}: ${n}`)
        .join(', ') || 'none'
    );
  };
  const [first, last] = [r.windows_s.first, r.windows_s.last].map(
    ([a, b]) => `${Math.round(a / 60)}–${Math.round(b / 60)} min`,
  );
  return [
    '# Soak results',
    '',
    `Generated by \`make soak\` (reliability/soak.ts): ${r.minutes} minutes, a sample every ${r.sample_s} s, ${r.catalogue_names} catalogue names, limiter ${r.limiter}. Every sample: \`soak.json\`.`,
    `The first window is ${first} (after the warm-up), the last ${last}.`,
    '',
    `**${r.verdict}.** ${r.errors_5xx} answers with a 5xx, ${r.no_answer} without an answer, of ${r.requests} requests; stream ${r.stream_events} events, feed ${r.feed_events}; bursts: ${r.bursts.map((b) => `${b.changes} prices at ${b.at_s} s, all in the feed after ${show(b.feed_all_s)} s, in the stream after ${show(b.stream_all_s)} s`).join('; ')}; consumer lag at most ${show(r.consumer_lag_max)}; stopped in ${r.stop.seconds.toFixed(1)} s${r.stopped_cleanly ? '' : ' (not cleanly)'}.`,
    '',
    '| process | RSS first (MB) | RSS last (MB) | growth (MB) | slope middle third (MB/min) | slope last third (MB/min) | verdict |',
    '|---|---|---|---|---|---|---|',
    ...procs.map((p) => {
      const sl = r.rss_slope_mb_per_min[p];
      return `| ${p} | ${show(r.rss_mb[p]?.first)} | ${show(r.rss_mb[p]?.last)} | ${show(r.soak_rss_growth_mb[p])} | ${show(sl?.middle)} | ${show(sl?.last)} | ${show(sl?.verdict)} |`;
    }),
    '',
    ...Object.keys(r.soak_heap_growth_mb).map(
      (p) =>
        `${p}: heap growth ${show(r.soak_heap_growth_mb[p])} MB, active handles growth ${show(r.soak_handles_growth[p])}.`,
    ),
    '',
    '| endpoint class | requests | p99 first (ms) | p99 last (ms) | drift | errors |',
    '|---|---|---|---|---|---|',
    ...classes.map(
      (cls) =>
        `| ${cls} | ${perClass(cls)} | ${show(r.p99_ms[cls]?.first)} | ${show(r.p99_ms[cls]?.last)} | ${show(r.soak_p99_drift[cls])} | ${errorsOf(cls)} |`,
    ),
    '',
    ...(r.problems.length
      ? ['Problems:', '', ...r.problems.map((p) => `- ${p}`), '']
      : [
          'Every rule held (no 5xx, every class answered, every sample, the bursts arrived, every process alive, a clean stop).',
          '',
        ]),
  ].join('\n');
}

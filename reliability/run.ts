/**
 * `make chaos`: a bounded fault run on this machine, each scenario in its own process with a time
 * budget, then reliability/results.md (what was done, the invariant, what was measured, whether it
 * held) and reliability/results.json (the headline keys). Every number is measured; every random
 * choice derives from one seed, printed first (CHAOS_SEED=n or --seed n repeats a run).
 *
 *   node --import tsx reliability/run.ts                  full: ~20 min
 *   node --import tsx reliability/run.ts --smoke --out D  what `make test` runs (no broker kill)
 *   --only pipeline,poison                                 some scenarios
 *
 * Scenarios (reliability/*.ts): pipeline (upstream fault kinds × marketplaces, invented prices, the
 * limiter, hostile requests), materializer-kills, poison, webhooks (receivers down, failing,
 * throttling and hanging; the notifier SIGKILLed mid-delivery), broker-kill (the three-node cluster,
 * started beside the single-node stack when not running, stopped again afterwards).
 * Needs `make up`. Only loopback targets.
 */
import { spawn } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { MARKETS } from '@skinprices/domain';
import { FAULT_KINDS } from '@skinprices/simulator';
import { scenarioSeed } from './support/harness.js';
import { writeFormatted } from '../bench/support/format.js';

const { values } = parseArgs({
  options: {
    smoke: { type: 'boolean', default: false },
    out: { type: 'string' },
    only: { type: 'string' },
    seed: { type: 'string' },
    // Rebuilds results.md and results.json from the raw results of the last run (no scenario runs).
    'report-only': { type: 'boolean', default: false },
  },
  strict: true,
});
const reportOnly = values['report-only'] as boolean;
const smoke = values.smoke as boolean;
const outDir = values.out ?? (smoke ? join('.local', 'chaos-smoke') : 'reliability');
type R = Record<string, unknown>;
const previous: R =
  reportOnly && existsSync(join(outDir, 'results.json'))
    ? (JSON.parse(readFileSync(join(outDir, 'results.json'), 'utf8')) as R)
    : {};
const seed = Number(values.seed ?? previous.seed ?? process.env.CHAOS_SEED ?? Math.floor(Math.random() * 2 ** 31));
if (!Number.isSafeInteger(seed) || seed < 0) throw new Error(`seed: a non-negative integer, got ${seed}`);
const logDir = smoke ? join(outDir, 'logs') : join('.local', 'chaos-logs');
mkdirSync(join(outDir, 'results'), { recursive: true });
mkdirSync(logDir, { recursive: true });
console.log(`chaos ${smoke ? 'smoke' : 'full'} run, seed ${seed} (CHAOS_SEED=${seed} repeats it); logs in ${logDir}`);

const SCENARIOS = [
  { name: 'pipeline', budgetS: smoke ? 240 : 900, full: false },
  { name: 'materializer-kills', budgetS: smoke ? 180 : 600, full: false },
  { name: 'poison', budgetS: smoke ? 90 : 180, full: false },
  { name: 'webhooks', budgetS: smoke ? 240 : 600, full: false },
  // Three more JVMs on this machine and minutes of rounds: not in the smoke run.
  { name: 'broker-kill', budgetS: 900, full: true },
] as const;
type Scenario = (typeof SCENARIOS)[number]['name'];
const only = values.only ? new Set(values.only.split(',')) : undefined;

/** Runs a scenario, its output to its log (and to the console, without kafkajs's JSON lines). */
function runScenario(name: Scenario, budgetS: number): Promise<string | undefined> {
  const out = join(outDir, 'results', `${name}.json`);
  rmSync(out, { force: true });
  const argv = ['--import', 'tsx', `reliability/${name}.ts`, '--seed', String(scenarioSeed(seed, name)), '--out', out];
  if (smoke) argv.push('--smoke');
  console.log(`\n== ${name} (budget ${budgetS} s): ${argv.slice(2).join(' ')}`);
  const log = createWriteStream(join(logDir, `${name}.log`));
  return new Promise((resolve) => {
    const child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    const echo = (c: Buffer) => {
      log.write(c);
      for (const line of c.toString().split('\n'))
        if (line.trim() && !line.startsWith('{"level"') && !/^\s+at /.test(line)) console.log(`  ${line}`);
    };
    child.stdout.on('data', echo);
    child.stderr.on('data', echo);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGTERM');
      setTimeout(() => child.kill('SIGKILL'), 30_000).unref();
    }, budgetS * 1000);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      log.end();
      if (timedOut) resolve(`${name}: over its budget of ${budgetS} s, stopped`);
      else if (code !== 0) resolve(`${name}: exited ${code ?? signal}`);
      else if (!existsSync(out)) resolve(`${name}: wrote no result`);
      else resolve(undefined);
    });
  });
}

const started = Date.now();
const failed: string[] = [];
const skipped: string[] = [];
for (const s of SCENARIOS) {
  if (only && !only.has(s.name)) continue;
  if (s.full && smoke) {
    skipped.push(s.name);
    continue;
  }
  if (reportOnly) continue;
  const problem = await runScenario(s.name, s.budgetS);
  if (problem) failed.push(problem);
}
// The run's own problems (a scenario over its budget) are not in the raw results: keep them.
if (reportOnly)
  failed.push(
    ...((previous.failed as string[] | undefined) ?? []).filter((f) =>
      /^[a-z-]+: (over its budget|exited|wrote no result)/.test(f),
    ),
  );

// ---- the summary ---------------------------------------------------------------------------------------
const read = (name: Scenario): R => {
  const path = join(outDir, 'results', `${name}.json`);
  return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as R) : {};
};
const r = Object.fromEntries(SCENARIOS.map((s) => [s.name, read(s.name)])) as Record<Scenario, R>;
for (const s of SCENARIOS)
  for (const e of (r[s.name].errors as string[] | undefined) ?? []) failed.push(`${s.name}: ${e}`);
const num = (v: unknown): number | undefined => (typeof v === 'number' ? v : undefined);
const p = r.pipeline;
const w = r.webhooks;
const b = r['broker-kill'];
const bt = (b.truth ?? {}) as R;
const fuzz = (p.fuzz ?? {}) as R;
const limiter = (p.limiter ?? {}) as Record<string, { bursts: { verdict: string; accepted: number }[] }>;
const combos = FAULT_KINDS.length * MARKETS.length;
const apiStops = ((p.api_stops ?? []) as ({ seconds: number; killed: boolean } | string)[]).filter(
  (x): x is { seconds: number; killed: boolean } => typeof x !== 'string',
);

const ROWS: {
  key: string;
  scenario: Scenario;
  what: string;
  invariant: string;
  holds: (v: unknown) => boolean;
  detail: string;
}[] = [
  {
    key: 'broker_kill_lost',
    scenario: 'broker-kill',
    what: 'three-node cluster, one broker kill -9ed mid-ingest and brought back: listings and sales lost against the simulator’s truth',
    invariant: '= 0',
    holds: (v) => v === 0,
    detail: `broker ${String(b.victim_node ?? '?')} (leader of ${String(b.victim_led_partitions ?? '?')} of ${String(b.partitions ?? '?')} partitions) down ${String(b.down_for_s ?? '?')} s, ${String(b.records ?? '?')} records; listings lost ${String(bt.listings_lost ?? '?')}, left over ${String(bt.listings_extra ?? '?')}; sales lost ${String(bt.sales_lost ?? '?')} of ${String(bt.sales ?? '?')} (never on the topic: ${String(bt.sales_lost_never_on_topic ?? '?')}; by round ${JSON.stringify(bt.sales_lost_by_round ?? null)}; counted as sent by a cycle whose send resolved, yet not on the topic: ${JSON.stringify(b.sales_acknowledged_not_on_topic ?? null)}); materializer restarts ${String(b.materializer_restarts ?? '?')}; cycles not COMPLETE after the broker was back: ${String((b.not_complete_after_recovery as unknown[] | undefined)?.length ?? '?')}`,
  },
  {
    key: 'broker_kill_doubled',
    scenario: 'broker-kill',
    what: 'the same: effects doubled in the read model (sales stored twice, price changes recorded twice, tables differing from an undisturbed reading)',
    invariant: '= 0',
    holds: (v) => v === 0,
    detail: `${JSON.stringify(b.doubled_effects ?? null)}; tables whose checksum differs from an undisturbed reading of the same topics: ${JSON.stringify(b.tables_different_from_reference ?? null)}; records on the topics twice (at-least-once across producer sessions, absorbed): ${JSON.stringify(b.topic_duplicates_by_topic ?? null)}`,
  },
  {
    key: 'materializer_kills',
    scenario: 'materializer-kills',
    what: 'materializer SIGKILLed mid-stream at seeded random points, restarted each time',
    invariant: smoke ? '≥ 3 (smoke)' : '≥ 20',
    holds: (v) => (num(v) ?? 0) >= (smoke ? 3 : 20),
    detail: `${String(r['materializer-kills'].records ?? '?')} records of every kind; killed at ${((r['materializer-kills'].kills as { applied_at_kill: number }[] | undefined) ?? []).map((k) => k.applied_at_kill).join(', ')}`,
  },
  {
    key: 'tables_equal',
    scenario: 'materializer-kills',
    what: 'after the kills, every table’s checksum (tableChecksums) equals an undisturbed materializer’s',
    invariant: 'true',
    holds: (v) => v === true,
    detail: `different: ${JSON.stringify(r['materializer-kills'].tables_different ?? null)}; dead letters ${String(r['materializer-kills'].dead_letters ?? '?')}; clean exit ${String(r['materializer-kills'].clean_exit_code ?? '?')}`,
  },
  {
    key: 'fault_kinds_x_markets',
    scenario: 'pipeline',
    what: 'upstream fault kinds × marketplaces exercised (each fault met by the poller of every kind the marketplace has)',
    invariant: `= ${combos} (${FAULT_KINDS.length} × ${MARKETS.length})`,
    holds: (v) => v === combos,
    detail: `kinds: ${FAULT_KINDS.join(', ')}; not fired: ${JSON.stringify(p.combos_not_fired ?? null)}; listing marketplaces equal to the truth after the last clean round: ${String(p.recovered_markets ?? '?')}`,
  },
  {
    key: 'invented_prices',
    scenario: 'pipeline',
    what: 'prices in the read model and the API that are 0 or not the simulator’s truth at a polled moment',
    invariant: '= 0',
    holds: (v) => v === 0,
    detail: `${String(p.prices_checked ?? '?')} prices checked (every price column of every table; the list, buy-order, catalogue and store answers); zero ${String(p.zero_prices ?? '?')}`,
  },
  {
    key: 'fuzz_requests',
    scenario: 'pipeline',
    what: 'hostile HTTP requests generated by fast-check from the seed',
    invariant: smoke ? '≥ 1,000 (smoke)' : '≥ 10,000',
    holds: (v) => (num(v) ?? 0) >= (smoke ? 1_000 : 10_000),
    detail: `${String(fuzz.seconds ?? '?')} s; answers by status ${JSON.stringify(fuzz.by_status ?? null)}; no answer ${String(fuzz.no_answer ?? '?')} ${JSON.stringify(fuzz.no_answer_reasons ?? null)}`,
  },
  {
    key: 'fuzz_5xx',
    scenario: 'pipeline',
    what: 'answers with a 5xx status to those requests',
    invariant: '= 0',
    holds: (v) => v === 0,
    detail: `API restarts after a crash: ${String(fuzz.api_restarts ?? '?')}`,
  },
  {
    key: 'fuzz_error_shape_ratio',
    scenario: 'pipeline',
    what: 'share of error answers exactly {"error":{"status":N,"code":"…","message":"…"}}, N = the HTTP status',
    invariant: '= 1',
    holds: (v) => v === 1,
    detail: `${String(fuzz.in_shape ?? '?')} of ${String(fuzz.error_answers ?? '?')}; not in shape by status ${JSON.stringify(fuzz.not_in_shape_by_status ?? null)}; wrong methods answered 404: ${String(fuzz.wrong_method_404 ?? '?')} of ${String(fuzz.wrong_method ?? '?')}; 405 without Allow: ${String(fuzz.status_405_without_allow ?? '?')}`,
  },
  {
    key: 'limiter_exact',
    scenario: 'pipeline',
    what: '200 concurrent requests per key against 10 per second: exactly 10 let through per second window',
    invariant: 'true',
    holds: (v) => v === true,
    detail: Object.entries(limiter)
      .map(
        ([mode, l]) =>
          `${mode}: ${l.bursts.length} bursts, accepted ${l.bursts.map((b) => b.accepted).join('/')}, ${l.bursts.filter((b) => b.verdict === 'exact').length} exact in one window`,
      )
      .concat(typeof p.limiter_redis === 'string' ? [p.limiter_redis] : [])
      .join('; '),
  },
  {
    key: 'api_stop_s',
    scenario: 'pipeline',
    what: 'seconds from SIGTERM to exit of the API processes after the run’s load, the slowest (their clients’ keep-alive connections still open)',
    invariant: '< 5',
    holds: (v) => (num(v) ?? Infinity) < 5,
    detail: `each: ${apiStops.map((x) => `${x.seconds.toFixed(1)} s${x.killed ? ' (killed)' : ''}`).join(', ') || '?'}; exit codes ${JSON.stringify(p.api_stop_exit_codes ?? null)}; SIGKILL after ${smoke ? 10 : 35} s`,
  },
  {
    key: 'materializer_stop_s',
    scenario: 'materializer-kills',
    what: 'seconds from SIGTERM to exit of the materializer process after it caught up from the kills',
    invariant: '< 30 (its shutdown deadline)',
    holds: (v) => (num(v) ?? Infinity) < 30,
    detail: `exit code ${String(r['materializer-kills'].clean_exit_code ?? '?')}`,
  },
  {
    key: 'poison_isolated',
    scenario: 'poison',
    what: 'records that decode but fail in SQL (NUL in name or phase, numeric overflow): dead-lettered, partition moves on',
    invariant: 'true',
    holds: (v) => v === true,
    detail: `${((r.poison.poisons as { kind: string; dead_lettered: boolean; good_after_applied: number; good_after: number }[] | undefined) ?? []).map((x) => `${x.kind}: dead-lettered ${x.dead_lettered}, ${x.good_after_applied}/${x.good_after} after it applied`).join('; ')}; isolated after ${String(r.poison.seconds_to_isolation ?? '—')} s`,
  },
  ...webhookRows(w),
];

/** The webhook scenario's invariants (reliability/webhooks.ts). */
function webhookRows(w: R) {
  const per = JSON.stringify(w.per_subscription ?? null);
  const base = { scenario: 'webhooks' as const, invariant: '= 0', holds: (v: unknown) => v === 0 };
  return [
    {
      ...base,
      key: 'webhook_lost',
      what: 'matching changes never accepted by their receiver (one down, then 500 and 429; one hanging past the timeout; the notifier SIGKILLed mid-delivery)',
      detail: `${String(w.changes ?? '?')} changes (${String(w.republished ?? '?')} republished) to 4 subscriptions; per subscription ${per}; flaky down ${String(w.flaky_down_s ?? '?')} s, first accepted ${String(w.flaky_first_accept_after_up_s ?? '?')} s after it came up; slow hung ${String(w.slow_hang_s ?? '?')} s (${String(w.slow_timeouts ?? '?')} timed-out requests)`,
    },
    {
      ...base,
      key: 'webhook_kills',
      what: 'notifier processes SIGKILLed mid-delivery and restarted',
      invariant: smoke ? '≥ 2 (smoke)' : '≥ 8',
      holds: (v: unknown) => (num(v) ?? 0) >= (smoke ? 2 : 8),
      detail: `at ${JSON.stringify(w.kill_points ?? null)}; messages accepted again after a kill (same webhook-id, at least once): ${String(w.redelivered_ids ?? '?')}`,
    },
    {
      ...base,
      key: 'webhook_unmatched',
      what: 'changes delivered to a subscription whose filters they do not match (an independent decimal oracle)',
      detail: per,
    },
    {
      ...base,
      key: 'webhook_id_conflicts',
      what: 'webhook-ids seen with more than one change (or subscription), plus changes of one subscription seen under more than one id (republished included)',
      detail: `ids with several changes ${String(w.id_conflicts ?? '?')}; changes with several ids ${String(w.changes_with_many_ids ?? '?')}; signatures that did not verify with standardwebhooks: ${String(w.bad_signatures ?? '?')}`,
    },
    {
      ...base,
      key: 'webhook_good_p99_s',
      what: 'commit-to-delivery p99 of the healthy subscription while the others are down, failing or hanging (before the first kill)',
      invariant: '≤ 2',
      holds: (v: unknown) => (num(v) ?? Infinity) <= 2,
      detail: `${String(w.good_samples_before_kills ?? '?')} deliveries`,
    },
    {
      ...base,
      key: 'webhook_retry_after_honoured',
      what: 'after each 429 with Retry-After: 7, no request reached that receiver for 7 s (the subscription paused) and the throttled message came again no sooner (the backoff alone: 2.5–10 s)',
      invariant: 'true',
      holds: (v: unknown) => v === true,
      detail: `${JSON.stringify(w.retry_after ?? null)}`,
    },
  ];
}

const summary: R = { mode: smoke ? 'smoke' : 'full', seed };
const held: Record<string, boolean | null> = {};
for (const row of ROWS) {
  const v = r[row.scenario][row.key];
  summary[row.key] = v ?? null;
  held[row.key] = v === undefined || v === null ? null : row.holds(v);
}
summary.held = held;
// A key may be unmeasured only when its scenario was skipped on purpose.
summary.all_held = ROWS.every((row) => held[row.key] === true || skipped.includes(row.scenario));
summary.skipped = skipped.map((s) => `${s}: not in the smoke run (a three-node cluster and minutes of rounds)`);
summary.failed = failed;
summary.measured_at = reportOnly ? (previous.measured_at ?? null) : new Date().toISOString();
summary.seconds = reportOnly ? (previous.seconds ?? null) : Math.round((Date.now() - started) / 1000);
// --only: the other scenarios' rows come from their raw results of an earlier run, kept in results/.
summary.only = reportOnly ? (previous.only ?? null) : only ? [...only] : null;
await writeFormatted(join(outDir, 'results.json'), JSON.stringify(summary));
// The raw results too: they are committed beside the summary.
for (const sc of SCENARIOS) {
  const path = join(outDir, 'results', `${sc.name}.json`);
  if (existsSync(path)) await writeFormatted(path, readFileSync(path, 'utf8'));
}

// Table cells: one line, no pipes, and control bytes (the fuzzer's NULs) written as escapes.
const cell = (s: string) =>
  s
    .replaceAll('|', '\\|')
    .replaceAll('\n', ' ')
    .replace(/[^\x20-\x7e\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
const show = (v: unknown) => (v === undefined || v === null ? 'not measured' : String(v));
type Example = { request: string; status: number | string; body: string };
const examples = (fuzz.examples ?? {}) as Record<string, Example[]>;
const lines = [
  '# Reliability results',
  '',
  `Generated by \`make chaos\` (reliability/run.ts, ${smoke ? 'smoke' : 'full'} size) on ${String(summary.measured_at)} in ${String(summary.seconds)} s,`,
  `seed ${seed} (\`CHAOS_SEED=${seed} make chaos\` repeats every random choice). Raw results: \`reliability/results/*.json\`.`,
  'Every number is measured on this 2-core machine; the invariants are design.md’s failure rules.',
  ...(summary.only
    ? [
        `This run was \`--only ${(summary.only as string[]).join(',')}\`: the other scenarios' rows are their raw results from an earlier run (each file's \`measured_at\` and seed).`,
      ]
    : []),
  '',
  '| key | what | invariant | measured | held | detail |',
  '|---|---|---|---|---|---|',
  ...ROWS.map(
    (row) =>
      `| \`${row.key}\` | ${cell(row.what)} | ${cell(row.invariant)} | ${cell(show(summary[row.key]))} | ${
        held[row.key] === null ? '' : held[row.key] ? 'yes' : '**no**'
      } | ${cell(row.detail)} |`,
  ),
  '',
];
if (skipped.length) lines.push('Skipped:', '', ...(summary.skipped as string[]).map((s) => `- ${s}`), '');
if (failed.length) lines.push('Scenario errors:', '', ...failed.map((f) => `- ${cell(f)}`), '');
const exampleSection = (title: string, xs: Example[] | undefined) => {
  if (!xs?.length) return;
  lines.push(`${title}:`, '', '| request | answer | body |', '|---|---|---|');
  for (const x of xs)
    lines.push(
      `| \`${cell(x.request).replaceAll('`', "'")}\` | ${cell(String(x.status))} | ${cell(x.body.slice(0, 120)) || '(empty)'} |`,
    );
  lines.push('');
};
const byTag = Object.entries(
  (fuzz.not_in_shape_by_tag ?? {}) as Record<string, { not_in_shape: number; requests: number }>,
);
if (byTag.length)
  lines.push(
    'Error answers not in the error shape, by the hostile feature of the request (a request can have several):',
    '',
    '| feature | not in shape | requests with it |',
    '|---|---|---|',
    ...byTag.map(([t, v]) => `| ${cell(t)} | ${v.not_in_shape} | ${v.requests} |`),
    '',
  );
const rounds = (b.rounds ?? []) as { round: number; during_outage: boolean; problems: string[] }[];
if (rounds.some((x) => x.problems.length))
  lines.push(
    'Broker kill: poll cycles that were not COMPLETE (round: marketplace kind outcome: the marker’s error):',
    '',
    ...rounds.flatMap((x) =>
      x.problems.map((p) => `- round ${x.round}${x.during_outage ? ' (broker down)' : ''}: ${cell(p)}`),
    ),
    '',
  );
const observations = [
  ...(typeof fuzz.no_answer === 'number' && fuzz.no_answer > 0
    ? [`${fuzz.no_answer} hostile requests got no answer at all: ${JSON.stringify(fuzz.no_answer_reasons)}.`]
    : []),
  ...(typeof b.materializer_restarts === 'number' && b.materializer_restarts > 0
    ? [`The materializer died during the broker kill and was restarted: ${JSON.stringify(b.materializer_exits)}.`]
    : []),
];
if (observations.length) lines.push('Other observations:', '', ...observations.map((o) => `- ${cell(o)}`), '');
exampleSection('Hostile requests answered with a 5xx (first of each kind)', examples.five_xx);
exampleSection('Error answers not in the error shape (first of each kind)', examples.not_in_shape);
exampleSection('Requests without an answer (first of each kind)', examples.no_answer);
exampleSection(
  'Wrong methods on one of our paths answered 404, not 405 (first of each kind)',
  examples.wrong_method_404,
);
const invented = [
  ...(((p.read_model_prices as R | undefined)?.examples as R[] | undefined) ?? []),
  ...(((p.api_prices as R | undefined)?.examples as R[] | undefined) ?? []),
];
if (invented.length)
  lines.push('Zero or invented prices (first few):', '', ...invented.map((e) => `- ${cell(JSON.stringify(e))}`), '');
await writeFormatted(join(outDir, 'results.md'), lines.join('\n'));

console.log(
  `\n${ROWS.map((row) => `${row.key.padEnd(24)} ${show(summary[row.key]).padEnd(12)} ${held[row.key] === null ? '-' : held[row.key] ? 'held' : 'FAILED'}`).join('\n')}`,
);
console.log(`\nwrote ${join(outDir, 'results.md')} and results.json (seed ${seed}, ${String(summary.seconds)} s)`);
process.exit(failed.length === 0 && summary.all_held ? 0 : 1);

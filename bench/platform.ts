/**
 * The whole platform as `make run` boots it (infra/local/run.ts: simulator, 14 pollers, the
 * materializer and the API, each its own process), at full catalogue size:
 *
 * - cold: from the pollers' first upstream request (the simulator's /_sim/traffic) until every
 *   listing marketplace's full list is API-visible (a COMPLETE listings cycle in /v1/status and its
 *   rows in GET /v1/prices/{market}, the catalogue for USD-1..6, /v1/store); `cold_with_boot_s`
 *   counts from the launch of the services instead (their start-up included);
 * - freshness: price changes set upstream (simulator overrides), each timed from the poller's
 *   produce of the changed listing (its Kafka CreateTime: the moment the poll saw it) until
 *   GET /v1/prices/{market} shows it. That excludes the poll interval and the page walk before the
 *   item's page; `override_to_visible` includes both, for comparison.
 *
 *   node --import tsx bench/platform.ts [--size 35000] [--runs 3] [--profile dir]
 *   BENCH_HISTORY_DAYS=n: the history-only marketplace's backfill (default 30; 0: a cold start
 *   without it, to weigh its share)
 *   BENCH_PLATFORM_LOG=file: the services' log (their stdout, appended; by default dropped), to
 *   find the cause of a 5xx or a late cycle after the run
 *   BENCH_COLD_ONLY=1: each run ends after its cold start (~1.5 min at full size instead of ~5),
 *   its topics, subjects and schemas removed as usual; the result has no freshness figures. For
 *   alternated A/B runs of a change to the cold start (bench/bottlenecks.md), not for results.json.
 *
 * Needs `make up`. Own topics, schemas and ports; all removed afterwards.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LIST_MARKETS } from '@skinprices/api';
import { MARKETS } from '@skinprices/domain';
import { createKafka, deleteTopics, EventSerde, itemKey, topicDefinitions } from '@skinprices/events';
import { waitForUrl } from '@skinprices/runtime';
import { createPool } from '@skinprices/store';
import {
  benchArgs,
  benchKey,
  cpuDelta,
  cpuSeconds,
  median,
  percentile,
  round,
  writeResult,
} from './support/harness.js';

const args = benchArgs('platform');
const brokers = process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';
const registryUrl = process.env.SCHEMA_REGISTRY_URL ?? 'http://127.0.0.1:8081/apis/ccompat/v7';
const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5442/skinprices';
const LISTING_MARKETS = MARKETS.filter((m) => m.capabilities.includes('listings')).map((m) => m.slug);
// Listing cycles every 5 s once cold: the steady state in which single changes are timed.
// Listings are re-polled every 5 s in the smoke run; at the real size one cycle of all 13
// marketplaces takes ~30 s of CPU (bench/results/full-cycle-listings.json), so a 5 s interval keeps
// the machine saturated with re-polls (a minute still did: freshness p50 12 s): two minutes there
// (production: 5 min).
const POLL_LISTINGS_MS = args.size < 10_000 ? 5_000 : 120_000;
const CHANGES_PER_ROUND = args.size >= 10_000 ? 12 : 4;
// At the real size a round waits for the next poll of every marketplace (up to two minutes); two
// rounds, so that one slow moment of the machine is not the whole p99 (one round of 12 made the p99
// a single change, 8 to 43 s from run to run).
const ROUNDS = args.size >= 10_000 ? 2 : 3;
// The materializer's /metrics at API port + this, the API's at + 1 (infra/local/run.ts).
const METRICS_OFFSET = 50;
// A change is seen by the cycle after the next poll: up to an interval, plus the cycle itself
// (tens of seconds at full size on this machine), plus the way to the API.
const VISIBLE_WITHIN_MS = 2 * POLL_LISTINGS_MS + 120_000;
const COLD_ONLY = process.env.BENCH_COLD_ONLY === '1';
// A cold-only result has no freshness: never written over the tracked platform.json by default.
if (COLD_ONLY && !process.argv.includes('--out')) throw new Error('BENCH_COLD_ONLY=1 needs --out FILE');
/** The cold catalogue's deadline (from the services' start-up): beyond it, a lower bound. */
const COLD_WITHIN_MS = 1_200_000;
const DAY_MS = 86_400_000;
/**
 * The simulator starts this long before a UTC midnight, and its clock is moved on to that midnight
 * once the catalogue is cold-visible: the freshness phases run on the day after the cold start's,
 * whose liquidity scores read the cold day's closes (a day's score describes the day before:
 * materializer migration 0020). Measured on the first day, no item would have a score to change.
 */
const ROLLOVER_LEAD_MS = COLD_WITHIN_MS + 600_000;
/** How long the roll-over may take (the new day's first cycles applied, the derive path idle). */
const ROLLOVER_WITHIN_MS = 2 * POLL_LISTINGS_MS + 600_000;

interface Row {
  market_hash_name: string;
  phase: string | null;
  price?: string;
  price_rmb?: string;
}
interface Change {
  market: string;
  name: string;
  phase: string;
  price: string;
  setAt: number;
  round: number;
  producedAt?: number;
  /** When the benchmark first read the new price in the read model's table (polled with the API). */
  committedAt?: number;
  visibleAt?: number;
  /** Not visible by the round's deadline: visibleAt is then the deadline, a lower bound. */
  missed?: boolean;
}
interface Run {
  /** A lower bound when `cold_missing` is not empty (the deadline passed). */
  cold_s: number;
  /**
   * Per listing marketplace, in s from the first upstream request: when its first complete
   * LISTINGS cycle ended, when its marker was applied, when the status first showed it (its fetch started), when it became visible.
   */
  cold_visible_s: Record<
    string,
    { cycle_ended_s: number | null; marker_applied_s: number | null; status_seen_s: number; visible_s: number }
  >;
  /** Listing marketplaces not visible by COLD_WITHIN_MS. */
  cold_missing: string[];
  /** 5xx answers (other than 503) the cold start's requests got: each a defect, asked again. */
  cold_server_errors: string[];
  cold_with_boot_s: number;
  platform_start_s: number;
  visible_rows: number;
  /** CPU seconds per process from the platform's start until the catalogue was visible. */
  cold_cpu_s: Record<string, number>;
  /** The watched metrics (WATCHED) from the platform's start until the catalogue was visible. */
  cold_metrics: Record<string, number>;
  /** The same while the freshness changes were made and awaited. */
  freshness_cpu_s: Record<string, number>;
  /** Per change; a missed change counts with its deadline as a lower bound. */
  freshness_ms: number[];
  /** The same changes split: produce → committed in listings_current, and committed → API-visible. */
  freshness_commit_ms: number[];
  freshness_serve_ms: number[];
  /** Changes not visible within VISIBLE_WITHIN_MS (their figures are lower bounds). */
  freshness_missed: number;
  /** Changes whose listing event was never seen on the topic (no poll → visible figure). */
  freshness_unseen_upstream: number;
  override_to_visible_ms: number[];
  /** Each change's way, in ms from its produce: committed in the table, visible in the API. */
  changes: { market: string; round: number; committed_ms: number | null; visible_ms: number | null; missed: boolean }[];
  /**
   * What the materializer and the API did while the changes were awaited (deltas of their
   * /metrics): batch and derive transactions, list body refreshes by how.
   */
  freshness_metrics: Record<string, number>;
  /**
   * Rows of the six lists' marketplaces observed anew, liquidity rows (inputs) changed and shown
   * liquidity scores changed, meanwhile; and, from the change journal (materializer migration
   * 0019), the served rows of the six lists that changed: `journal_listing_rows` (listing rows
   * whose served values changed), `journal_score_rows` (a changed score counts once per list that
   * shows the item), `price_changes` (the change log's real price or count changes of those
   * marketplaces).
   */
  freshness_churn: Record<string, number>;
  /**
   * From moving the simulator's clock to midnight until every listing marketplace's first complete
   * LISTINGS cycle of the new day was applied, the derive path was idle and the outbox had
   * published the day's changes (every item's price changes at a simulated midnight: ~150k) (s);
   * null in a cold-only run or when it did not settle within ROLLOVER_WITHIN_MS.
   */
  rollover_s: number | null;
  /** Items with a liquidity score as the freshness phase began (what a calm phase could change). */
  scores_at_freshness: number | null;
  /** Served rows changed per real price change meanwhile (journal rows over price_changes). */
  rows_changed_per_price_change: number | null;
  /** Rows the lists' patches read per served row changed (their refresh rows over the journal's). */
  api_rows_read_per_change: number | null;
}

/** `name{labels} value` lines of a Prometheus text answer whose name starts with one of `prefixes`. */
async function scrape(url: string, prefixes: readonly string[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const res = await fetch(url).catch(() => undefined);
  if (!res?.ok) return out;
  for (const line of (await res.text()).split('\n')) {
    if (line.startsWith('#') || !prefixes.some((p) => line.startsWith(p))) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

const WATCHED = [
  'materializer_batch_apply_duration_seconds_sum',
  'materializer_batch_apply_duration_seconds_count',
  // Where a listing record's time before its commit goes: waiting for its batch, or the apply.
  'materializer_batch_wait_seconds_sum{topic="listings',
  'materializer_batch_wait_seconds_count{topic="listings',
  'materializer_batch_wait_seconds_bucket{le="1",topic="listings',
  'materializer_batch_wait_seconds_bucket{le="2",topic="listings',
  'materializer_batch_wait_seconds_bucket{le="5",topic="listings',
  'materializer_derive_duration_seconds_sum',
  'materializer_derive_duration_seconds_count',
  'api_list_body_refresh_seconds_sum',
  'api_list_body_refresh_seconds_count',
  'api_list_body_refresh_seconds_bucket{le="1"',
  'api_list_body_refresh_rows_sum',
  'api_list_body_patched_rows',
];

/** A phase with at least this many real price changes in the six lists held one of the simulator's bursts. */
const BURST_CHANGES = 5_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * fetch, once more when the connection was reset: with lists fetched at once, a request can go
 * out on a kept-alive connection the server is closing for idleness (seen: ECONNRESET). A second
 * failure is real.
 */
async function fetchRetried(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch {
    return fetch(url, init);
  }
}
const kafka = createKafka({ brokers, clientId: 'bench-platform' });
const serde = new EventSerde({ registryUrl });

async function platformRun(run: number): Promise<Run> {
  const tag = `bench_platform_${Date.now().toString(36)}`;
  const suffix = `.${tag}`;
  const port = 21_000 + run * 100;
  const api = `http://127.0.0.1:${port}`;
  const metricsUrls = [0, 1].map((i) => `http://127.0.0.1:${port + METRICS_OFFSET + i}/metrics`);
  const metricsNow = async () => {
    const all = new Map<string, number>();
    for (const url of metricsUrls) for (const [k, v] of await scrape(url, WATCHED)) all.set(k, v);
    return all;
  };
  const control = `http://127.0.0.1:${port + 1}`;
  const simStart = Math.floor((Date.now() + ROLLOVER_LEAD_MS) / DAY_MS + 1) * DAY_MS - ROLLOVER_LEAD_MS;
  const keysFile = join(mkdtempSync(join(tmpdir(), 'bench-platform-')), 'keys.json');
  const env: Record<string, string> = {
    TOPIC_SUFFIX: suffix,
    DATABASE_SCHEMA: tag,
    KEYS_SCHEMA: `${tag}_keys`,
    WEBHOOKS_SCHEMA: `${tag}_webhooks`,
    API_PORT: String(port),
    SIM_CONTROL_PORT: String(port + 1),
    SIM_BASE_PORT: String(port + 2),
    DEMO_KEYS_FILE: keysFile,
    RUN_CATALOGUE_SIZE: String(args.size),
    POLL_LISTINGS_MS: String(POLL_LISTINGS_MS),
    METRICS_PORT_OFFSET: String(METRICS_OFFSET),
    // The cold catalogue is the first prices, not the warm demo's 400 days of history: at 35,000
    // names that import is 180 million closes (and the history-only marketplace's 400 days 14
    // million), which would compete with what is measured. 30 days, as before the warm demo.
    RUN_WARM: 'false',
    HISTORY_BACKFILL_DAYS: process.env.BENCH_HISTORY_DAYS ?? '30',
    SIM_START: new Date(simStart).toISOString(),
  };
  // Every service writes its own profile (Node refuses --cpu-prof in NODE_OPTIONS: the supervisor
  // passes it on each service's command line).
  if (args.profileDir) env.SERVICE_CPU_PROF_DIR = args.profileDir;
  const spawned = performance.now();
  const logFile = process.env.BENCH_PLATFORM_LOG;
  const log = logFile ? openSync(logFile, 'a') : 'ignore';
  const platform: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'infra/local/run.ts'], {
    env: { ...process.env, ...env },
    stdio: ['ignore', log, 'inherit'],
  });
  if (typeof log === 'number') closeSync(log); // the child holds its own copy
  const exited = new Promise<void>((resolve) => platform.once('exit', () => resolve()));
  const cpuAtStart = cpuSeconds(platform.pid as number);
  process.on('exit', () => platform.kill('SIGINT'));
  try {
    await waitForUrl(`${control}/healthz`, 300_000, 50);
    // The simulator's clock runs ahead of (or behind) the wall clock by this much (SIM_START).
    const simOffset = ((await (await fetch(`${control}/_sim/clock`)).json()) as { now: number }).now - Date.now();
    const t0 = performance.now();
    await waitForUrl(`${api}/openapi.json`, 300_000, 50);
    const secret = await benchKey(databaseUrl, `${tag}_keys`);
    const headers = { 'x-api-key': secret };
    // The API reads a new key when its NOTIFY arrives, or when its listener is up (it starts as
    // the HTTP port opens): a key created in that moment can be refused for up to its 5 s reload.
    const keyIssued = Date.now();
    const getJson = async <T>(path: string): Promise<T | undefined> => {
      const res = await fetch(`${api}${path}`, { headers });
      if (res.status === 200) return (await res.json()) as T;
      if (res.status === 401 && Date.now() - keyIssued < 10_000) {
        await res.arrayBuffer();
        await sleep(200);
        return undefined;
      }
      // A server error is a defect the result must show, not a crash that loses the run: counted
      // (cold_server_errors) and asked again.
      if (res.status >= 500 && res.status !== 503) {
        const text = await res.text();
        serverErrors.push(`GET ${path}: ${res.status} ${text.slice(0, 200)}`);
        console.log(`run ${run + 1}: ${serverErrors.at(-1)}`);
        return undefined;
      }
      // 503: no read model yet. Anything else means the benchmark is measuring the wrong thing.
      if (res.status !== 503) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
      await res.arrayBuffer();
      return undefined;
    };
    const serverErrors: string[] = [];

    // ---- cold: every listing marketplace complete and listed --------------------------------------
    const lists = new Map<string, Row[]>();
    /** When each marketplace became visible (performance.now()): the cold start's tail. */
    const seenAt = new Map<string, number>();
    /**
     * Its first complete LISTINGS cycle as /v1/status first showed it (polled every ~100 ms plus
     * the list fetches): when the cycle ended (the upstream's clock: the simulator's runs on the
     * wall clock here) and when the derive path applied its marker (wall clock); with seenAt,
     * where the tail of the cold start is spent.
     */
    const markerAt = new Map<string, { ended: number; applied: number }>();
    /** When /v1/status first showed each marketplace complete (performance.now()): its fetch starts. */
    const askedAt = new Map<string, number>();
    const coldMissing: string[] = [];
    /** Fetches under way, per marketplace (one at a time each). */
    const fetching = new Map<string, Promise<void>>();
    let fetchFailed: unknown;
    /** Set when the loop ends: an answer still on its way then counts no more. */
    let coldOver = false;
    const fetchList = async (m: string): Promise<Row[] | undefined> => {
      try {
        // USD-1..6 have no list endpoint (spec 4.1): they show in the catalogue (4.3); the store
        // has its own (4.7).
        if ((LIST_MARKETS as readonly string[]).includes(m) || m === 'store')
          return (await getJson<{ data: Row[] }>(m === 'store' ? '/v1/store' : `/v1/prices/${m}`))?.data;
        const body = await getJson<{ items: Record<string, Record<string, Row>> }>(`/v1/prices/latest?markets=${m}`);
        return Object.entries(body?.items ?? {})
          .filter(([, byMarket]) => byMarket[m])
          .map(([name, byMarket]) => ({ ...(byMarket[m] as Row), market_hash_name: name }));
      } catch (err) {
        fetchFailed ??= err;
        return undefined;
      }
    };
    for (;;) {
      const status = await getJson<{
        markets: { market: string; kind: string; last_complete_at: string | null; last_applied_at: string | null }[];
      }>('/v1/status');
      const complete = new Set(
        (status?.markets ?? []).filter((m) => m.kind === 'LISTINGS' && m.last_complete_at).map((m) => m.market),
      );
      // The first complete cycle, as first seen (a later status would show a later cycle).
      for (const r of status?.markets ?? [])
        if (r.kind === 'LISTINGS' && r.last_complete_at && r.last_applied_at && !markerAt.has(r.market))
          markerAt.set(r.market, { ended: Date.parse(r.last_complete_at), applied: Date.parse(r.last_applied_at) });
      // Each marketplace is asked for as soon as the status says it is complete, as its own
      // customer would, beside the others still being fetched: fetched one after another, every
      // list found complete in the same status counted as visible when the last of them had been
      // built (2026-11-27: five marketplaces applied at 71.8 s all "visible" at 109.8 s).
      for (const m of LISTING_MARKETS)
        if (complete.has(m) && !lists.has(m) && !fetching.has(m)) {
          if (!askedAt.has(m)) askedAt.set(m, performance.now());
          fetching.set(
            m,
            fetchList(m)
              .then((rows) => {
                if (rows && rows.length > 0 && !lists.has(m) && !coldOver) {
                  lists.set(m, rows);
                  seenAt.set(m, performance.now());
                }
              })
              .finally(() => fetching.delete(m)),
          );
        }
      if (fetchFailed) throw fetchFailed;
      if (lists.size === LISTING_MARKETS.length) break;
      if (platform.exitCode !== null) throw new Error('the platform exited during the cold start');
      // A slower machine gives a figure, not a crash: the deadline as a lower bound, and which
      // marketplaces were not visible by then (freshness is then measured on the lists there are).
      if (performance.now() - t0 > COLD_WITHIN_MS) {
        coldMissing.push(...LISTING_MARKETS.filter((m) => !lists.has(m)));
        console.log(`run ${run + 1}: not visible after ${COLD_WITHIN_MS / 1000} s: ${coldMissing.join(', ')}`);
        break;
      }
      await sleep(100);
    }
    coldOver = true;
    const visible = performance.now();
    const coldCpu = cpuDelta(cpuAtStart, cpuSeconds(platform.pid as number));
    console.log(`run ${run + 1}: CPU seconds per process until visible: ${JSON.stringify(coldCpu)}`);
    // The watched metrics from the start until visible: how many batches the listings came in.
    const coldMetrics = Object.fromEntries([...(await metricsNow())].map(([k, v]) => [k, round(v, 3)]));
    console.log(`run ${run + 1}: metrics until visible: ${JSON.stringify(coldMetrics)}`);
    const traffic = (await (await fetch(`${control}/_sim/traffic`)).json()) as Record<string, { first_at: number }>;
    // first_at is wall-clock time: translate it onto this process's monotonic clock.
    const firstRequest = Math.min(...Object.values(traffic).map((t) => t.first_at)) - Date.now() + performance.now();
    const visibleRows = [...lists.values()].reduce((n, l) => n + l.length, 0);
    console.log(
      `run ${run + 1}: cold ${((visible - firstRequest) / 1000).toFixed(1)} s from the first upstream request, ` +
        `${((visible - t0) / 1000).toFixed(1)} s with the services' start-up (${visibleRows} rows on ${lists.size} marketplaces)`,
    );
    const firstRequestWall = Math.min(...Object.values(traffic).map((t) => t.first_at));
    const coldMarkers = Object.fromEntries(
      [...seenAt].map(([m, at]) => {
        const marker = markerAt.get(m);
        return [
          m,
          {
            cycle_ended_s: marker ? round((marker.ended - simOffset - firstRequestWall) / 1000, 1) : null,
            marker_applied_s: marker ? round((marker.applied - firstRequestWall) / 1000, 1) : null,
            status_seen_s: round(((askedAt.get(m) as number) - firstRequest) / 1000, 1),
            visible_s: round((at - firstRequest) / 1000, 1),
          },
        ];
      }),
    );
    console.log(
      `run ${run + 1}: first LISTINGS cycle ended / applied / seen in the status / visible (s): ${Object.entries(
        coldMarkers,
      )
        .map(([m, t]) => `${m} ${t.cycle_ended_s} / ${t.marker_applied_s} / ${t.status_seen_s} / ${t.visible_s}`)
        .join(', ')}`,
    );

    const cold = {
      cold_s: round((visible - firstRequest) / 1000, 2),
      cold_missing: coldMissing,
      cold_server_errors: serverErrors,
      cold_visible_s: coldMarkers,
      cold_with_boot_s: round((visible - t0) / 1000, 2),
      platform_start_s: round((t0 - spawned) / 1000, 2),
      visible_rows: visibleRows,
      cold_cpu_s: coldCpu,
      cold_metrics: coldMetrics,
    };
    if (COLD_ONLY)
      return {
        ...cold,
        freshness_cpu_s: {},
        freshness_ms: [],
        freshness_commit_ms: [],
        freshness_serve_ms: [],
        freshness_missed: 0,
        freshness_unseen_upstream: 0,
        override_to_visible_ms: [],
        changes: [],
        freshness_metrics: {},
        freshness_churn: {},
        rollover_s: null,
        scores_at_freshness: null,
        rows_changed_per_price_change: null,
        api_rows_read_per_change: null,
      };

    // ---- the day's roll-over: freshness is measured on the next day ----------------------------
    const db = createPool({ databaseUrl, max: 1 });
    const midnight = simStart + ROLLOVER_LEAD_MS;
    const simNow = ((await (await fetch(`${control}/_sim/clock`)).json()) as { now: number }).now;
    if (simNow < midnight)
      await fetch(`${control}/_sim/clock`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ advanceMs: midnight + 1_000 - simNow }),
      });
    const jumped = performance.now();
    const dayOffset = ((await (await fetch(`${control}/_sim/clock`)).json()) as { now: number }).now - Date.now();
    let rolloverS: number | null = null;
    let scoresAtFreshness = 0;
    for (;;) {
      const { rows } = await db.query<{ markets: number; queued: number; scores: number }>(
        `SELECT (SELECT count(DISTINCT market)::int FROM ${tag}.poll_cycles
                 WHERE kind = 'LISTINGS' AND outcome = 'COMPLETE' AND started_at >= $1 AND applied_at IS NOT NULL
                   AND market = ANY($2)) AS markets,
                (SELECT count(*)::int FROM ${tag}.derive_pending) + (SELECT count(*)::int FROM ${tag}.judge_pending)
                  + (SELECT count(*)::int FROM ${tag}.price_change_outbox) AS queued,
                (SELECT count(*)::int FROM ${tag}.item_liquidity_score WHERE score IS NOT NULL) AS scores`,
        [new Date(midnight), LISTING_MARKETS],
      );
      const r = rows[0] as { markets: number; queued: number; scores: number };
      scoresAtFreshness = r.scores;
      if (r.markets === LISTING_MARKETS.length && r.queued === 0) {
        rolloverS = round((performance.now() - jumped) / 1000, 1);
        break;
      }
      if (performance.now() - jumped > ROLLOVER_WITHIN_MS) {
        console.log(`run ${run + 1}: the roll-over had not settled after ${ROLLOVER_WITHIN_MS / 1000} s`);
        break;
      }
      await sleep(500);
    }
    console.log(`run ${run + 1}: roll-over to the next day settled in ${rolloverS} s, ${scoresAtFreshness} scores`);
    // The lists read, as their customers would right after the roll-over, until the API's patches
    // of them come to rest: it patches in the roll-over's changes (every row's statistics and
    // score) now, not in the measured phase. A body is patched when it is asked for, behind the
    // answer that asked (one read of each list left 73,810 changed rows to the phase).
    const patchedRows = async () => {
      const m = await metricsNow();
      return (
        (m.get('api_list_body_refresh_rows_sum{how="patch"}') ?? 0) +
        (m.get('api_list_body_refresh_rows_sum{how="first"}') ?? 0)
      );
    };
    const restFrom = performance.now();
    for (let before = -1; ;) {
      for (const m of LIST_MARKETS) await getJson(`/v1/prices/${m}`);
      await sleep(2_000);
      const now = await patchedRows();
      if (now === before || performance.now() - restFrom > 120_000) break;
      before = now;
    }
    console.log(
      `run ${run + 1}: lists at rest after the roll-over in ${((performance.now() - restFrom) / 1000).toFixed(1)} s`,
    );

    // ---- freshness: single changes in the steady state ---------------------------------------
    const consumer = kafka.consumer({ groupId: `${tag}-watch` });
    await consumer.connect();
    await consumer.subscribe({ topic: `listings.v1${suffix}`, fromBeginning: false });
    const codec = await serde.codec(`listings.v1${suffix}`, 'listing');
    const pending = new Map<string, Change>();
    const joined = new Promise<void>((resolve) => consumer.on(consumer.events.GROUP_JOIN, () => resolve()));
    await consumer.run({
      eachMessage: async ({ message }) => {
        const change = pending.get(message.key?.toString() ?? '');
        if (!change || change.producedAt !== undefined || !message.value) return;
        const e = await codec.decode(message.value);
        if (e.price === change.price) change.producedAt = Number(message.timestamp);
      },
    });
    await joined;
    await sleep(2_000); // the group's first fetch position is "latest" as of its first fetch

    const changes: Change[] = [];
    const cpuAtFreshness = cpuSeconds(platform.pid as number);
    const freshnessStart = new Date();
    // The journal's head as the phase starts: its changes are those after it (positions, not the
    // transactions' start times).
    const { rows: startRows } = await db.query<{ pos: string }>(
      `SELECT coalesce(max(pos), 0) AS pos FROM ${tag}.read_changes`,
    );
    const startPos = startRows[0]?.pos ?? '0';
    const metricsAtFreshness = await metricsNow();
    for (let round = 0; round < ROUNDS; round++) {
      const batch: Change[] = [];
      for (let i = 0; i < CHANGES_PER_ROUND; i++) {
        const listed = LIST_MARKETS.filter((m) => lists.has(m));
        const market = listed[(round * CHANGES_PER_ROUND + i) % listed.length] as string;
        const rows = lists.get(market) as Row[];
        const row = rows[Math.floor(Math.random() * rows.length)] as Row;
        const phase = row.phase ?? '';
        // A price no simulated walk produces: 7 in the cents, and a per-change whole part.
        const price = `${90_000 + round * 100 + i}.77`;
        const key = itemKey(market, row.market_hash_name, phase);
        if (pending.has(key) || batch.some((c) => c.market === market && c.name === row.market_hash_name)) continue;
        const change: Change = { market, name: row.market_hash_name, phase, price, setAt: 0, round };
        pending.set(key, change);
        batch.push(change);
      }
      for (const c of batch) {
        const res = await fetch(`${control}/_sim/override`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            market: c.market,
            market_hash_name: c.name,
            phase: c.phase,
            price: c.price,
            count: 1,
          }),
        });
        if (!res.ok) throw new Error(`override ${c.market} ${c.name}: ${res.status} ${await res.text()}`);
        c.setAt = Date.now();
      }
      // Poll each affected list (ETag: a 304 costs nothing) until every change shows.
      const etags = new Map<string, string>();
      const deadline = Date.now() + VISIBLE_WITHIN_MS;
      // Where the time goes: the moment the materializer's commit holds the price (a key lookup),
      // looked for every 50 ms on its own, not between the lists' fetches: a list that took the API
      // seconds to answer held the look back as long, and counted that wait as the ingest's.
      const watchCommits = (async () => {
        while (Date.now() <= deadline && batch.some((x) => x.committedAt === undefined && x.visibleAt === undefined)) {
          // Only changes not yet seen in their list: one seen there was committed before that.
          for (const c of batch.filter((x) => x.committedAt === undefined && x.visibleAt === undefined)) {
            const { rows } = await db.query<{ price: string | null }>(
              `SELECT price::text AS price FROM ${tag}.listings_current WHERE market = $1 AND market_hash_name = $2 AND phase = $3`,
              [c.market, c.name, c.phase],
            );
            // Seen in its list while this look was on its way: committed no later than that.
            if (rows[0]?.price === c.price) c.committedAt = Math.min(Date.now(), c.visibleAt ?? Infinity);
          }
          await sleep(50);
        }
      })();
      // Awaited after the lists' loop; a failed look must not be an unhandled rejection meanwhile.
      watchCommits.catch(() => undefined);
      while (batch.some((c) => c.visibleAt === undefined)) {
        // A slower machine must give a figure, not a crash: the deadline is recorded as a lower
        // bound and the change counted as missed.
        if (Date.now() > deadline) {
          for (const c of batch.filter((x) => x.visibleAt === undefined)) {
            c.visibleAt = deadline;
            c.missed = true;
          }
          console.log(
            `run ${run + 1}, round ${round + 1}: ${batch.filter((c) => c.missed).length} changes missed the ${VISIBLE_WITHIN_MS / 1000} s deadline`,
          );
          break;
        }
        // The lists at once: a large list parsed here must not delay the look at another.
        const awaited = new Set(batch.filter((c) => c.visibleAt === undefined).map((c) => c.market));
        await Promise.all(
          [...awaited].map(async (market) => {
            const res = await fetchRetried(`${api}/v1/prices/${market}`, {
              headers: { ...headers, ...(etags.has(market) ? { 'if-none-match': etags.get(market) as string } : {}) },
            });
            const now = Date.now();
            if (res.status === 304) return;
            etags.set(market, res.headers.get('etag') ?? '');
            const body = (await res.json()) as { data: Row[] };
            for (const c of batch.filter((x) => x.market === market && x.visibleAt === undefined)) {
              const r = body.data.find((x) => x.market_hash_name === c.name && (x.phase ?? '') === c.phase);
              if ((r?.price ?? r?.price_rmb) === c.price) c.visibleAt = now;
            }
          }),
        );
        await sleep(50);
      }
      await watchCommits;
      // Seen in the list before the look found it in the table (the look is every 50 ms): it was
      // committed by then.
      for (const c of batch) if (c.committedAt === undefined && !c.missed) c.committedAt = c.visibleAt;
      changes.push(...batch);
    }
    // What the lists' patches had to follow: listing rows observed anew and liquidity scores that
    // changed while the changes were awaited (each of the latter changes the item's row in every
    // list), against the lists' sizes; and the liquidity rows whose inputs changed (before
    // migration 0013 each of those, too, changed the item's row in every list).
    const { rows: churnRows } = await db.query<{
      listed: string;
      observed: string;
      liquidity: string;
      liquidity_score: string;
    }>(
      `SELECT (SELECT count(*) FROM ${tag}.listings_current WHERE market = ANY($1) AND price IS NOT NULL) AS listed,
              (SELECT count(*) FROM ${tag}.listings_current WHERE market = ANY($1) AND observed_at >= $5) AS observed,
              (SELECT count(*) FROM ${tag}.item_liquidity WHERE as_of >= $5) AS liquidity,
              (SELECT count(*) FROM ${tag}.item_liquidity_score WHERE as_of >= $5) AS liquidity_score,
              (SELECT count(*) FROM ${tag}.read_changes r, unnest(r.names) n
               WHERE r.pos > $4 AND r.tag = ANY($3)) AS journal_listing_rows,
              (SELECT count(*) FROM ${tag}.read_changes r, unnest(r.names, r.phases) k(name, phase)
               JOIN ${tag}.listings_current c ON c.market_hash_name = k.name AND c.phase = k.phase
                AND c.market = ANY($1) AND c.price IS NOT NULL
               WHERE r.pos > $4 AND r.tag = 'scores') AS journal_score_rows,
              (SELECT count(*) FROM ${tag}.price_change_log WHERE logged_at >= $2 AND market = ANY($1)) AS price_changes`,
      [
        LIST_MARKETS,
        freshnessStart,
        LIST_MARKETS.map((m) => `listing:${m}`),
        startPos,
        // observed_at and as_of are the simulator's time.
        new Date(freshnessStart.getTime() + dayOffset),
      ],
    );
    const churn = Object.fromEntries(Object.entries(churnRows[0] ?? {}).map(([k, v]) => [k, Number(v)]));
    const servedChanged = (churn.journal_listing_rows ?? 0) + (churn.journal_score_rows ?? 0);
    console.log(`run ${run + 1}: rows changed while freshness was measured: ${JSON.stringify(churn)}`);
    await consumer.disconnect();
    await db.end();
    const freshnessCpu = cpuDelta(cpuAtFreshness, cpuSeconds(platform.pid as number));
    const metricsAfter = await metricsNow();
    const freshnessMetrics = Object.fromEntries(
      [...metricsAfter].map(([k, v]) => [k, round(v - (metricsAtFreshness.get(k) ?? 0), 3)]),
    );
    console.log(`run ${run + 1}: metrics while measuring freshness: ${JSON.stringify(freshnessMetrics)}`);
    console.log(`run ${run + 1}: CPU seconds per process while measuring freshness: ${JSON.stringify(freshnessCpu)}`);
    // A change the pollers produced only after its round's deadline (a poll cycle slower than the
    // deadline) was never on its way to the API within the round: not a freshness figure (it
    // gave negative ones), counted with the unseen.
    const unmatched = changes.filter((c) => c.producedAt === undefined || c.producedAt > (c.visibleAt as number));
    if (unmatched.length > 0) console.log(`run ${run + 1}: no listing event seen for ${JSON.stringify(unmatched)}`);
    const timed = changes.filter((c) => !unmatched.includes(c));
    return {
      ...cold,
      freshness_cpu_s: freshnessCpu,
      freshness_ms: timed.map((c) => (c.visibleAt as number) - (c.producedAt as number)),
      // A change seen in its list before the look found it in the table counts 0 there (the look
      // runs every 50 ms, so at most that much of the serve time is counted as the commit's).
      freshness_commit_ms: timed
        .filter((c) => c.committedAt !== undefined)
        .map((c) => (c.committedAt as number) - (c.producedAt as number)),
      freshness_serve_ms: timed
        .filter((c) => c.committedAt !== undefined)
        .map((c) => (c.visibleAt as number) - (c.committedAt as number)),
      freshness_missed: changes.filter((c) => c.missed).length,
      freshness_unseen_upstream: unmatched.length,
      override_to_visible_ms: changes.map((c) => (c.visibleAt as number) - c.setAt),
      changes: timed.map((c) => ({
        market: c.market,
        round: c.round,
        committed_ms: c.committedAt === undefined ? null : (c.committedAt as number) - (c.producedAt as number),
        visible_ms: (c.visibleAt as number) - (c.producedAt as number),
        missed: c.missed === true,
      })),
      freshness_metrics: freshnessMetrics,
      freshness_churn: churn,
      rollover_s: rolloverS,
      scores_at_freshness: scoresAtFreshness,
      rows_changed_per_price_change: churn.price_changes ? round(servedChanged / churn.price_changes, 2) : null,
      api_rows_read_per_change: servedChanged
        ? round((freshnessMetrics['api_list_body_refresh_rows_sum{how="patch"}'] ?? 0) / servedChanged, 3)
        : null,
    };
  } finally {
    platform.kill('SIGINT');
    await exited;
    rmSync(keysFile, { force: true });
    await deleteTopics(
      kafka,
      topicDefinitions().map((t) => `${t.name}${suffix}`),
    );
    for (const t of topicDefinitions()) await serde.deleteSubject(`${t.name}${suffix}-value`).catch(() => undefined);
    const admin = createPool({ databaseUrl, max: 1 });
    await admin.query(
      `DROP SCHEMA IF EXISTS ${tag} CASCADE; DROP SCHEMA IF EXISTS ${tag}_keys CASCADE; DROP SCHEMA IF EXISTS ${tag}_webhooks CASCADE`,
    );
    await admin.end();
  }
}

/** Median over runs of a split's p99, in seconds; null when no change was caught in the table. */
const splitP99 = (perRun: number[][]): number | null => {
  const p = perRun.filter((xs) => xs.length > 0).map((xs) => percentile(xs, 99) / 1000);
  return p.length > 0 ? round(median(p)) : null;
};

const runs: Run[] = [];
for (let run = 0; run < args.runs; run++) {
  const r = await platformRun(run);
  runs.push(r);
  if (COLD_ONLY) continue;
  console.log(
    `run ${run + 1}: freshness p50 ${percentile(r.freshness_ms, 50)} ms, p99 ${percentile(r.freshness_ms, 99)} ms ` +
      `(produce → committed p99 ${splitP99([r.freshness_commit_ms])} s, committed → visible p99 ${splitP99([r.freshness_serve_ms])} s); ` +
      `override → visible p50 ${percentile(r.override_to_visible_ms, 50)} ms`,
  );
}

await writeResult(args.out, {
  what: 'make run at full size: cold catalogue to API-visible; single price changes from the poll that sees them to GET /v1/prices/{market}',
  machine:
    '2 cores; Kafka, registry, PostgreSQL, simulator, 14 pollers, materializer, API and the benchmark on one machine',
  catalogue_names: args.size,
  listing_marketplaces: LISTING_MARKETS.length,
  poll_listings_ms: POLL_LISTINGS_MS,
  runs,
  cold_catalogue_s: median(runs.map((r) => r.cold_s)),
  cold_missed: runs.filter((r) => r.cold_missing.length > 0).length,
  cold_with_boot_s: median(runs.map((r) => r.cold_with_boot_s)),
  ...(COLD_ONLY ? { cold_only: true } : freshnessFigures()),
});
process.exit(0);

/** The freshness medians over the runs (none in a cold-only run). */
function freshnessFigures() {
  const burst = (r: Run) => (r.freshness_churn.price_changes ?? 0) >= BURST_CHANGES;
  const p99Of = (rs: Run[]) =>
    rs.length > 0 ? round(median(rs.map((r) => percentile(r.freshness_ms, 99) / 1000))) : null;
  const ratios = (xs: (number | null)[]) => xs.filter((x): x is number => x !== null);
  const calmRatios = ratios(runs.filter((r) => !burst(r)).map((r) => r.rows_changed_per_price_change));
  const apiRatios = ratios(runs.map((r) => r.api_rows_read_per_change));
  return {
    freshness_p50_s: round(median(runs.map((r) => percentile(r.freshness_ms, 50) / 1000))),
    freshness_p99_s: round(median(runs.map((r) => percentile(r.freshness_ms, 99) / 1000))),
    // Apart: phases that held a simulator burst (BURST_CHANGES real changes or more) and calm ones.
    freshness_calm_p99_s: p99Of(runs.filter((r) => !burst(r))),
    freshness_burst_p99_s: p99Of(runs.filter(burst)),
    freshness_burst_runs: runs.filter(burst).length,
    calm_rows_changed_per_price_change: calmRatios.length > 0 ? round(median(calmRatios), 2) : null,
    api_rows_read_per_change: apiRatios.length > 0 ? round(median(apiRatios), 3) : null,
    scores_at_freshness: median(runs.map((r) => r.scores_at_freshness ?? 0)),
    rollover_s: ratios(runs.map((r) => r.rollover_s)).length > 0 ? median(ratios(runs.map((r) => r.rollover_s))) : null,
    freshness_commit_p99_s: splitP99(runs.map((r) => r.freshness_commit_ms)),
    freshness_serve_p99_s: splitP99(runs.map((r) => r.freshness_serve_ms)),
    freshness_missed: runs.reduce((n, r) => n + r.freshness_missed, 0),
    freshness_unseen_upstream: runs.reduce((n, r) => n + r.freshness_unseen_upstream, 0),
    override_to_visible_p50_s: round(median(runs.map((r) => percentile(r.override_to_visible_ms, 50) / 1000))),
    override_to_visible_p99_s: round(median(runs.map((r) => percentile(r.override_to_visible_ms, 99) / 1000))),
  };
}

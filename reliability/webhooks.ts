/**
 * Webhooks under faults: the notifier (as deployed, a process) delivers price changes to four
 * receivers while one is down and then answers 500 and 429 with Retry-After, one hangs past the
 * delivery timeout, and the notifier itself is SIGKILLed mid-delivery and restarted; some changes
 * are published twice, as the outbox's at-least-once does after a crash. Every receiver checks
 * signatures with the third-party `standardwebhooks` package.
 *
 * Invariants: every change that matches a subscription is accepted by its receiver at least once;
 * nothing that does not match is delivered; each webhook-id maps to one change (and one change of
 * one subscription to one id, republished or not); no signature fails; the healthy subscription's
 * commit-to-delivery p99 stays ≤ 2 s while the others fail; a 429's Retry-After is honoured (the
 * same message comes again after it, not after the backoff's own delay).
 * The filter oracle here is written independently of packages/webhooks (decimal.js, no floats).
 *
 *   node --import tsx reliability/webhooks.ts [--smoke] [--seed n] [--out file]
 */
import type { ChildProcess } from 'node:child_process';
import { Decimal } from 'decimal.js';
import { TestStack } from '../test/support/stack.js';
import { freePort } from '../test/support/services.js';
import {
  chaosArgs,
  message,
  onAbort,
  Rng,
  runTopics,
  sleep,
  startService,
  within,
  writeScenario,
} from './support/harness.js';
import {
  change,
  hookWorld,
  keyOf,
  notifierEnv,
  notifierRunning,
  produceChanges,
  Receiver,
  subscribe,
  type HookWorld,
  type PriceChange,
} from './support/webhooks.js';

const args = chaosArgs('webhooks');
const rng = new Rng(args.seed);
const N_CHANGES = args.smoke ? 240 : 2_400;
const KILLS = args.smoke ? 2 : 8;
const DOWN_MS = args.smoke ? 5_000 : 20_000;
const HANG_MS = args.smoke ? 6_000 : 30_000;
const SETTLE_MS = args.smoke ? 90_000 : 240_000;
const MARKETS = ['cn-a', 'eu-a', 'usd-1'];
const RETRY_AFTER_S = 7;

interface Sub {
  name: string;
  filters: Record<string, unknown>;
  receiver: Receiver;
  id: string;
  wants: (c: PriceChange) => boolean;
}

const dec = (s: string | null) => (s === null ? null : new Decimal(s));
const priceMoved = (c: PriceChange) => !(dec(c.old_price)?.eq(dec(c.new_price) ?? -1) ?? c.new_price === null);
const relativePct = (c: PriceChange) => {
  const o = dec(c.old_price);
  const n = dec(c.new_price);
  return o === null || n === null ? new Decimal(100) : n.minus(o).abs().div(o).times(100);
};
const crossesDown = (c: PriceChange, p: string) => {
  const n = dec(c.new_price);
  const o = dec(c.old_price);
  return n !== null && n.lte(p) && (o === null || o.gt(p));
};

/** Changes of 60 items over three marketplaces: moves of ±0–20 %, appearances, vanishings, count-only. */
function changes(n: number, t0: number): PriceChange[] {
  const out: PriceChange[] = [];
  for (let i = 0; i < n; i++) {
    const market = MARKETS[rng.int(0, MARKETS.length - 1)] as string;
    const name = `Chaos Hook Item ${rng.int(1, 60)}`;
    const old = new Decimal(rng.int(50, 20_000)).div(100);
    const roll = rng.next();
    const next =
      roll < 0.05 ? null : roll < 0.15 ? old : old.times(new Decimal(rng.int(80, 120)).div(100)).toDecimalPlaces(2);
    const from = roll > 0.95 ? null : old.toFixed(2);
    out.push(change(market, name, from, next === null ? null : next.toFixed(2), t0 + i));
  }
  return out;
}

/**
 * Behaviours: flaky is down first, then 500 twice, 429 with Retry-After: 7 twice, then fine. A
 * Retry-After pauses the whole subscription, so after each 429 nothing may reach flaky for 7 s
 * (but requests already under way when it answered), and the throttled message comes again no
 * sooner; the backoff alone would retry these attempts after 2.5 to 10 s, and the others at once.
 */
async function receivers(): Promise<Record<'good' | 'flaky' | 'slow' | 'narrow', Receiver>> {
  const flaky = new Receiver((n) =>
    n < 2
      ? { kind: 'status', status: 500 }
      : n < 4
        ? { kind: 'status', status: 429, retryAfterS: RETRY_AFTER_S }
        : { kind: 'ok' },
  );
  const slowUntil = Date.now() + HANG_MS;
  // Hangs for HANG_MS, and on until the last kill, so that every kill meets deliveries in flight.
  const slow = new Receiver(() => (slowHangs || Date.now() < slowUntil ? { kind: 'hang' } : { kind: 'ok' }));
  const r = { good: new Receiver(), flaky, slow, narrow: new Receiver() };
  for (const x of Object.values(r)) await x.start();
  return r;
}

async function subscriptions(world: HookWorld, r: Awaited<ReturnType<typeof receivers>>): Promise<Sub[]> {
  const defs: Omit<Sub, 'id'>[] = [
    { name: 'good', filters: {}, receiver: r.good, wants: priceMoved },
    {
      name: 'flaky',
      filters: { markets: ['cn-a', 'eu-a'], min_change_pct: '5' },
      receiver: r.flaky,
      wants: (c) => priceMoved(c) && ['cn-a', 'eu-a'].includes(c.market) && relativePct(c).gte(5),
    },
    {
      name: 'slow',
      filters: { markets: ['usd-1'] },
      receiver: r.slow,
      wants: (c) => priceMoved(c) && c.market === 'usd-1',
    },
    {
      name: 'narrow',
      filters: { crosses: { price: '50', direction: 'down' } },
      receiver: r.narrow,
      wants: (c) => priceMoved(c) && crossesDown(c, '50'),
    },
  ];
  const out: Sub[] = [];
  for (const d of defs) {
    const { id, secret } = await subscribe(world, d.receiver.url, d.filters);
    d.receiver.addSecret(secret);
    out.push({ ...d, id });
  }
  return out;
}

/** Webhook-ids that map to more than one change set, and (sub, change) pairs with more than one id. */
function idChecks(subs: Sub[]) {
  const idToChanges = new Map<string, string>();
  let idConflicts = 0;
  let pairsWithManyIds = 0;
  for (const s of subs) {
    const idsOfChange = new Map<string, Set<string>>();
    for (const a of s.receiver.arrivals) {
      const set = a.changes.join(',');
      const seen = idToChanges.get(a.id);
      if (seen !== undefined && seen !== `${s.name}:${set}`) idConflicts++;
      idToChanges.set(a.id, `${s.name}:${set}`);
      for (const k of a.changes) idsOfChange.set(k, (idsOfChange.get(k) ?? new Set()).add(a.id));
    }
    for (const ids of idsOfChange.values()) if (ids.size > 1) pairsWithManyIds++;
  }
  return { idConflicts, pairsWithManyIds };
}

/** Pairs expected and not accepted; accepted and not expected. */
function coverage(subs: Sub[], sent: PriceChange[]) {
  const per: Record<string, { expected: number; lost: number; unmatched: number; accepted: number }> = {};
  for (const s of subs) {
    const expected = new Set(sent.filter(s.wants).map(keyOf));
    const accepted = new Set(s.receiver.accepted().flatMap((a) => a.changes));
    per[s.name] = {
      expected: expected.size,
      accepted: accepted.size,
      lost: [...expected].filter((k) => !accepted.has(k)).length,
      unmatched: [...accepted].filter((k) => !expected.has(k)).length,
    };
  }
  return per;
}

/**
 * After each 429: the wait before the same message came again, and the requests that arrived
 * within the pause (half a second after the answer on: those were under way already).
 */
function retryAfterChecks(r: Receiver): { gaps_s: number[]; during_pause: number } {
  const gaps: number[] = [];
  let duringPause = 0;
  for (const [i, a] of r.arrivals.entries()) {
    if (a.status !== 429) continue;
    const later = r.arrivals.slice(i + 1);
    const again = later.find((b) => b.id === a.id);
    if (again) gaps.push(Math.round(again.at - a.at) / 1000);
    duringPause += later.filter((b) => b.at > a.at + 500 && b.at < a.at + RETRY_AFTER_S * 1000 - 100).length;
  }
  return { gaps_s: gaps, during_pause: duringPause };
}

const p99 = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s[Math.min(s.length - 1, Math.ceil(s.length * 0.99) - 1)] as number) : null;
};

let slowHangs = true;

/** Produces `xs` over about two seconds, in ten slices: a stream, not one burst. */
async function produceSpread(world: HookWorld, xs: PriceChange[]): Promise<void> {
  const slice = Math.ceil(xs.length / 10);
  for (let i = 0; i < xs.length; i += slice) {
    const now = Date.now();
    await produceChanges(
      world,
      xs.slice(i, i + slice).map((c) => ({ ...c, changed_at: now })),
    );
    await sleep(200);
  }
}

const result: Record<string, unknown> = { errors: [] as string[] };
const errors = result.errors as string[];
const stack = new TestStack();
let notifier: ChildProcess | undefined;
onAbort(() => notifier?.kill('SIGKILL'));
const began = Date.now();
try {
  const world = await hookWorld(stack, await runTopics(stack));
  const r = await receivers();
  const subs = await subscriptions(world, r);
  await r.flaky.stop();
  const metricsPort = await freePort();
  const env = notifierEnv(world, {
    DELIVERY_TIMEOUT_MS: '2000',
    CONSUMER_SESSION_TIMEOUT_MS: '6000',
    METRICS_PORT: String(metricsPort),
  });
  const start = async () => {
    notifier = startService('services/notifier/src/main.ts', env, undefined);
    await notifierRunning(metricsPort);
  };
  await start();
  const sent: PriceChange[] = [];
  const t0 = Date.now() - 3_600_000;
  const rounds = KILLS + 1;
  const perRound = Math.ceil(N_CHANGES / rounds);
  let flakyUpAt = 0;
  const kills: { at_s: number; good_accepted: number; slow_holding: number }[] = [];
  for (let round = 0; round < rounds; round++) {
    const batch = changes(perRound, t0 + round * perRound);
    // Republished, as the outbox does when it crashed between Kafka's ack and its COMMIT.
    const again = sent.length ? Array.from({ length: 10 }, () => sent[rng.int(0, sent.length - 1)] as PriceChange) : [];
    const accepted = r.good.accepted().length;
    await produceSpread(world, [...batch, ...again]);
    sent.push(...batch);
    if (round === 0) {
      await sleep(Math.max(0, DOWN_MS - 2_000));
      await r.flaky.start();
      flakyUpAt = Date.now();
    }
    if (round === rounds - 1) break;
    // Mid-delivery: this round's changes are arriving and the slow receiver holds requests.
    await within(
      30_000,
      async () => (r.good.accepted().length > accepted && r.slow.holding > 0 ? true : undefined),
      20,
    );
    await sleep(rng.int(0, 500));
    kills.push({
      at_s: (Date.now() - began) / 1000,
      good_accepted: r.good.accepted().length,
      slow_holding: r.slow.holding,
    });
    notifier!.kill('SIGKILL');
    await new Promise((res) => notifier!.once('exit', res));
    await start();
  }
  slowHangs = false;
  const done = await within(
    SETTLE_MS,
    async () => (Object.values(coverage(subs, sent)).every((c) => c.lost === 0) ? true : undefined),
    1_000,
  );
  if (!done) errors.push(`not every matching change was accepted within ${SETTLE_MS / 1000} s of the last round`);
  const firstKill = began + (kills[0]?.at_s ?? Infinity) * 1000;
  const calm = r.good
    .accepted()
    .filter((a) => a.at < firstKill)
    .map((a) => (a.at - a.committedAt) / 1000);
  const per = coverage(subs, sent);
  const ids = idChecks(subs);
  Object.assign(result, {
    changes: sent.length,
    republished: 10 * KILLS,
    kill_points: kills,
    per_subscription: per,
    webhook_lost: Object.values(per).reduce((n, c) => n + c.lost, 0),
    webhook_kills: kills.length,
    webhook_unmatched: Object.values(per).reduce((n, c) => n + c.unmatched, 0),
    webhook_id_conflicts:
      ids.idConflicts +
      ids.pairsWithManyIds +
      (r.good.badSignatures + r.flaky.badSignatures + r.slow.badSignatures + r.narrow.badSignatures),
    webhook_good_p99_s: p99(calm),
    id_conflicts: ids.idConflicts,
    changes_with_many_ids: ids.pairsWithManyIds,
    bad_signatures: Object.values(r).reduce((n, x) => n + x.badSignatures, 0),
    good_samples_before_kills: calm.length,
    retry_after: retryAfterChecks(r.flaky),
    webhook_retry_after_honoured:
      retryAfterChecks(r.flaky).gaps_s.length > 0 &&
      retryAfterChecks(r.flaky).during_pause === 0 &&
      retryAfterChecks(r.flaky).gaps_s.every((g) => g >= RETRY_AFTER_S - 0.1),
    flaky_down_s: DOWN_MS / 1000,
    flaky_first_accept_after_up_s: ((r.flaky.accepted()[0]?.at ?? NaN) - flakyUpAt) / 1000,
    slow_hang_s: HANG_MS / 1000,
    slow_timeouts: r.slow.arrivals.filter((a) => a.status === 'hang').length,
    redelivered_ids: Object.values(r).reduce(
      (n, x) => n + x.accepted().length - new Set(x.accepted().map((a) => a.id)).size,
      0,
    ),
  });
} catch (err) {
  errors.push(message(err));
} finally {
  notifier?.kill('SIGKILL');
  await stack.cleanup().catch((err: unknown) => errors.push(`cleanup: ${message(err)}`));
  result.seconds = Math.round((Date.now() - began) / 1000);
  await writeScenario(args, result);
}
process.exit(0);

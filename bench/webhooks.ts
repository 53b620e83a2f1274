/**
 * Webhook deliveries: the notifier (as deployed, one process) delivering price changes to a local
 * receiver that checks every signature with `standardwebhooks` and answers 204.
 *
 * - `webhook_deliveries_per_s`: a burst of changes, each matching every one of 8 subscriptions,
 *   produced at once; deliveries accepted per second from the first produce to the last delivery.
 *   Its floor (`webhook_floor_per_s`): the same number of signed POSTs of the same size sent by a
 *   bare undici client at the notifier's total in-flight cap to the same receiver, in the same run.
 * - `webhook_p99_s`: a steady stream of changes; each delivery's time from the change's commit
 *   (`changed_at`) to its arrival at the receiver, p99 (target ≤ 2 s, design.md).
 *
 *   node --import tsx bench/webhooks.ts [--size 35000] [--runs 3] [--seconds 10]
 *   (deliveries in the burst: min(size, 20000); smoke: 300)
 */
import type { ChildProcess } from 'node:child_process';
import { Webhook } from 'standardwebhooks';
import { Agent, request } from 'undici';
import { freePort } from '../test/support/services.js';
import { TestStack } from '../test/support/stack.js';
import { runTopics } from '../reliability/support/harness.js';
import {
  change,
  hookWorld,
  notifierEnv,
  notifierRunning,
  produceChanges,
  Receiver,
  subscribe,
  type HookWorld,
  type PriceChange,
} from '../reliability/support/webhooks.js';
import { benchArgs, median, percentile, round, startService, stopProcess, writeResult } from './support/harness.js';

const args = benchArgs('webhooks', { seconds: 10 });
const SUBSCRIPTIONS = 8;
const IN_FLIGHT = 64;
const deliveries = Math.min(args.size, 20_000);
const perSecond = args.size >= 10_000 ? 50 : 20;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let observed = Date.now() - 86_400_000;
const changesOf = (n: number): PriceChange[] =>
  Array.from({ length: n }, (_, i) => change('cn-a', `Bench Hook Item ${i % 500}`, '100.00', '90.00', observed++));

async function until(receiver: Receiver, count: number, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  while (receiver.accepted().length < count) {
    if (Date.now() > deadline)
      throw new Error(`${receiver.accepted().length} of ${count} deliveries in ${timeoutMs} ms`);
    await sleep(20);
  }
  // A loop, not Math.max(...): tens of thousands of arguments come near V8's limit.
  let last = 0;
  for (const a of receiver.accepted()) if (a.at > last) last = a.at;
  return last;
}

/** A burst: every change at once; deliveries/s until the last one. */
async function burst(world: HookWorld, receiver: Receiver): Promise<number> {
  const n = Math.ceil(deliveries / SUBSCRIPTIONS);
  const before = receiver.accepted().length;
  const started = Date.now();
  await produceChanges(world, changesOf(n));
  const last = await until(receiver, before + n * SUBSCRIPTIONS, 600_000);
  return (n * SUBSCRIPTIONS) / ((last - started) / 1000);
}

/** A steady stream for `seconds`; each delivery's commit-to-arrival time. */
async function steady(world: HookWorld, receiver: Receiver): Promise<number[]> {
  const from = receiver.arrivals.length;
  const before = receiver.accepted().length;
  const ticks = args.seconds * 10;
  let sent = 0;
  for (let t = 0; t < ticks; t++) {
    const due = Math.round(((t + 1) * perSecond) / 10) - sent;
    await produceChanges(world, changesOf(due));
    sent += due;
    await sleep(100);
  }
  await until(receiver, before + sent * SUBSCRIPTIONS, 60_000);
  return receiver.arrivals.slice(from).map((a) => (a.at - a.committedAt) / 1000);
}

/**
 * The floor: as many POSTs of a body of the same shape, each signed (standardwebhooks) so that the
 * receiver does the same work, from a bare undici client, IN_FLIGHT at a time.
 */
async function floor(receiver: Receiver, secret: string): Promise<number> {
  const agent = new Agent({ connections: IN_FLIGHT });
  const signer = new Webhook(secret);
  const n = deliveries;
  let next = 0;
  const started = Date.now();
  const worker = async () => {
    while (next++ < n) {
      const at = new Date();
      const data = { ...changesOf(1)[0]!, observed_at: at.toISOString(), changed_at: at.toISOString() };
      const body = JSON.stringify({ type: 'price.changed', timestamp: at.toISOString(), data });
      const id = `msg_floor_${next}_${Math.random().toString(36).slice(2)}`;
      const headers = {
        'content-type': 'application/json',
        'webhook-id': id,
        'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
        'webhook-signature': signer.sign(id, at, body),
      };
      const res = await request(receiver.url, { method: 'POST', body, headers, dispatcher: agent });
      await res.body.dump();
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  await agent.close();
  return n / ((Date.now() - started) / 1000);
}

const stack = new TestStack();
let notifier: ChildProcess | undefined;
const runs: { per_s: number; floor_per_s: number; p99_s: number; p50_s: number }[] = [];
try {
  const world = await hookWorld(stack, await runTopics(stack));
  const receiver = new Receiver();
  await receiver.start();
  let secret = '';
  for (let i = 0; i < SUBSCRIPTIONS; i++) {
    secret = (await subscribe(world, receiver.url, {})).secret;
    receiver.addSecret(secret);
  }
  const metricsPort = await freePort();
  notifier = startService(
    'services/notifier/src/main.ts',
    notifierEnv(world, { METRICS_PORT: String(metricsPort) }),
    args.profileDir,
  );
  // The burst's clock starts with its first produce: the process and its group join are not in it.
  await notifierRunning(metricsPort);
  // The floor's POSTs go to a receiver of their own, doing the same verification.
  const floorReceiver = new Receiver();
  await floorReceiver.start();
  floorReceiver.addSecret(secret);
  for (let run = 0; run < args.runs; run++) {
    const perS = await burst(world, receiver);
    const latencies = await steady(world, receiver);
    const floorPerS = await floor(floorReceiver, secret);
    runs.push({
      per_s: round(perS, 0),
      floor_per_s: round(floorPerS, 0),
      p99_s: round(percentile(latencies, 0.99)),
      p50_s: round(percentile(latencies, 0.5)),
    });
    console.log(`run ${run + 1}: ${JSON.stringify(runs.at(-1))}`);
  }
  await writeResult(args.out, {
    webhook_deliveries_per_s: median(runs.map((r) => r.per_s)),
    webhook_floor_per_s: median(runs.map((r) => r.floor_per_s)),
    webhook_vs_floor: round(median(runs.map((r) => r.per_s / r.floor_per_s))),
    webhook_p99_s: median(runs.map((r) => r.p99_s)),
    webhook_p50_s: median(runs.map((r) => r.p50_s)),
    webhook_bad_signatures: receiver.badSignatures + floorReceiver.badSignatures,
    subscriptions: SUBSCRIPTIONS,
    burst_deliveries: Math.ceil(deliveries / SUBSCRIPTIONS) * SUBSCRIPTIONS,
    steady_changes_per_s: perSecond,
    steady_seconds: args.seconds,
    runs,
  });
} finally {
  if (notifier) await stopProcess(notifier);
  await stack.cleanup();
}
process.exit(0);

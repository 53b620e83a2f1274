/**
 * The soak itself, on a running platform: wait until it has every kind of data, start the two
 * change readers and the mix, take a sample every SOAK_SAMPLE_S (each due at a fixed offset from
 * the start, so a slow sample does not shift the later ones), fire the bursts when due, and after
 * the last sample stop the mix and give the last burst's changes time to arrive.
 */
import { MARKETS } from '@skinprices/domain';
import type { Platform } from './soak-platform.js';
import { serviceProcesses } from './soak-platform.js';
import { Bursts, type BurstResult } from './soak-burst.js';
import { burstTimes, type SoakConfig } from './soak-config.js';
import { startMix } from './soak-mix.js';
import { FeedReader, readerDifference, StreamReader } from './soak-readers.js';
import { untilReady, type Ready } from './soak-ready.js';
import { Recorder, type ClassWindow } from './soak-recorder.js';
import { Sampler, type Sample } from './soak-sample.js';

/** Every process `make run` starts, by the names soak-platform.ts gives them. */
export const EXPECTED_PROCESSES = [
  'supervisor',
  'simulator',
  ...MARKETS.map((m) => `poller ${m.slug}`),
  'materializer',
  'api',
  'notifier',
].sort();

export interface SoakRun {
  ready: Ready;
  samples: Sample[];
  /** Per sample, the latencies of each class (for the windows' p99). */
  history: Map<string, number[]>[];
  /** Answers that arrived after the last sample, before the mix stopped. */
  tail: Record<string, ClassWindow>;
  answered: string[];
  bursts: BurstResult[];
  stream: StreamReader;
  feed: FeedReader;
  readers: ReturnType<typeof readerDifference>;
  /** Processes of EXPECTED_PROCESSES not running just before the platform was stopped. */
  missing_at_end: string[];
  /** Per process, how often its pid changed (the supervisor restarted it). */
  restarts: Record<string, number>;
  problems: string[];
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const sleepUntil = (at: number) => sleep(Math.max(0, at - Date.now()));

export async function runSoak(p: Platform, c: SoakConfig): Promise<SoakRun> {
  const problems: string[] = [];
  const ready = await untilReady(p.api, p.key, c.SOAK_READY_S);
  console.log(
    `ready after ${ready.seconds} s, ${ready.items.length} items${ready.not_ready.length ? `; not ready: ${ready.not_ready.join(', ')}` : ''}`,
  );
  const recorder = new Recorder();
  const bursts = new Bursts(p.control, c.SOAK_BURST_ITEMS);
  const stream = new StreamReader(p.api, p.key, recorder, (ch, via) => bursts.observe(ch, via));
  const feed = new FeedReader(p.api, p.key, recorder, (ch, via) => bursts.observe(ch, via));
  stream.start();
  feed.start();
  const sampler = new Sampler(p, recorder, stream, feed);
  await sampler.start();
  const t0 = Date.now();
  const mix = startMix(p.api, p.key, ready.items, recorder);
  const totalS = c.SOAK_MINUTES * 60;
  const due = burstTimes(totalS);
  const samples: Sample[] = [];
  const fired: Promise<unknown>[] = [];
  for (let k = 1; k <= Math.round(totalS / c.SOAK_SAMPLE_S); k++) {
    const at = t0 + k * c.SOAK_SAMPLE_S * 1000;
    while (due.length && t0 + (due[0] as number) * 1000 <= at) {
      await sleepUntil(t0 + (due.shift() as number) * 1000);
      // Not awaited: reading the truth and sending the overrides takes seconds, which would make
      // the next sample late.
      fired.push(burst(bursts, t0, problems));
    }
    await sleepUntil(at);
    const s = await sampler.take((Date.now() - t0) / 1000);
    samples.push(s);
    console.log(progress(s));
  }
  await Promise.all(fired);
  await mix.stop();
  const tail = recorder.drain();
  // The last burst's changes wait for the next listings cycle of each marketplace.
  const waitUntil = Date.now() + 2 * (c.SOAK_POLL_LISTINGS_MS || 300_000) + 60_000;
  while (bursts.missing() > 0 && Date.now() < waitUntil) await sleep(1_000);
  const running = serviceProcesses(p.child.pid as number);
  stream.detach();
  await feed.stop();
  // Both readers followed from before t0; a change committed in the last seconds may not have
  // reached the feed's next page yet.
  const readers = readerDifference(stream, feed, t0, Date.now() - 10_000);
  return {
    ready,
    samples,
    history: recorder.history,
    tail,
    answered: [...recorder.answered].sort(),
    bursts: bursts.results(),
    stream,
    feed,
    readers,
    missing_at_end: EXPECTED_PROCESSES.filter((n) => !running.has(n)),
    restarts: restarts(samples, running),
    problems,
  };
}

async function burst(bursts: Bursts, t0: number, problems: string[]): Promise<void> {
  const atS = (Date.now() - t0) / 1000;
  try {
    await bursts.fire(atS);
    console.log(`burst at ${Math.round(atS)} s: ${bursts.results().at(-1)?.changes ?? 0} prices moved`);
  } catch (err) {
    problems.push(`burst at ${Math.round(atS)} s: ${String(err)}`);
  }
}

function restarts(samples: readonly Sample[], atEnd: Map<string, number>): Record<string, number> {
  const pids = new Map<string, Set<number>>();
  const add = (name: string, pid: number) => {
    if (!pids.has(name)) pids.set(name, new Set());
    pids.get(name)?.add(pid);
  };
  for (const s of samples) for (const [name, ps] of Object.entries(s.processes)) add(name, ps.pid);
  for (const [name, pid] of atEnd) add(name, pid);
  return Object.fromEntries([...pids].filter(([, set]) => set.size > 1).map(([name, set]) => [name, set.size - 1]));
}

function progress(s: Sample): string {
  const requests = Object.values(s.classes).reduce((n, c) => n + c.requests, 0);
  const errors = Object.values(s.classes).reduce((n, c) => n + Object.values(c.errors).reduce((a, b) => a + b, 0), 0);
  const rss = Object.values(s.processes).reduce((n, p) => n + (p.rss_mb ?? 0), 0);
  return `${Math.round(s.t_s)} s: ${requests} requests, ${errors} errors, api ${s.processes.api?.rss_mb ?? '?'} MB (heap ${s.processes.api?.heap_used_mb ?? '?'}), all ${Math.round(rss)} MB, lag ${s.consumer_lag ?? '?'}, stream ${s.stream_events}, feed ${s.feed_events}`;
}

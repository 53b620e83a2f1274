/**
 * Where a `--cpu-prof` profile spent its time: the top functions by self time and by total
 * (inclusive) time, with their share of the sampled time, and the share per package. This is how
 * bench/bottlenecks.md names a bottleneck with a profile rather than a guess.
 *
 *   node --import tsx bench/profile-summary.ts FILE.cpuprofile [--top 25] [--from S] [--until S]
 *
 * --from / --until keep the samples taken in that window, in seconds from the profile's start
 * (a service's profile starts with its process): a platform run's cold start is its first
 * minute, and a whole-run profile would drown it in the freshness phase after it.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const { values, positionals } = parseArgs({
  options: {
    top: { type: 'string', default: '25' },
    from: { type: 'string', default: '0' },
    until: { type: 'string', default: 'Infinity' },
  },
  allowPositionals: true,
});
const top = Number(values.top);
if (positionals.length !== 1) throw new Error('usage: profile-summary.ts FILE.cpuprofile [--top N]');
const profile = JSON.parse(readFileSync(positionals[0] as string, 'utf8')) as Profile;

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

// Self time per node from the samples (each sample's delta is the time until it was taken), for
// the samples taken inside the window.
const fromUs = Number(values.from) * 1e6;
const untilUs = Number(values.until) * 1e6;
if (!(fromUs >= 0) || !(untilUs > fromUs)) throw new Error('--from and --until: seconds, from < until');
const selfUs = new Map<number, number>();
let atUs = 0;
profile.samples.forEach((id, i) => {
  const delta = profile.timeDeltas[i] ?? 0;
  atUs += delta;
  if (atUs >= fromUs && atUs < untilUs) selfUs.set(id, (selfUs.get(id) ?? 0) + delta);
});
const totalUs = [...selfUs.values()].reduce((a, b) => a + b, 0);

const shortUrl = (url: string): string => {
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)\/(.*)$/.exec(url);
  if (m) return `${m[1]}/${m[2]}`;
  const i = url.search(/\/(services|packages|bench)\//);
  return i >= 0 ? url.slice(i + 1) : url.replace(/^file:\/\//, '');
};
const label = (n: Node): string => {
  const f = n.callFrame;
  const name = f.functionName || '(anonymous)';
  return f.url ? `${name} ${shortUrl(f.url)}:${f.lineNumber + 1}` : name;
};
const pkg = (n: Node): string => {
  const url = n.callFrame.url;
  if (!url) return n.callFrame.functionName.startsWith('(') ? n.callFrame.functionName : '(native/V8)';
  if (url.startsWith('node:')) return 'node core';
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (m) return m[1] as string;
  const own = /\/(services|packages)\/([^/]+)\//.exec(url);
  return own ? `${own[1]}/${own[2]}` : 'other';
};

const self = new Map<string, number>();
const inclusive = new Map<string, number>();
const packages = new Map<string, number>();
for (const [id, us] of selfUs) {
  const n = byId.get(id) as Node;
  self.set(label(n), (self.get(label(n)) ?? 0) + us);
  packages.set(pkg(n), (packages.get(pkg(n)) ?? 0) + us);
  // Inclusive: every distinct frame on the stack gets the sample once (recursion counted once).
  const seen = new Set<string>();
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const l = label(byId.get(cur) as Node);
    if (seen.has(l)) continue;
    seen.add(l);
    inclusive.set(l, (inclusive.get(l) ?? 0) + us);
  }
}

const pct = (us: number) => `${((100 * us) / totalUs).toFixed(1).padStart(5)}%`;
const print = (title: string, m: Map<string, number>, n: number) => {
  console.log(`\n${title}`);
  for (const [k, us] of [...m].sort((a, b) => b[1] - a[1]).slice(0, n)) console.log(`  ${pct(us)}  ${k}`);
};
const window = fromUs > 0 || untilUs < Infinity ? ` (${values.from}-${values.until} s)` : '';
console.log(`${positionals[0]}${window}: ${(totalUs / 1e6).toFixed(2)} s sampled, ${profile.samples.length} samples`);
print('self time by package', packages, 15);
print('self time by function', self, top);
print('total time by function', inclusive, top);

/**
 * `make soak`: the whole platform as `make run` starts it, for SOAK_MINUTES (default 60) under a
 * steady mix — every customer endpoint at a fixed rate on an enterprise key, one SSE stream and one
 * change-feed reader, one burst of upstream price moves an hour — sampled every SOAK_SAMPLE_S
 * (default 60): memory, heap and handles of every process, latency per endpoint class, errors,
 * consumer lag, the readers' events. Then whether memory levels off and latency holds, in
 * reliability/results/soak.json and soak.md.
 *
 *   node --import tsx reliability/soak.ts [--out file.json] [--log file]
 *   SOAK_MINUTES=3 SOAK_SAMPLE_S=10 SOAK_POLL_LISTINGS_MS=20000 …   the smoke size (make test)
 *
 * Settings: reliability/support/soak-config.ts. Needs `make up`; own topics, schemas, keys and
 * ports, all removed afterwards. Exits 1 when a rule that holds in any soak broke (a 5xx, a class
 * never answered, a missing sample, a burst that did not arrive, a process that died, an unclean
 * stop); the memory verdict is a judgement for the reader, not an exit code.
 */
import { parseArgs } from 'node:util';
import { closeConnections } from './support/soak-http.js';
import { soakConfig } from './support/soak-config.js';
import { SOAKED_ENDPOINT_IDS, uncovered } from './support/soak-mix.js';
import { startPlatform } from './support/soak-platform.js';
import { soakResult, writeSoak } from './support/soak-report.js';
import { runSoak } from './support/soak-run.js';

const { values } = parseArgs({
  options: {
    out: { type: 'string', default: 'reliability/results/soak.json' },
    log: { type: 'string', default: '.local/soak/platform.log' },
  },
  strict: true,
});
const config = soakConfig(process.env);
const missing = uncovered(SOAKED_ENDPOINT_IDS);
if (missing.length)
  throw new Error(`endpoints the soak does not request (reliability/support/soak-mix.ts): ${missing.join(', ')}`);

console.log(
  `soak: ${config.SOAK_MINUTES} min, a sample every ${config.SOAK_SAMPLE_S} s; the platform's log in ${values.log}`,
);
const booting = Date.now();
const platform = await startPlatform({
  catalogue: config.SOAK_CATALOGUE,
  pollListingsMs: config.SOAK_POLL_LISTINGS_MS,
  logFile: values.log,
});
console.log(`the platform answers after ${Math.round((Date.now() - booting) / 1000)} s (limiter: ${platform.limiter})`);
// A soak stopped from outside (Ctrl-C, a test's time-out) still stops the platform and removes it.
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => {
    void platform
      .stop()
      .then(platform.remove)
      .finally(() => process.exit(130));
  });
try {
  const run = await runSoak(platform, config);
  const stop = await platform.stop();
  console.log(`platform stopped in ${stop.seconds.toFixed(1)} s`);
  run.stream.close();
  const result = soakResult(run, config, stop, platform.limiter);
  await writeSoak(values.out, result);
  console.log(`\n${result.verdict}`);
  for (const p of result.problems) console.log(`problem: ${p}`);
  console.log(`wrote ${values.out} and its .md`);
  process.exitCode = result.problems.length ? 1 : 0;
} finally {
  await platform.stop();
  await platform.remove();
  closeConnections();
}
process.exit();

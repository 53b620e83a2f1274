/**
 * `make soak`'s settings, parsed once from the environment as a service's are (a bad value stops
 * the run with every problem listed), and the windows its summary compares, scaled to the run's
 * length: an hour's warm-up is its first 10 minutes, so a short run's is its first sixth.
 */
import { intFromEnv, parseConfig } from '@skinprices/runtime';
import { z } from 'zod';

const schema = z.object({
  SOAK_MINUTES: z.coerce
    .number()
    .min(0.5)
    .max(24 * 60)
    .default(60)
    .describe('how long the steady mix runs once the platform has every kind of data (minutes, fractions allowed)'),
  SOAK_SAMPLE_S: intFromEnv(1, 600).default(60).describe('seconds between two samples'),
  SOAK_CATALOGUE: intFromEnv(10, 35_000).default(300).describe("simulated catalogue names (make run's default)"),
  SOAK_POLL_LISTINGS_MS: intFromEnv(0, 3_600_000)
    .default(0)
    .describe(
      'listing cycle interval; 0: the registry default (5 min). The smoke run shortens it, so its burst arrives within its minutes',
    ),
  SOAK_BURST_ITEMS: intFromEnv(1, 5_000)
    .default(100)
    .describe("items per listing marketplace whose price one burst moves (7 % up, through the simulator's overrides)"),
  SOAK_READY_S: intFromEnv(10, 3_600)
    .default(600)
    .describe(
      'how long the platform may take to have every kind of data and a sales export; the mix starts then anyway',
    ),
});
export type SoakConfig = z.infer<typeof schema>;

export const soakConfig = (env: Record<string, string | undefined>): SoakConfig => parseConfig(schema, env);

/** A time range of the run, in seconds since the mix started: (from, to]. */
export type Range = readonly [number, number];

export interface Windows {
  /** Excluded from every comparison: caches fill, JIT warms, the first cycles of slow kinds run. */
  warmup: Range;
  /** The first window after the warm-up: what the last window is compared with. */
  first: Range;
  last: Range;
  /** RSS slopes: does growth in the last third slow down against the middle third? */
  middleThird: Range;
  lastThird: Range;
}

/** The windows of a run of `totalS` seconds: for an hour, minutes 0–10, 10–20, 50–60, 20–40, 40–60. */
export function windows(totalS: number): Windows {
  const sixth = totalS / 6;
  return {
    warmup: [0, sixth],
    first: [sixth, 2 * sixth],
    last: [5 * sixth, totalS],
    middleThird: [2 * sixth, 4 * sixth],
    lastThird: [4 * sixth, totalS],
  };
}

/**
 * When the bursts come, in seconds since the mix started: one in the middle of every hour whose
 * middle leaves a tenth of the run for its changes to arrive; a run shorter than an hour has one,
 * in its middle.
 */
export function burstTimes(totalS: number): number[] {
  if (totalS <= 3_600) return [totalS / 2];
  const out: number[] = [];
  for (let at = 1_800; at < totalS * 0.9; at += 3_600) out.push(at);
  return out;
}

import { isMarketSlug, UPSTREAM_FORMATS, type MarketSlug, type UpstreamFormat } from '@skinprices/domain';
import { intFromEnv } from '@skinprices/runtime';
import { z } from 'zod';

export const simulatorConfigSchema = z.object({
  LOG_LEVEL: z
    .enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'])
    .default('info')
    .describe('pino log level'),
  SIM_HOST: z.string().default('127.0.0.1').describe('address every listener binds'),
  SIM_CONTROL_PORT: intFromEnv(0, 65535).default(7100).describe('control API: clock, faults, overrides, truth'),
  SIM_BASE_PORT: intFromEnv(0, 65535)
    .default(7101)
    .describe('marketplace i (registry order) listens on SIM_BASE_PORT + i; 0 picks free ports'),
  SIM_SEED: intFromEnv(0, 2 ** 31 - 1)
    .default(1)
    .describe('seed of the catalogue and every price'),
  SIM_CATALOGUE_SIZE: intFromEnv(1, 35_000)
    .default(300)
    .describe('distinct market_hash_names; 35000 is the real catalogue'),
  SIM_SPEED: z.coerce.number().min(0).max(1_000_000).default(1).describe('simulated seconds per real second'),
  SIM_START: z.string().optional().describe('simulated start time, ISO 8601; default: now'),
  SIM_DAILY_HISTORY: z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true')
    .describe(
      "every marketplace also serves its daily closes at /api/history/daily and recent hourly candles at /api/history/hourly (the history format), for make run's warm demo",
    ),
  SIM_FORMATS: z
    .string()
    .default('')
    .transform((v, ctx) => parseFormats(v, ctx))
    .describe("marketplaces served in another format, e.g. 'eu-a=skinport,usd-2=dmarket'"),
});
export type SimulatorConfig = z.infer<typeof simulatorConfigSchema>;

/** `eu-a=skinport,usd-2=dmarket` → { 'eu-a': 'skinport', … }; an unknown slug or format is a config error. */
function parseFormats(value: string, ctx: z.RefinementCtx): Partial<Record<MarketSlug, UpstreamFormat>> {
  const out: Partial<Record<MarketSlug, UpstreamFormat>> = {};
  for (const pair of value
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const parts = pair.split('=').map((p) => p.trim());
    const [slug, format] = parts;
    if (parts.length !== 2 || !isMarketSlug(slug) || !(UPSTREAM_FORMATS as readonly string[]).includes(format ?? '')) {
      ctx.addIssue({
        code: 'custom',
        message: `'${pair}': expected <market>=<format> (formats: ${UPSTREAM_FORMATS.join(', ')})`,
      });
      return z.NEVER;
    }
    out[slug] = format as UpstreamFormat;
  }
  return out;
}

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
});
export type SimulatorConfig = z.infer<typeof simulatorConfigSchema>;

import { parseConfig } from '@skinprices/runtime';
import { describe, expect, it } from 'vitest';
import { simulatorConfigSchema } from './config.js';

describe('SIM_FORMATS', () => {
  it('maps marketplaces to the formats they are served in', () => {
    const c = parseConfig(simulatorConfigSchema, { SIM_FORMATS: ' eu-a=skinport, usd-2=dmarket,usd-4=steam-market ' });
    expect(c.SIM_FORMATS).toEqual({ 'eu-a': 'skinport', 'usd-2': 'dmarket', 'usd-4': 'steam-market' });
    expect(parseConfig(simulatorConfigSchema, {}).SIM_FORMATS).toEqual({});
  });

  it.each(['eu-z=skinport', 'eu-a=skinpork', 'eu-a', 'eu-a=skinport=x'])('refuses %j with a clear error', (value) => {
    expect(() => parseConfig(simulatorConfigSchema, { SIM_FORMATS: value })).toThrow(/SIM_FORMATS/);
  });
});

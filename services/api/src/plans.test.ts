import { describe, expect, it } from 'vitest';
import { ENDPOINT_IDS, planFor, planIncludes, WEBHOOK_ENDPOINT_IDS } from './plans.js';

describe('plans', () => {
  it('higher tiers include everything from lower tiers', () => {
    expect(planIncludes('enterprise', 'basic')).toBe(true);
    expect(planIncludes('pro', 'pro')).toBe(true);
    expect(planIncludes('pro', 'enterprise')).toBe(false);
    expect(planIncludes('basic', 'pro')).toBe(false);
  });

  it('the spec plan of each endpoint', () => {
    expect(planFor('GET /v1/prices/{market}')).toBe('basic');
    expect(planFor('GET /v1/prices/{market}/buyorder')).toBe('pro');
    expect(planFor('GET /v2/prices/float-ranged')).toBe('pro');
    expect(planFor('GET /v1/market-sales/export')).toBe('enterprise');
    expect(planFor('GET /v1/indexes/market-cap')).toBe('enterprise');
    // CN-A lists every individual float buy order: enterprise; CN-B's range orders: pro.
    expect(planFor('GET /v1/prices/{market}/float-buyorder', 'cn-a')).toBe('enterprise');
    expect(planFor('GET /v1/prices/{market}/float-buyorder', 'cn-b')).toBe('pro');
    // The 12 endpoints of the spec and /v1/status, plus the change feed (every plan) and stream (pro) beyond it.
    expect(planFor('GET /v1/prices/changes')).toBe('basic');
    expect(planFor('GET /v1/prices/stream')).toBe('pro');
    expect(planFor('GET /v1/webhooks')).toBe('pro');
    // ... and the nine webhook endpoints (pro).
    expect(ENDPOINT_IDS).toHaveLength(24);
    expect(WEBHOOK_ENDPOINT_IDS).toHaveLength(9);
    expect(WEBHOOK_ENDPOINT_IDS.every((id) => planFor(id) === 'pro')).toBe(true);
  });
});

/**
 * Regression: history of an item the read model has never seen answered 200 with no points, so a
 * typo in market_hash_name looked like "no data yet". Root cause: the handler returned whatever
 * the daily/hourly query found and never asked whether the name exists. Now no points plus a
 * name never listed nor imported is a 404 `not_found` in the error shape; a known item with no
 * points on that marketplace stays a 200 with [].
 */
import { createLogger } from '@skinprices/runtime';
import { describe, expect, it } from 'vitest';
import { buildApp } from './app.js';
import type { ApiKey, KeyStore } from './keys.js';
import { MemoryRateLimiter } from './limits.js';
import type { ReadModel } from './readmodel.js';

const key = {
  id: '1',
  prefix: 'p',
  customer: 'c@example.com',
  plan: 'basic',
  allowedEndpoints: null,
  perSecond: 10_000,
  perMinute: 1_000_000,
  perDay: 10_000_000,
} as unknown as ApiKey;

function appWith(known: readonly string[], points: Record<string, { date: string; price: string; count: number }[]>) {
  const asked: string[] = [];
  const read = {
    history: async (market: string, name: string) => points[`${market}/${name}`] ?? [],
    knowsItem: async (name: string) => {
      asked.push(name);
      return known.includes(name);
    },
    // The change routes take their log at start; these tests never call them.
    changeLog: () => ({}),
  } as unknown as ReadModel;
  const app = buildApp({
    keys: { authenticate: async (s?: string) => (s === 'k' ? key : 'missing') } as unknown as KeyStore,
    limiter: new MemoryRateLimiter(),
    read,
    version: () => 0,
    logger: createLogger('api', 'silent'),
  });
  const get = (market: string, name: string) =>
    app.inject({
      url: `/v1/prices/${market}/history?market_hash_name=${encodeURIComponent(name)}`,
      headers: { 'x-api-key': 'k' },
    });
  return { app, get, asked };
}

describe('history of an unknown item is a 404 in the error shape', () => {
  it('404 not_found for a name never seen; 200 [] for a known item without points; 200 with points as before', async () => {
    const name = 'AK-47 | Redline (Field-Tested)';
    const { app, get, asked } = appWith([name], {
      [`cn-a/${name}`]: [{ date: '2026-11-20', price: '12.50', count: 3 }],
    });
    const typo = await get('cn-a', 'AK-47 | Redlin (Field-Tested)');
    expect(typo.statusCode).toBe(404);
    expect(typo.headers['content-type']).toMatch(/^application\/json/);
    expect(typo.json()).toEqual({
      error: {
        status: 404,
        code: 'not_found',
        message: "no item named 'AK-47 | Redlin (Field-Tested)' was ever listed or imported (names are exact)",
      },
    });
    const quiet = await get('eu-b', name);
    expect(quiet.statusCode).toBe(200);
    expect(quiet.json().points).toEqual([]);
    const found = await get('cn-a', name);
    expect(found.statusCode).toBe(200);
    expect(found.json().points).toHaveLength(1);
    // The existence check runs only when there are no points.
    expect(asked).toEqual(['AK-47 | Redlin (Field-Tested)', name]);
    await app.close();
  });
});

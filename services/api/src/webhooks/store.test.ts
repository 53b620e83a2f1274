/**
 * What the webhook routes answer for failures of their database (storeFailure). A misconfigured
 * WEBHOOKS_DATABASE_URL (a standby, a wrong password or database, a host that does not resolve)
 * used to reach app.ts's default and answer 500 internal; these are the operator's to fix and
 * the customer's to retry, so 503 with a hint and Retry-After.
 */
import { describe, expect, it } from 'vitest';
import { storeFailure } from './store.js';

const pgError = (code: string, message = 'failed') => Object.assign(new Error(message), { code });

describe('storeFailure', () => {
  it.each([
    ['25006', /read-only .*WEBHOOKS_DATABASE_URL must name the primary/, '300'],
    ['28P01', /password/, '300'],
    ['3D000', /database does not exist/, '300'],
    ['ENOTFOUND', /host name does not resolve/, '300'],
    ['ECONNREFUSED', /refuses connections/, '30'],
    ['57P03', /starting up/, '30'],
    ['08006', /dropped the connection/, '30'],
  ])('%s: 503 webhooks_unavailable naming the cause, with Retry-After', (code, hint, retryAfter) => {
    const cause = pgError(code);
    const e = storeFailure(cause, 'webhooks');
    expect(e?.status).toBe(503);
    expect(e?.code).toBe('webhooks_unavailable');
    expect(e?.message).toMatch(hint);
    expect(e?.headers['retry-after']).toBe(retryAfter);
    expect(e?.cause).toBe(cause);
  });

  it('a connection that ended before the answer (no code) is unavailable too', () => {
    expect(storeFailure(new Error('Connection terminated unexpectedly'), 'webhooks')?.code).toBe(
      'webhooks_unavailable',
    );
  });

  it('a schema not migrated yet names the notifier and the schema', () => {
    const e = storeFailure(pgError('42P01'), 'hooks_x');
    expect(e).toMatchObject({ status: 503, code: 'webhooks_unavailable' });
    expect(e?.message).toMatch(/notifier .*hooks_x/);
  });

  it.each(['40P01', '40001'])('%s (left after the one retry): 503 not_available, Retry-After 1', (code) => {
    const e = storeFailure(pgError(code), 'webhooks');
    expect(e).toMatchObject({ status: 503, code: 'not_available', headers: { 'retry-after': '1' } });
  });

  it("anything else is left to app.ts's answer (a bug stays a 500; a busy pool app.ts's 503)", () => {
    expect(storeFailure(pgError('42703'), 'webhooks')).toBeUndefined();
    expect(storeFailure(new Error('timeout exceeded when trying to connect'), 'webhooks')).toBeUndefined();
    expect(storeFailure(new TypeError('x is undefined'), 'webhooks')).toBeUndefined();
  });
});

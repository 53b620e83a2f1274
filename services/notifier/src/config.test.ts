/** The notifier's configuration (config.ts). */
import { describe, expect, it } from 'vitest';
import { notifierConfigSchema } from './config.js';

const ring = { WEBHOOK_SECRET_KEYS: 'k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=' };

describe('notifier config', () => {
  it('defaults: the contract’s', () => {
    const c = notifierConfigSchema.parse(ring);
    expect(c).toMatchObject({
      WEBHOOKS_SCHEMA: 'webhooks',
      KEYS_SCHEMA: 'api',
      GROUP_ID: 'notifier',
      TOPIC_SUFFIX: '',
      WEBHOOK_ALLOW_PRIVATE_URLS: false,
      DELIVERY_TIMEOUT_MS: 10_000,
      MAX_IN_FLIGHT: 64,
      PER_SUBSCRIPTION_IN_FLIGHT: 4,
      POLL_MS: 250,
      SUBSCRIPTIONS_REFRESH_MS: 5_000,
    });
    expect(c.METRICS_PORT).toBeUndefined();
  });

  it('WEBHOOK_SECRET_KEYS is required: nothing could be signed without it', () => {
    const r = notifierConfigSchema.safeParse({});
    expect(r.success).toBe(false);
    expect(r.error?.issues.map((i) => i.path)).toContainEqual(['WEBHOOK_SECRET_KEYS']);
  });

  it.each([
    [{ WEBHOOK_ALLOW_PRIVATE_URLS: 'true' }, true],
    [{ WEBHOOK_ALLOW_PRIVATE_URLS: 'yes' }, false],
    [{ WEBHOOKS_SCHEMA: 'Web-Hooks' }, false],
    [{ DELIVERY_TIMEOUT_MS: '5' }, false],
    [{ MAX_IN_FLIGHT: '2', PER_SUBSCRIPTION_IN_FLIGHT: '4' }, false],
    [{ MAX_IN_FLIGHT: '8', PER_SUBSCRIPTION_IN_FLIGHT: '8', METRICS_PORT: '9464' }, true],
  ])('%j: accepted %s', (env, ok) => {
    expect(notifierConfigSchema.safeParse({ ...ring, ...env }).success).toBe(ok);
  });
});

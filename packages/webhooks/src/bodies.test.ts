import type { PriceChangeEvent } from '@skinprices/events';
import { describe, expect, it } from 'vitest';
import { batchBody, changeBody, testBody, toWebhookChange, type WebhookChange } from './bodies.js';

const event: PriceChangeEvent = {
  market: 'csfloat',
  market_hash_name: 'AWP | Asiimov (Field-Tested)',
  phase: '',
  currency: 'USD',
  old_price: '100.00',
  new_price: '95.50',
  old_count: 3,
  new_count: 4,
  observed_at: Date.UTC(2025, 0, 2, 3, 4, 5, 6),
  changed_at: Date.UTC(2025, 0, 2, 3, 4, 6, 7),
};
const now = new Date(Date.UTC(2025, 0, 2, 3, 4, 7, 0));

describe('bodies', () => {
  it('carries prices as strings and times as ISO-8601 UTC', () => {
    expect(toWebhookChange(event)).toEqual({
      ...event,
      observed_at: '2025-01-02T03:04:05.006Z',
      changed_at: '2025-01-02T03:04:06.007Z',
    });
  });

  it('builds the three message types', () => {
    const change = toWebhookChange(event);
    expect(JSON.parse(changeBody(change, now))).toEqual({
      type: 'price.changed',
      timestamp: '2025-01-02T03:04:07.000Z',
      data: change,
    });
    expect(JSON.parse(batchBody([change, change], now))).toEqual({
      type: 'price.changed.batch',
      timestamp: '2025-01-02T03:04:07.000Z',
      data: { changes: [change, change] },
    });
    expect(JSON.parse(testBody('wh_x', now))).toEqual({
      type: 'webhook.test',
      timestamp: '2025-01-02T03:04:07.000Z',
      data: { subscription_id: 'wh_x' },
    });
  });

  it('lists fields in the documented order even for a change read back from jsonb', () => {
    // jsonb stores keys shortest first: a change from webhook_batch_events comes back reordered.
    const change = toWebhookChange(event);
    const reordered = Object.fromEntries(Object.entries(change).reverse()) as unknown as WebhookChange;
    const extra = { ...change, unexpected: 1 } as WebhookChange;
    expect(batchBody([reordered], now)).toBe(batchBody([change], now));
    expect(changeBody(extra, now)).toBe(changeBody(change, now));
    expect(Object.keys(JSON.parse(changeBody(reordered, now)).data)).toEqual(Object.keys(change));
  });
});

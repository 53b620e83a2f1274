/**
 * The JSON bodies we send. A body is built once, stored in webhook_messages.body and sent byte for
 * byte on every attempt: the signature covers these exact bytes, and a retry must not differ.
 */
import { formatTimestamp } from '@skinprices/domain';
import type { PriceChangeEvent } from '@skinprices/events';

/** A price change as a webhook carries it: prices as decimal strings, times as ISO-8601 UTC. */
export interface WebhookChange {
  market: string;
  market_hash_name: string;
  phase: string;
  currency: string;
  old_price: string | null;
  new_price: string | null;
  old_count: number | null;
  new_count: number | null;
  observed_at: string;
  changed_at: string;
}

export function toWebhookChange(e: PriceChangeEvent): WebhookChange {
  return {
    market: e.market,
    market_hash_name: e.market_hash_name,
    phase: e.phase,
    currency: e.currency,
    old_price: e.old_price,
    new_price: e.new_price,
    old_count: e.old_count,
    new_count: e.new_count,
    observed_at: formatTimestamp(e.observed_at),
    changed_at: formatTimestamp(e.changed_at),
  };
}

/**
 * The change with its fields in the documented order and nothing else. Batched changes come back
 * from a jsonb column, which reorders keys (shortest first); without this a batch body would list
 * fields in another order than a single change's body does.
 */
function canonical(c: WebhookChange): WebhookChange {
  return {
    market: c.market,
    market_hash_name: c.market_hash_name,
    phase: c.phase,
    currency: c.currency,
    old_price: c.old_price,
    new_price: c.new_price,
    old_count: c.old_count,
    new_count: c.new_count,
    observed_at: c.observed_at,
    changed_at: c.changed_at,
  };
}

export function changeBody(change: WebhookChange, now: Date): string {
  return JSON.stringify({ type: 'price.changed', timestamp: formatTimestamp(now), data: canonical(change) });
}

export function batchBody(changes: readonly WebhookChange[], now: Date): string {
  return JSON.stringify({
    type: 'price.changed.batch',
    timestamp: formatTimestamp(now),
    data: { changes: changes.map(canonical) },
  });
}

export function testBody(subscriptionId: string, now: Date): string {
  return JSON.stringify({
    type: 'webhook.test',
    timestamp: formatTimestamp(now),
    data: { subscription_id: subscriptionId },
  });
}

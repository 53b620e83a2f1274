/**
 * Ids of subscriptions, events and messages. Event and message ids are derived, not random: the
 * outbox is at least once, so the same change may reach the notifier twice, and the second time it
 * must produce the same message id for `INSERT … ON CONFLICT DO NOTHING` to drop it. The id is
 * also the `webhook-id` header, which receivers use to drop duplicates on their side.
 */
import { createHash, randomBytes } from 'node:crypto';
import { base32 } from './base32.js';

/** The fields that identify one price change: one item on one market at one observation. */
export interface ChangeKey {
  market: string;
  market_hash_name: string;
  phase: string;
  /** Epoch milliseconds. */
  observed_at: number;
}

// 26 base32 characters carry 130 bits: all 128 of 16 random bytes, or the first 130 of a SHA-256.
const ID_CHARS = 26;

function digestId(prefix: string, parts: readonly string[]): string {
  // NUL separates the parts: no market slug, item name or id contains one, so ('ab','c') and
  // ('a','bc') hash differently.
  const digest = createHash('sha256').update(parts.join('\0'), 'utf8').digest();
  return prefix + base32(digest).slice(0, ID_CHARS);
}

function randomId(prefix: string): string {
  return prefix + base32(randomBytes(16)).slice(0, ID_CHARS);
}

export function newSubscriptionId(): string {
  return randomId('wh_');
}

/** Stable per change: the same change republished gets the same id. */
export function eventId(change: ChangeKey): string {
  return digestId('evt_', [change.market, change.market_hash_name, change.phase, String(change.observed_at)]);
}

/** One message of a subscription carrying these events, in this order. */
export function messageId(subscriptionId: string, eventIds: readonly string[]): string {
  return digestId('msg_', [subscriptionId, ...eventIds]);
}

/** A test message is asked for by a person: each request is a new message. */
export function testMessageId(): string {
  return randomId('msg_');
}

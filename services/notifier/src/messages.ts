/**
 * Storing new messages, for the consumer (one change each) and the sealer (a batch each), inside
 * the caller's transaction: derived ids make a change handed over twice (the outbox publishes at
 * least once; a batch retried after a rollback) no second message, and the plan's daily limit is
 * counted only for the messages that were new.
 */
import type { PoolClient } from '@skinprices/store';
import { WEBHOOK_LIMITS } from '@skinprices/webhooks';
import type { WebhookPlan } from './subscriptions.js';

type MessageType = 'price.changed' | 'price.changed.batch' | 'webhook.test';

export interface NewMessage {
  id: string;
  subscriptionId: string;
  keyId: string;
  plan: WebhookPlan;
  type: MessageType;
  body: string;
  eventCount: number;
  /** When its (first) change was committed (epoch ms). */
  committedAt: number;
}

export const DAILY_LIMIT_ERROR = "the plan's daily delivery limit was reached";

/** Which of `made` (new messages, in order) a key's day can still take, given its counts. Pure. */
export function overLimit(
  made: readonly NewMessage[],
  countsAfter: ReadonlyMap<string, number>,
): { dropped: string[]; kept: number } {
  const perKey = new Map<string, NewMessage[]>();
  for (const m of made) perKey.set(m.keyId, [...(perKey.get(m.keyId) ?? []), m]);
  const dropped: string[] = [];
  for (const [keyId, list] of perKey) {
    const after = countsAfter.get(keyId) ?? list.length;
    const limit = WEBHOOK_LIMITS[list[0]?.plan ?? 'pro'].messagesPerDay;
    const room = Math.max(0, limit - (after - list.length));
    // The first ones in commit order fit; the rest of the day's are kept but not sent.
    for (const m of list.slice(room)) dropped.push(m.id);
  }
  return { dropped, kept: made.length - dropped.length };
}

/**
 * Inserts `messages` (pending, due now) that do not exist yet, counts them against their keys'
 * day, and marks those past the plan's limit dropped. Returns how many were new and how many of
 * them were dropped.
 */
export async function storeMessages(
  client: PoolClient,
  messages: readonly NewMessage[],
): Promise<{ created: number; dropped: number }> {
  if (messages.length === 0) return { created: 0, dropped: 0 };
  // The join skips subscriptions deleted since the snapshot the messages were made from (a delete
  // committing between this statement's snapshot and its foreign-key check still fails the batch,
  // which is then retried and skips it).
  const { rows } = await client.query<{ id: string }>(
    `INSERT INTO webhook_messages (id, subscription_id, type, body, event_count, status, committed_at)
     SELECT m.id, m.sub, m.type, m.body, m.n, 'pending', m.at
     FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::timestamptz[]) AS m(id, sub, type, body, n, at)
     JOIN webhook_subscriptions s ON s.id = m.sub
     ON CONFLICT (id) DO NOTHING
     RETURNING id`,
    [
      messages.map((m) => m.id),
      messages.map((m) => m.subscriptionId),
      messages.map((m) => m.type),
      messages.map((m) => m.body),
      messages.map((m) => m.eventCount),
      messages.map((m) => new Date(m.committedAt).toISOString()),
    ],
  );
  const fresh = new Set(rows.map((r) => r.id));
  const made = messages.filter((m) => fresh.has(m.id));
  if (made.length === 0) return { created: 0, dropped: 0 };
  const perKey = new Map<string, number>();
  for (const m of made) perKey.set(m.keyId, (perKey.get(m.keyId) ?? 0) + 1);
  // Keys in ascending order: consumers of other partitions count the same keys' rows, and one
  // lock order keeps them from deadlocking.
  const keys = [...perKey.keys()].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0));
  const { rows: counts } = await client.query<{ key_id: string; messages: number }>(
    `INSERT INTO webhook_daily_usage (key_id, day, messages)
     SELECT u.k, (now() AT TIME ZONE 'UTC')::date, u.n FROM unnest($1::bigint[], $2::int[]) WITH ORDINALITY AS u(k, n, i)
     ORDER BY u.i
     ON CONFLICT (key_id, day) DO UPDATE SET messages = webhook_daily_usage.messages + excluded.messages
     RETURNING key_id::text AS key_id, messages`,
    [keys, keys.map((k) => perKey.get(k) ?? 0)],
  );
  const { dropped } = overLimit(made, new Map(counts.map((c) => [c.key_id, c.messages])));
  if (dropped.length > 0)
    await client.query(`UPDATE webhook_messages SET status = 'dropped', last_error = $2 WHERE id = ANY($1::text[])`, [
      dropped,
      DAILY_LIMIT_ERROR,
    ]);
  return { created: made.length, dropped: dropped.length };
}

/**
 * Storing what matched, for the consumer (a message per change, or batch events) and the sealer (a
 * batch message), inside the caller's transaction, against the plan's daily limit: a key's day
 * takes WEBHOOK_LIMITS[plan].messagesPerDay messages; past it, matches are not stored at all, only
 * counted (webhook_daily_usage.dropped), so one key's excess can fill neither the delivery log nor
 * the batch events. Derived ids make a change handed over twice (the outbox publishes at least
 * once; a batch retried after a rollback) no second message, and only messages new to the log are
 * counted.
 */
import type { PoolClient } from '@skinprices/store';
import { WEBHOOK_LIMITS, type WebhookChange } from '@skinprices/webhooks';
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

/** A change matched by a batching subscription, waiting for the sealer. */
export interface BatchEvent {
  subscriptionId: string;
  keyId: string;
  plan: WebhookPlan;
  eventId: string;
  change: WebhookChange;
  committedAt: number;
}

/** What the daily limit lets through of one transaction's matches. */
export interface LimitSplit {
  messages: NewMessage[];
  events: BatchEvent[];
  /** Matched changes not stored, per key: a dropped message counts its events, a batch event one. */
  dropped: Map<string, number>;
}

/**
 * Splits new matches by their keys' day, given what each key's day already made (`made`): a key's
 * messages fit in order up to its plan's limit; its batch events are kept only while its day still
 * has room once those messages are counted (they make a message when sealed, counted then; past
 * the limit they could only be dropped at the seal, and stored meanwhile without bound). Pure.
 */
export function splitByDailyLimit(
  messages: readonly NewMessage[],
  events: readonly BatchEvent[],
  made: ReadonlyMap<string, number>,
): LimitSplit {
  const out: LimitSplit = { messages: [], events: [], dropped: new Map() };
  const used = new Map(made);
  const drop = (keyId: string, n: number): void => {
    out.dropped.set(keyId, (out.dropped.get(keyId) ?? 0) + n);
  };
  for (const m of messages) {
    const n = used.get(m.keyId) ?? 0;
    if (n < WEBHOOK_LIMITS[m.plan].messagesPerDay) {
      out.messages.push(m);
      used.set(m.keyId, n + 1);
    } else drop(m.keyId, m.eventCount);
  }
  for (const e of events) {
    if ((used.get(e.keyId) ?? 0) < WEBHOOK_LIMITS[e.plan].messagesPerDay) out.events.push(e);
    else drop(e.keyId, 1);
  }
  return out;
}

/** What storeMatches did: messages and batch events inserted, matched changes dropped. */
export interface Stored {
  created: number;
  batchEvents: number;
  dropped: number;
}

/** Ascending bigint order of key ids (text). */
const byKey = (a: string, b: string): number => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0);

/**
 * Stores `messages` (pending, due now) and `events` that are new and within their keys' day, and
 * counts the day's messages and drops. Matches of subscriptions deleted since the snapshot they
 * were made from are skipped (a delete committing between a statement's snapshot and its
 * foreign-key check still fails the transaction, which is then retried and skips it).
 */
export async function storeMatches(
  client: PoolClient,
  messages: readonly NewMessage[],
  events: readonly BatchEvent[] = [],
): Promise<Stored> {
  if (messages.length === 0 && events.length === 0) return { created: 0, batchEvents: 0, dropped: 0 };
  // Only messages new to the log count against the day (one read again is no new message).
  const { rows: fresh } = await client.query<{ id: string }>(
    `SELECT m.id FROM unnest($1::text[], $2::text[]) AS m(id, sub)
     JOIN webhook_subscriptions s ON s.id = m.sub
     WHERE NOT EXISTS (SELECT 1 FROM webhook_messages w WHERE w.id = m.id)`,
    [messages.map((m) => m.id), messages.map((m) => m.subscriptionId)],
  );
  const freshIds = new Set(fresh.map((r) => r.id));
  const candidates = messages.filter((m) => freshIds.has(m.id));
  if (candidates.length === 0 && events.length === 0) return { created: 0, batchEvents: 0, dropped: 0 };
  const split = splitByDailyLimit(candidates, events, await lockDays(client, [...candidates, ...events]));

  let created: { id: string }[] = [];
  if (split.messages.length > 0)
    ({ rows: created } = await client.query<{ id: string }>(
      `INSERT INTO webhook_messages (id, subscription_id, type, body, event_count, status, committed_at)
       SELECT m.id, m.sub, m.type, m.body, m.n, 'pending', m.at
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::timestamptz[]) AS m(id, sub, type, body, n, at)
       JOIN webhook_subscriptions s ON s.id = m.sub
       ON CONFLICT (id) DO NOTHING
       RETURNING id`,
      [
        split.messages.map((m) => m.id),
        split.messages.map((m) => m.subscriptionId),
        split.messages.map((m) => m.type),
        split.messages.map((m) => m.body),
        split.messages.map((m) => m.eventCount),
        split.messages.map((m) => new Date(m.committedAt).toISOString()),
      ],
    ));
  let batchEvents = 0;
  if (split.events.length > 0) {
    const { rowCount } = await client.query(
      `INSERT INTO webhook_batch_events (subscription_id, event_id, change, committed_at)
       SELECT e.sub, e.ev, e.change, e.at
       FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::timestamptz[]) AS e(sub, ev, change, at)
       JOIN webhook_subscriptions s ON s.id = e.sub
       ON CONFLICT DO NOTHING`,
      [
        split.events.map((e) => e.subscriptionId),
        split.events.map((e) => e.eventId),
        split.events.map((e) => JSON.stringify(e.change)),
        split.events.map((e) => new Date(e.committedAt).toISOString()),
      ],
    );
    batchEvents = rowCount ?? 0;
  }

  const made = new Map<string, number>();
  const inserted = new Set(created.map((r) => r.id));
  for (const m of split.messages) if (inserted.has(m.id)) made.set(m.keyId, (made.get(m.keyId) ?? 0) + 1);
  const keys = [...new Set([...made.keys(), ...split.dropped.keys()])].sort(byKey);
  if (keys.length > 0)
    await client.query(
      `UPDATE webhook_daily_usage u SET messages = u.messages + d.made, dropped = u.dropped + d.dropped
       FROM unnest($1::bigint[], $2::int[], $3::int[]) AS d(k, made, dropped)
       WHERE u.key_id = d.k AND u.day = (now() AT TIME ZONE 'UTC')::date`,
      [keys, keys.map((k) => made.get(k) ?? 0), keys.map((k) => split.dropped.get(k) ?? 0)],
    );
  let dropped = 0;
  for (const n of split.dropped.values()) dropped += n;
  return { created: inserted.size, batchEvents, dropped };
}

/**
 * Locks the day's usage row of every key of `matches` (made at 0 if none) for the rest of the
 * transaction and returns the messages each day already made. Keys in ascending order: consumers
 * of other partitions and the sealer lock the same keys' rows, and one lock order keeps them from
 * deadlocking; the lock makes their counts add up, not overtake one another.
 */
async function lockDays(client: PoolClient, matches: readonly { keyId: string }[]): Promise<Map<string, number>> {
  const keys = [...new Set(matches.map((m) => m.keyId))].sort(byKey);
  const { rows } = await client.query<{ key_id: string; messages: number }>(
    `INSERT INTO webhook_daily_usage (key_id, day)
     SELECT u.k, (now() AT TIME ZONE 'UTC')::date FROM unnest($1::bigint[]) WITH ORDINALITY AS u(k, i)
     ORDER BY u.i
     ON CONFLICT (key_id, day) DO UPDATE SET messages = webhook_daily_usage.messages
     RETURNING key_id::text AS key_id, messages`,
    [keys],
  );
  return new Map(rows.map((r) => [r.key_id, r.messages]));
}

/** What a batch of changes makes (consumer.ts), the batch's sealing rule (sealer.ts) and the daily limit (messages.ts). */
import type { PriceChangeEvent } from '@skinprices/events';
import { eventId, messageId, WEBHOOK_LIMITS } from '@skinprices/webhooks';
import { describe, expect, it } from 'vitest';
import { freshFrom, matchChanges } from './consumer.js';
import { splitByDailyLimit, type BatchEvent, type NewMessage } from './messages.js';
import { shouldSeal } from './sealer.js';
import { CREATED_AT_MARGIN_MS, type ActiveSubscription } from './subscriptions.js';

const T0 = Date.UTC(2026, 0, 10, 12);
const change = (name: string, old_price: string | null, new_price: string | null): PriceChangeEvent => ({
  market: 'cn-a',
  market_hash_name: name,
  phase: '',
  currency: 'CNY',
  old_price,
  new_price,
  old_count: 1,
  new_count: 1,
  observed_at: T0,
  changed_at: T0 + 50,
});
const sub = (id: string, extra: Partial<ActiveSubscription> = {}): ActiveSubscription => ({
  id,
  keyId: '7',
  plan: 'pro',
  url: 'https://example.com/hook',
  filters: {},
  batchMax: 1,
  batchWindowMs: 0,
  createdAt: T0 - 60_000,
  secret: 'whsec_x',
  ...extra,
});

describe('matchChanges', () => {
  // Root cause guarded: a consumer catching up (a new group reads the topic's 30 days, or one that
  // was down) handed a subscription created minutes ago every matching change of the past month.
  it('gives a subscription no change committed before it was created', () => {
    const a = change('AK-47 | Redline (Field-Tested)', '10.00', '9.00');
    const later = sub('wh_new', { createdAt: a.changed_at + CREATED_AT_MARGIN_MS + 1 });
    const { messages } = matchChanges([a], [later], new Date(T0));
    expect(messages).toEqual([]);
  });

  // Root cause guarded: changed_at is the materializer transaction's START; a change committed
  // just after a subscription's creation carried an earlier changed_at and was never delivered.
  it('gives a subscription the changes that started before it but may have committed after', () => {
    const a = change('AK-47 | Redline (Field-Tested)', '10.00', '9.00');
    const subs = [
      sub('wh_at', { createdAt: a.changed_at }),
      sub('wh_just', { createdAt: a.changed_at + 1 }),
      sub('wh_margin', { createdAt: a.changed_at + CREATED_AT_MARGIN_MS }),
    ];
    const { messages } = matchChanges([a], subs, new Date(T0));
    expect(messages.map((m) => m.subscriptionId)).toEqual(['wh_at', 'wh_just', 'wh_margin']);
  });

  it('one message per change and subscription, its id derived from both; a repeat in the batch makes none', () => {
    const a = change('AK-47 | Redline (Field-Tested)', '10.00', '9.00');
    const { messages, batchEvents } = matchChanges([a, { ...a }], [sub('wh_a')], new Date(T0));
    expect(batchEvents).toEqual([]);
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatchObject({
      id: messageId('wh_a', [eventId(a)]),
      type: 'price.changed',
      eventCount: 1,
      committedAt: T0 + 50,
    });
    expect(JSON.parse(messages[0]!.body)).toMatchObject({ type: 'price.changed', data: { new_price: '9.00' } });
  });

  it('filters decide; a batching subscription gets batch events instead', () => {
    const up = change('A', '10.00', '11.00');
    const down = change('B', '10.00', '8.00');
    const subs = [
      sub('wh_cross', { filters: { crosses: { price: '9', direction: 'down' } } }),
      sub('wh_batch', { batchMax: 10, batchWindowMs: 1_000 }),
    ];
    const { messages, batchEvents } = matchChanges([up, down], subs, new Date(T0));
    expect(messages.map((m) => m.subscriptionId)).toEqual(['wh_cross']);
    expect(batchEvents.map((e) => [e.subscriptionId, e.keyId, e.eventId])).toEqual([
      ['wh_batch', '7', eventId(up)],
      ['wh_batch', '7', eventId(down)],
    ]);
  });
});

describe('freshFrom', () => {
  it('the stored offset of this cluster; from the start for another cluster or none', () => {
    expect(freshFrom({ nextOffset: 42n, clusterId: 'c1' }, 'c1')).toBe(42n);
    expect(freshFrom({ nextOffset: 42n, clusterId: 'c0' }, 'c1')).toBe(0n);
    expect(freshFrom(undefined, 'c1')).toBe(0n);
  });
});

describe('shouldSeal', () => {
  const s = { batchMax: 3, batchWindowMs: 1_000 };
  it.each([
    [{ count: 0, oldest: T0 - 10_000 }, false],
    [{ count: 2, oldest: T0 - 999 }, false],
    [{ count: 2, oldest: T0 - 1_000 }, true],
    [{ count: 3, oldest: T0 }, true],
  ])('%j: %s', (open, expected) => {
    expect(shouldSeal(open, s, T0)).toBe(expected);
  });
});

describe('splitByDailyLimit', () => {
  const limit = WEBHOOK_LIMITS.pro.messagesPerDay;
  const msg = (id: string, keyId: string, eventCount = 1): NewMessage => ({
    id,
    subscriptionId: 'wh_a',
    keyId,
    plan: 'pro',
    type: eventCount > 1 ? 'price.changed.batch' : 'price.changed',
    body: '{}',
    eventCount,
    committedAt: T0,
  });
  const ev = (eventId: string, keyId: string): BatchEvent => ({
    subscriptionId: 'wh_b',
    keyId,
    plan: 'pro',
    eventId,
    change: {} as BatchEvent['change'],
    committedAt: T0,
  });

  // Root cause guarded: messages past the limit were stored (as 'dropped'), so one key's excess
  // still grew the log by a row per match without bound.
  it("keeps the first messages that fit the key's day; the rest are only counted, per key", () => {
    const r = splitByDailyLimit(
      [msg('m1', '1'), msg('m2', '1'), msg('m3', '1'), msg('m4', '2'), msg('m5', '1', 7)],
      [],
      new Map([
        ['1', limit - 2],
        ['2', 5],
      ]),
    );
    expect(r.messages.map((m) => m.id)).toEqual(['m1', 'm2', 'm4']);
    // A dropped batch message counts each of its changes.
    expect(r.dropped).toEqual(new Map([['1', 1 + 7]]));
  });

  it("keeps batch events while the day has room after the batch's messages; past it they are dropped", () => {
    const full = splitByDailyLimit([msg('m1', '1')], [ev('e1', '1'), ev('e2', '2')], new Map([['1', limit - 1]]));
    expect(full.messages.map((m) => m.id)).toEqual(['m1']);
    expect(full.events.map((e) => e.eventId)).toEqual(['e2']);
    expect(full.dropped).toEqual(new Map([['1', 1]]));
    const room = splitByDailyLimit([], [ev('e1', '1')], new Map([['1', limit - 1]]));
    expect(room.events).toHaveLength(1);
    expect(room.dropped.size).toBe(0);
  });
});

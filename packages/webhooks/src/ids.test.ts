import { describe, expect, it } from 'vitest';
import { base32 } from './base32.js';
import { eventId, messageId, newSubscriptionId, testMessageId } from './ids.js';

const change = {
  market: 'csfloat',
  market_hash_name: 'AK-47 | Redline (Field-Tested)',
  phase: '',
  observed_at: 1_700_000_000_000,
};
const ID = (prefix: string) => new RegExp(`^${prefix}[a-z2-7]{26}$`);

describe('base32', () => {
  it('encodes as RFC 4648 (lower case, no padding)', () => {
    const enc = (s: string) => base32(Buffer.from(s));
    expect([enc(''), enc('f'), enc('fo'), enc('foo'), enc('foob'), enc('fooba'), enc('foobar')]).toEqual([
      '',
      'my',
      'mzxq',
      'mzxw6',
      'mzxw6yq',
      'mzxw6ytb',
      'mzxw6ytboi',
    ]);
  });
});

describe('ids', () => {
  it('gives random ids their prefixes and 26 base32 characters', () => {
    expect(newSubscriptionId()).toMatch(ID('wh_'));
    expect(testMessageId()).toMatch(ID('msg_'));
    expect(newSubscriptionId()).not.toBe(newSubscriptionId());
    expect(testMessageId()).not.toBe(testMessageId());
  });

  it('derives the same event id for the same change (a republished change is no new event)', () => {
    expect(eventId(change)).toMatch(ID('evt_'));
    expect(eventId({ ...change })).toBe(eventId(change));
  });

  it('derives distinct event ids when any field differs', () => {
    const ids = [
      change,
      { ...change, market: 'buff163' },
      { ...change, market_hash_name: 'AK-47 | Redline (Minimal Wear)' },
      { ...change, phase: 'Phase 2' },
      { ...change, observed_at: change.observed_at + 1 },
    ].map(eventId);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('separates fields with NUL, so moving characters between fields changes the id', () => {
    const a = eventId({ market: 'ab', market_hash_name: 'c', phase: '', observed_at: 1 });
    const b = eventId({ market: 'a', market_hash_name: 'bc', phase: '', observed_at: 1 });
    const c = eventId({ market: 'a', market_hash_name: 'b', phase: 'c', observed_at: 1 });
    expect(new Set([a, b, c]).size).toBe(3);
  });

  it('derives message ids from the subscription and the ordered event ids', () => {
    const e1 = eventId(change);
    const e2 = eventId({ ...change, phase: 'Ruby' });
    expect(messageId('wh_a', [e1])).toMatch(ID('msg_'));
    expect(messageId('wh_a', [e1, e2])).toBe(messageId('wh_a', [e1, e2]));
    expect(messageId('wh_a', [e1, e2])).not.toBe(messageId('wh_a', [e2, e1]));
    expect(messageId('wh_a', [e1])).not.toBe(messageId('wh_b', [e1]));
    expect(messageId('wh_a', [e1])).not.toBe(messageId('wh_a', [e1, e2]));
  });
});

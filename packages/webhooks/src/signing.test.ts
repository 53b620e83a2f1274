import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { generateSecret, signatureHeader, signPayload } from './signing.js';

// The spec's own library verifies what we sign: receivers use it (or its ports), not our code.
function verify(secret: string, id: string, ts: number, body: string, signature: string): unknown {
  return new Webhook(secret).verify(body, {
    'webhook-id': id,
    'webhook-timestamp': String(ts),
    'webhook-signature': signature,
  });
}

describe('signing', () => {
  const now = Math.floor(Date.now() / 1000);
  const body = JSON.stringify({ type: 'price.changed', data: { market: 'csfloat', new_price: '10.50' } });

  it('makes whsec_ secrets of 32 random bytes', () => {
    const secret = generateSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);
    expect(generateSecret()).not.toBe(secret);
  });

  it('signs as the standardwebhooks library does, and it verifies', () => {
    const secret = generateSecret();
    const sig = signPayload(secret, 'msg_1', now, body);
    expect(sig).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(sig).toBe(new Webhook(secret).sign('msg_1', new Date(now * 1000), body));
    expect(verify(secret, 'msg_1', now, body, sig)).toEqual(JSON.parse(body));
  });

  it('puts one signature per secret in the header, and either secret verifies (rotation)', () => {
    const current = generateSecret();
    const previous = generateSecret();
    const header = signatureHeader([current, previous], 'msg_2', now, body);
    expect(header.split(' ')).toHaveLength(2);
    expect(verify(current, 'msg_2', now, body, header)).toBeTruthy();
    expect(verify(previous, 'msg_2', now, body, header)).toBeTruthy();
    expect(() => verify(generateSecret(), 'msg_2', now, body, header)).toThrow();
  });

  it('fails verification when the body, id or timestamp is altered', () => {
    const secret = generateSecret();
    const header = signatureHeader([secret], 'msg_3', now, body);
    expect(() => verify(secret, 'msg_3', now, body.replace('10.50', '10.51'), header)).toThrow();
    expect(() => verify(secret, 'msg_4', now, body, header)).toThrow();
    expect(() => verify(secret, 'msg_3', now + 1, body, header)).toThrow();
  });

  it('refuses a fractional timestamp instead of signing what the receiver never reads', () => {
    expect(() => signPayload(generateSecret(), 'msg_5', 1.5, body)).toThrow(/whole seconds/);
  });
});

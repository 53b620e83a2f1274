import { AppError } from '@skinprices/domain';
import { describe, expect, it } from 'vitest';
import { SecretBox } from './secret-box.js';

const k0 = SecretBox.generateKey();
const k1 = SecretBox.generateKey();
const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

function configError(fn: () => unknown): AppError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe('config_invalid');
    expect((err as AppError).retryable).toBe(false);
    return err as AppError;
  }
  throw new Error('expected an error');
}

/** Replaces one character of one dot-separated part with another base64url character. */
function alter(sealed: string, part: number): string {
  const parts = sealed.split('.');
  const p = parts[part]!;
  parts[part] = (p[0] === 'A' ? 'B' : 'A') + p.slice(1);
  return parts.join('.');
}

describe('SecretBox', () => {
  it('makes keys of 32 bytes', () => {
    expect(Buffer.from(k0, 'base64')).toHaveLength(32);
  });

  it('opens what it sealed, with a fresh nonce each time', () => {
    const box = new SecretBox(`k1:${k1}`);
    const sealed = box.seal(secret, 'wh_a');
    expect(sealed).toMatch(/^v1\.k1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{22}$/);
    expect(sealed).not.toContain(secret);
    expect(box.open(sealed, 'wh_a')).toBe(secret);
    expect(box.seal(secret, 'wh_a')).not.toBe(sealed);
    expect(box.open(box.seal('', 'wh_a'), 'wh_a')).toBe('');
    expect(box.open(box.seal('ünïcödé ✓', 'wh_a'), 'wh_a')).toBe('ünïcödé ✓');
  });

  it('does not open with another aad (a sealed secret copied to another subscription)', () => {
    const box = new SecretBox(`k1:${k1}`);
    const err = configError(() => box.open(box.seal(secret, 'wh_a'), 'wh_b'));
    expect(err.message).toMatch(/authentication failed/);
  });

  it('does not open an altered nonce, ciphertext or tag', () => {
    const box = new SecretBox(`k1:${k1}`);
    const sealed = box.seal(secret, 'wh_a');
    for (const part of [2, 3, 4]) configError(() => box.open(alter(sealed, part), 'wh_a'));
    configError(() => box.open(sealed.replace('v1.', 'v2.'), 'wh_a'));
    configError(() => box.open(`${sealed}.x`, 'wh_a'));
    configError(() => box.open('garbage', 'wh_a'));
    configError(() => box.open(sealed.replace(/\.([^.]+)$/, '.!!!'), 'wh_a'));
  });

  it('seals with the first key and opens with any key of the ring (rotation)', () => {
    const before = new SecretBox(`k0:${k0}`);
    const sealedOld = before.seal(secret, 'wh_a');
    const after = new SecretBox(`k1:${k1},k0:${k0}`);
    expect(after.open(sealedOld, 'wh_a')).toBe(secret);
    expect(after.seal(secret, 'wh_a')).toMatch(/^v1\.k1\./);
    // Once k0 leaves the ring its secrets no longer open; the error names the key, not its bytes.
    const err = configError(() => new SecretBox(`k1:${k1}`).open(sealedOld, 'wh_a'));
    expect(err.message).toMatch(/key 'k0' is not in WEBHOOK_SECRET_KEYS/);
    // The same id with other bytes (a key replaced instead of rotated) fails authentication.
    configError(() => new SecretBox(`k0:${k1}`).open(sealedOld, 'wh_a'));
  });

  it('accepts spaces around entries', () => {
    expect(SecretBox.parseRing(` k1:${k1} , k0:${k0} `).map((k) => k.kid)).toEqual(['k1', 'k0']);
  });

  it.each([
    ['', /empty/],
    ['   ', /empty/],
    [`${k1}`, /entry 1 is not/],
    [`k1:${k1},`, /entry 2 is not/],
    [`:${k1}`, /key id/],
    [`k.1:${k1}`, /key id/],
    ['k1:', /exactly 32 bytes/],
    ['k1:not base64!', /exactly 32 bytes/],
    [`k1:${Buffer.alloc(16).toString('base64')}`, /exactly 32 bytes/],
    [`k1:${Buffer.alloc(33).toString('base64')}`, /exactly 32 bytes/],
    [`k1:${k1.slice(0, -1)}`, /exactly 32 bytes/],
    [`k1:${k1},k1:${k0}`, /appears twice/],
  ])('refuses the ring %j', (ring, why) => {
    const err = configError(() => new SecretBox(ring));
    expect(err.message).toMatch(why);
    expect(err.message).toMatch(/^WEBHOOK_SECRET_KEYS: /);
    expect(err.message).not.toContain(k0);
    expect(err.message).not.toContain(k1.slice(0, 20));
  });
});

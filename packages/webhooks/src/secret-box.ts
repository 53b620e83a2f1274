/**
 * Signing secrets at rest. A secret must be recoverable to sign with, so it cannot be hashed like
 * an API key; it is sealed with AES-256-GCM under an operator key instead, so a database dump or a
 * standby's copy alone does not let anyone forge our webhooks.
 *
 * The key ring `k1:<base64 32 bytes>,k0:<base64 32 bytes>` lets operators rotate: the first key
 * seals, every key opens, and the sealed text names its key. The additional authenticated data
 * is the subscription id, so a sealed secret copied into another row does not open there.
 *
 * Errors are `config_invalid`: a ring that does not parse, or a sealed secret the ring cannot open
 * (its key was removed, or replaced under the same id), needs an operator; retrying cannot help.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { AppError } from '@skinprices/domain';

interface RingKey {
  kid: string;
  key: Buffer;
}

const VERSION = 'v1';
const KEY_BYTES = 32;
const IV_BYTES = 12; // GCM's native nonce size: random 96-bit nonces are safe for 2^32 seals a key
const TAG_BYTES = 16;
const KID_RE = /^[A-Za-z0-9_-]{1,32}$/;
const BASE64_RE = /^[A-Za-z0-9+/]+={0,2}$/;
const BASE64URL_RE = /^[A-Za-z0-9_-]*$/;

function ringError(message: string): AppError {
  // Never the key material in a message or its details: they end up in logs.
  return new AppError('config_invalid', `WEBHOOK_SECRET_KEYS: ${message}`, {
    details: { field: 'WEBHOOK_SECRET_KEYS' },
  });
}

function parseEntry(entry: string, index: number): RingKey {
  const colon = entry.indexOf(':');
  if (colon < 0) throw ringError(`entry ${index + 1} is not '<key id>:<base64 key>'`);
  const kid = entry.slice(0, colon).trim();
  const encoded = entry.slice(colon + 1).trim();
  if (!KID_RE.test(kid)) throw ringError(`entry ${index + 1}: key id must be 1-32 of A-Z a-z 0-9 _ -`);
  const key = Buffer.from(encoded, 'base64');
  if (!BASE64_RE.test(encoded) || key.length !== KEY_BYTES || key.toString('base64') !== encoded) {
    throw ringError(`key '${kid}' must be the base64 of exactly ${KEY_BYTES} bytes`);
  }
  return { kid, key };
}

function unsealable(reason: string, kid: string | undefined): AppError {
  return new AppError('config_invalid', `sealed webhook secret does not open: ${reason}`, {
    details: kid === undefined ? {} : { kid },
  });
}

export class SecretBox {
  private readonly keys: readonly RingKey[];
  private readonly byKid: ReadonlyMap<string, Buffer>;

  constructor(ring: string) {
    this.keys = SecretBox.parseRing(ring);
    this.byKid = new Map(this.keys.map((k) => [k.kid, k.key]));
  }

  /** The ring's keys in order (the first seals); throws config_invalid naming what is wrong. */
  static parseRing(ring: string): readonly RingKey[] {
    if (ring.trim() === '') throw ringError('empty; expected k1:<base64 32 bytes>[,k0:<base64 32 bytes>…]');
    const keys = ring.split(',').map((entry, i) => parseEntry(entry, i));
    const seen = new Set<string>();
    for (const { kid } of keys) {
      if (seen.has(kid)) throw ringError(`key id '${kid}' appears twice`);
      seen.add(kid);
    }
    return keys;
  }

  /** A new operator key: base64 of 32 random bytes. */
  static generateKey(): string {
    return randomBytes(KEY_BYTES).toString('base64');
  }

  /** `v1.<kid>.<iv>.<ciphertext>.<tag>` (base64url parts), sealed with the ring's first key. */
  seal(plain: string, aad: string): string {
    const [first] = this.keys;
    if (first === undefined) throw ringError('no key');
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', first.key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(aad, 'utf8'));
    const ct = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    const parts = [VERSION, first.kid, iv, ct, cipher.getAuthTag()];
    return parts.map((p) => (typeof p === 'string' ? p : p.toString('base64url'))).join('.');
  }

  /** The plain text of `sealed`, which must have been sealed with this `aad` by a key of the ring. */
  open(sealed: string, aad: string): string {
    const parts = sealed.split('.');
    const [version, kid, iv, ct, tag] = parts;
    if (parts.length !== 5 || version !== VERSION || kid === undefined || iv === undefined || ct === undefined) {
      throw unsealable(`not a ${VERSION}.<kid>.<iv>.<ciphertext>.<tag> value`, undefined);
    }
    if (tag === undefined || ![iv, ct, tag].every((p) => BASE64URL_RE.test(p))) {
      throw unsealable('a part is not base64url', kid);
    }
    const key = this.byKid.get(kid);
    if (key === undefined) throw unsealable(`key '${kid}' is not in WEBHOOK_SECRET_KEYS`, kid);
    const ivBytes = Buffer.from(iv, 'base64url');
    const tagBytes = Buffer.from(tag, 'base64url');
    if (ivBytes.length !== IV_BYTES || tagBytes.length !== TAG_BYTES) throw unsealable('bad nonce or tag length', kid);
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, ivBytes, { authTagLength: TAG_BYTES });
      decipher.setAAD(Buffer.from(aad, 'utf8'));
      decipher.setAuthTag(tagBytes);
      return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
    } catch (cause) {
      // GCM says only "unable to authenticate": wrong aad, altered text, or another key under this id.
      throw new AppError('config_invalid', 'sealed webhook secret does not open: authentication failed', {
        cause,
        details: { kid },
      });
    }
  }
}

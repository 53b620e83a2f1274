/**
 * Signatures of the Standard Webhooks spec (https://www.standardwebhooks.com/), so receivers can
 * verify with the spec's libraries in any language instead of code of ours: HMAC-SHA256 over
 * `${id}.${timestamp}.${body}` keyed by the secret's bytes, sent as `v1,<base64>`.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { AppError } from '@skinprices/domain';

const PREFIX = 'whsec_';

/** A new signing secret: `whsec_` + base64 of 32 random bytes (the spec's recommended size). */
export function generateSecret(): string {
  return PREFIX + randomBytes(32).toString('base64');
}

function secretBytes(secret: string): Buffer {
  // The spec's libraries accept a secret with or without its prefix; so do we.
  const encoded = secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret;
  const bytes = Buffer.from(encoded, 'base64');
  if (bytes.length === 0) throw new AppError('config_invalid', 'webhook secret: empty or not base64');
  return bytes;
}

/** `v1,<base64 HMAC-SHA256>` of one message for one secret. */
export function signPayload(secret: string, msgId: string, timestampSec: number, body: string): string {
  if (!Number.isSafeInteger(timestampSec)) {
    // A fractional or huge timestamp would be signed as the receiver never reads it.
    throw new AppError('invalid_timestamp', `webhook timestamp must be whole seconds, got ${timestampSec}`);
  }
  const mac = createHmac('sha256', secretBytes(secret)).update(`${msgId}.${timestampSec}.${body}`, 'utf8');
  return `v1,${mac.digest('base64')}`;
}

/**
 * The `webhook-signature` header: one signature per secret, space-separated. During a rotation
 * both the new and the previous secret sign, and a receiver holding either verifies.
 */
export function signatureHeader(secrets: readonly string[], msgId: string, timestampSec: number, body: string): string {
  return secrets.map((s) => signPayload(s, msgId, timestampSec, body)).join(' ');
}

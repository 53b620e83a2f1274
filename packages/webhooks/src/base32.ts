/**
 * RFC 4648 base32 in lower case, without padding: ids that survive URLs, logs, double-clicks and
 * case-insensitive systems, with no characters that need escaping anywhere.
 */
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

export function base32(bytes: Uint8Array): string {
  let out = '';
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(buffer >>> (bits - 5)) & 31];
      bits -= 5;
    }
    // Keep only the bits not yet written, so the buffer never outgrows 32 bits.
    buffer &= (1 << bits) - 1;
  }
  if (bits > 0) out += ALPHABET[(buffer << (5 - bits)) & 31];
  return out;
}

import { crc32 } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { crc32Combine } from './crc32-combine.js';

describe('crc32Combine', () => {
  it('equals the CRC-32 of the concatenation, for any two byte strings', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 3_000 }), fc.uint8Array({ maxLength: 3_000 }), (a, b) => {
        const whole = crc32(Buffer.concat([a, b])) >>> 0;
        expect(crc32Combine(crc32(a), crc32(b), b.length)).toBe(whole);
      }),
      { numRuns: 300 },
    );
  });

  it('holds for lengths beyond 2^31 bits of zeros (a 300 MB piece)', () => {
    // crc(A‖Z) for a run of zeros Z is computed by zlib over the real bytes once.
    const zeros = Buffer.alloc(300 * 1024 * 1024);
    const a = Buffer.from('head');
    expect(crc32Combine(crc32(a), crc32(zeros), zeros.length)).toBe(crc32(zeros, crc32(a)) >>> 0);
  });
});

/**
 * CRC-32 of a concatenation from its parts' CRCs, for the segmented list bodies (list-segments.ts),
 * whose gzip member's CRC is combined from their pieces' instead of read over the whole body; bit
 * arithmetic of its own, tested on its own.
 *
 * CRC-32 of the concatenation A‖B from crc(A), crc(B) and B's length (zlib's crc32_combine):
 * appending n zero bytes to A is a linear map over GF(2), a 32×32 bit matrix. ZEROS[k] is the map
 * for 2^k zero bytes, computed once by squaring; a combine applies those of the bits of n
 * (a matrix-vector product each) instead of squaring matrices per call (zlib's older
 * crc32_combine), which would cost milliseconds on every patch of 130 segments.
 */
function gf2Times(mat: Uint32Array, vec: number): number {
  let sum = 0;
  for (let i = 0; vec !== 0; i++, vec >>>= 1) if (vec & 1) sum ^= mat[i] as number;
  return sum >>> 0;
}

function gf2Square(mat: Uint32Array): Uint32Array {
  const square = new Uint32Array(32);
  for (let n = 0; n < 32; n++) square[n] = gf2Times(mat, mat[n] as number);
  return square;
}

/** ZEROS[k] appends 2^k zero bytes; 48 entries cover any length a Buffer can have. */
const ZEROS: readonly Uint32Array[] = (() => {
  let op: Uint32Array = new Uint32Array(32);
  op[0] = 0xedb88320; // the CRC-32 polynomial: the map for one zero bit
  for (let n = 1; n < 32; n++) op[n] = 1 << (n - 1);
  for (let bit = 0; bit < 3; bit++) op = gf2Square(op); // one zero byte
  const table = [op];
  for (let k = 1; k < 48; k++) table.push((op = gf2Square(op)));
  return table;
})();

export function crc32Combine(crc1: number, crc2: number, len2: number): number {
  let c = crc1 >>> 0;
  for (let k = 0, len = len2; len > 0; k++, len = Math.floor(len / 2))
    if (len % 2 === 1) c = gf2Times(ZEROS[k] as Uint32Array, c);
  return (c ^ crc2) >>> 0;
}

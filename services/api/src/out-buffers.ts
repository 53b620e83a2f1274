/**
 * Buffers for the answers the hot path assembles (hot-path.ts), used again once the socket has
 * taken their bytes. A fresh 200 KB buffer per POST of 100 items was an mmap, its page faults and
 * an munmap per request (glibc maps allocations over 128 KB), and a share of the collector's work:
 * the bare-node floor, which sends one buffer again and again, pays none of it.
 */

/** Below this, Node's own pool already serves allocations without a mapping of their own. */
const SMALLEST = 16 * 1024;
/** Above this, a buffer is not kept: such answers are rare, and each would pin its size. */
const LARGEST = 4 * 1024 * 1024;
/** Free buffers kept per size, at most this many bytes' worth (and at least 4). */
const KEPT_BYTES_PER_SIZE = 4 * 1024 * 1024;

/** The size class of a request: the power of two at or above it. */
const sizeOf = (bytes: number) => 2 ** Math.ceil(Math.log2(Math.max(bytes, SMALLEST)));

export class OutputBuffers {
  private readonly free = new Map<number, Buffer[]>();

  /** A buffer of at least `bytes` bytes (uninitialised), to be given back once written out. */
  take(bytes: number): Buffer {
    if (bytes < SMALLEST) return Buffer.allocUnsafe(bytes);
    const size = sizeOf(bytes);
    return this.free.get(size)?.pop() ?? Buffer.allocUnsafeSlow(size);
  }

  /**
   * Gives back a buffer of take(), once nothing reads it any more (the response's 'finish': every
   * byte handed to the kernel). One not taken here, or too small or large to keep, is left to the
   * collector.
   */
  give(buffer: Buffer): void {
    const size = buffer.length;
    if (size < SMALLEST || size > LARGEST || size !== sizeOf(size) || buffer.byteOffset !== 0) return;
    let list = this.free.get(size);
    if (!list) this.free.set(size, (list = []));
    if (list.length < Math.max(4, KEPT_BYTES_PER_SIZE / size)) list.push(buffer);
  }
}

/**
 * Polls `probe` until it returns a value (undefined: not yet; a throw: not yet either, remembered),
 * every `everyMs`; throws with `what` and the last error after `timeoutMs`.
 */
export async function eventually<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs: number,
  everyMs = 250,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline)
      throw new Error(`${what}: not within ${timeoutMs} ms${lastError ? ` (last error: ${String(lastError)})` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

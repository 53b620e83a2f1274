/** Waits until `url` answers with a status below 500 (a process we started is up), or throws. */
export async function waitForUrl(url: string, timeoutMs = 60_000, everyMs = 200): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if ((await fetch(url)).status < 500) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${url} did not answer within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

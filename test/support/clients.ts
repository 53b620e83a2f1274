/**
 * Real clients, as customers run them: curl (with `--compressed`, as the README shows) and headless
 * Chromium (Debian's package, driven by playwright-core). Node's own fetch forgives answers these
 * do not (a second gzip member, for one), so the checks that matter to customers use these.
 */
import { execFile } from 'node:child_process';
import { chromium, type Browser } from 'playwright-core';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * curl's exit code, status and body for a GET with the key, decompressing as curl does. Async:
 * the server under test may live in this very process.
 */
export function curlGet(url: string, key: string): Promise<{ exit: number; status: number; body: string }> {
  return new Promise((resolve) => {
    execFile(
      'curl',
      ['-sS', '--compressed', '-m', '30', '-H', `x-api-key: ${key}`, '-w', '\n%{http_code}', url],
      { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 },
      (err, stdout) => {
        const cut = stdout.lastIndexOf('\n');
        const exit = err ? Number((err as { code?: unknown }).code ?? -1) : 0;
        resolve({ exit, status: Number(stdout.slice(cut + 1)), body: stdout.slice(0, cut) });
      },
    );
  });
}

/**
 * Launches headless Chromium with the flags this machine needs (no sandbox as root; no background
 * networking, which the closed network refuses many times over at every start).
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/**
 * Fetches each path from a page of `origin` (same origin, as the docs page would) in Chromium and
 * reports, per path, the status and whether the body parsed as JSON (with its length).
 */
export async function browserFetchJson(
  origin: string,
  pagePath: string,
  paths: readonly string[],
  key: string,
): Promise<{ path: string; status: number; json: boolean; length: number; error?: string }[]> {
  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    await page.goto(`${origin}${pagePath}`);
    return await page.evaluate(
      async ({ paths, key }) => {
        const out = [];
        for (const path of paths) {
          const res = await fetch(path, { headers: { 'x-api-key': key } });
          const text = await res.text();
          try {
            JSON.parse(text);
            out.push({ path, status: res.status, json: true, length: text.length });
          } catch (err) {
            out.push({ path, status: res.status, json: false, length: text.length, error: String(err) });
          }
        }
        return out;
      },
      { paths: [...paths], key },
    );
  } finally {
    await browser.close();
  }
}

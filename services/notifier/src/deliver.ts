/*
 * One delivery attempt: a signed POST to the subscription's URL, classified into an
 * AttemptOutcome (outcome.ts). Safety bounds a receiver cannot move:
 * - where: every hostname is resolved by guardedLookup (a private, loopback or link-local
 *   address refuses the connection), and an IP literal — which never goes through a lookup — is
 *   re-checked with checkWebhookUrl before each attempt, so a URL accepted yesterday still cannot
 *   reach an address the policy refuses today;
 * - redirects are never followed (undici's request() does not, and 3xx is a failure): a redirect
 *   would lead past the address check to anywhere;
 * - time: one timer covers connection, request and response, whatever the receiver trickles;
 * - size: at most RESPONSE_READ_BYTES of the response body are read, the rest is discarded.
 */
import { Agent, request } from 'undici';
import { checkWebhookUrl, guardedLookup, retryAfterMs, signatureHeader, type UrlPolicy } from '@skinprices/webhooks';
import type { AttemptOutcome } from './outcome.js';

/** Of a response body, only this much is read (kept for the delivery log's last_error). */
export const RESPONSE_READ_BYTES = 4096;
/** Of what was read, this much goes into last_error. */
export const RESPONSE_KEPT_CHARS = 256;

export const USER_AGENT = 'skinprices-webhooks/1';

/** One attempt of one message. */
export interface DeliveryRequest {
  url: string;
  messageId: string;
  body: string;
  /** The current secret first, then the previous one during a rotation's overlap. */
  secrets: readonly string[];
}

export interface DeliveryResult {
  outcome: AttemptOutcome;
  /** How long the exchange took. */
  ms: number;
}

/** A response, as the classification needs it. */
export interface ResponseSummary {
  status: number;
  retryAfter?: string;
  location?: string;
  /** The first bytes of the body, as text. */
  bodyText: string;
}

/** The outcome an HTTP response means. Pure. */
export function classifyResponse(res: ResponseSummary, now: number): AttemptOutcome {
  const { status } = res;
  if (status >= 200 && status < 300) return { kind: 'ok', status };
  const text = res.bodyText.replace(/\s+/g, ' ').trim().slice(0, RESPONSE_KEPT_CHARS);
  const error = `HTTP ${status}${text ? `: ${text}` : ''}`;
  if (status >= 300 && status < 400)
    return {
      kind: 'fail',
      status,
      error: `HTTP ${status}: redirects are not followed${res.location ? ` (to ${res.location.slice(0, 200)})` : ''}`,
    };
  if (status === 429 || status >= 500) {
    // Retry-After is honoured where RFC 9110 gives it meaning for us: 429 and 503.
    const after = status === 429 || status === 503 ? retryAfterMs(res.retryAfter, now) : undefined;
    return { kind: 'retry', status, error, ...(after === undefined ? {} : { retryAfterMs: after }) };
  }
  return { kind: 'fail', status, error };
}

/** The codes of an error and its causes (undici wraps socket errors). */
function errorCodes(err: unknown): { codes: string[]; message: string } {
  const codes: string[] = [];
  let message = '';
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') codes.push(code);
    if (!message && e instanceof Error && e.message) message = e.message;
  }
  return { codes, message: message || String(err) };
}

/**
 * The outcome an error of the exchange means. Pure. Only an address the policy refuses is final:
 * DNS failures, refused or reset connections, TLS problems and timeouts can all pass (a receiver
 * being deployed, a certificate being renewed), and 24 h of retries is what the contract promises.
 */
export function classifyError(err: unknown, timedOut: boolean, timeoutMs: number): AttemptOutcome {
  const { codes, message } = errorCodes(err);
  if (codes.includes('EBLOCKEDADDRESS'))
    return { kind: 'fail', error: `address refused: ${message} (private, loopback or reserved)` };
  if (timedOut) return { kind: 'retry', error: `timed out after ${timeoutMs} ms` };
  const code = codes[0];
  return { kind: 'retry', error: code ? `${code}: ${message}` : message };
}

/** Reads at most `limit` bytes of `body`, then lets go of the rest (the connection is closed). */
async function readBounded(body: AsyncIterable<Buffer> & { destroy(): unknown }, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    size += chunk.length;
    if (size >= limit) {
      body.destroy();
      break;
    }
  }
  return Buffer.concat(chunks).subarray(0, limit).toString('utf8');
}

const header = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v);

/** Makes delivery attempts through one connection pool whose every connection passed the address check. */
export class Deliverer {
  private readonly agent: Agent;

  constructor(
    private readonly options: {
      policy: UrlPolicy;
      /** The whole exchange's limit. @default 10000 */
      timeoutMs: number;
    },
  ) {
    this.agent = new Agent({
      connect: { lookup: guardedLookup(options.policy), timeout: options.timeoutMs },
      // Both bounded by the whole-exchange timer anyway; set so undici never waits longer alone.
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      keepAliveTimeout: 10_000,
    });
  }

  /** One attempt; never throws (every failure is an outcome). */
  async deliver(req: DeliveryRequest, now: () => number = Date.now): Promise<DeliveryResult> {
    const t0 = performance.now();
    const checked = checkWebhookUrl(req.url, this.options.policy);
    if (!checked.ok) return { outcome: { kind: 'fail', error: `URL refused: ${checked.reason}` }, ms: 0 };
    const ctl = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ctl.abort(new Error(`timed out after ${this.options.timeoutMs} ms`));
    }, this.options.timeoutMs);
    try {
      const timestamp = Math.floor(now() / 1000);
      const res = await request(checked.url, {
        method: 'POST',
        dispatcher: this.agent,
        signal: ctl.signal,
        headers: {
          'content-type': 'application/json',
          'user-agent': USER_AGENT,
          'webhook-id': req.messageId,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signatureHeader(req.secrets, req.messageId, timestamp, req.body),
        },
        body: req.body,
      });
      // The status decides; a body that breaks off (or outlasts the timer) changes nothing: a 2xx
      // was accepted whatever follows it.
      const bodyText = await readBounded(res.body, RESPONSE_READ_BYTES).catch(() => {
        res.body.destroy();
        return '';
      });
      const retryAfter = header(res.headers['retry-after']);
      const location = header(res.headers.location);
      const summary = {
        status: res.statusCode,
        bodyText,
        ...(retryAfter === undefined ? {} : { retryAfter }),
        ...(location === undefined ? {} : { location }),
      };
      return { outcome: classifyResponse(summary, now()), ms: performance.now() - t0 };
    } catch (err) {
      return { outcome: classifyError(err, timedOut, this.options.timeoutMs), ms: performance.now() - t0 };
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    await this.agent.destroy();
  }
}

/**
 * When to try a failed delivery again. Exponential with "equal jitter": the delay doubles per
 * failure up to an hour, and half of it is random, so receivers that come back after an outage
 * are not hit by every message at the same instant, yet no retry comes sooner than half the step.
 */
import { HOUR_MS } from '@skinprices/domain';

/** A message is retried at least this long after its first attempt, then marked failed. */
export const RETRY_HORIZON_MS: number = 24 * HOUR_MS;

const BASE_MS = 5_000;
const MIN_RETRY_AFTER_MS = 1_000;
const MAX_DELAY_MS = HOUR_MS;
// 5 s · 2^10 already exceeds an hour; capping the exponent keeps 2^n finite for any attempt.
const MAX_EXPONENT = 20;

/**
 * Delay after failed attempt number `attempt` (1 = the first): min(1 h, 5 s·2^(attempt-1)) ×
 * (0.5 + random()/2). `random` is injected so tests and the dispatcher's caller choose the source.
 */
export function retryDelayMs(attempt: number, random: () => number): number {
  const exponent = Math.min(Math.max(Math.floor(attempt), 1) - 1, MAX_EXPONENT);
  const step = Math.min(MAX_DELAY_MS, BASE_MS * 2 ** exponent);
  const r = Math.min(Math.max(random(), 0), 1);
  return Math.round(step * (0.5 + r / 2));
}

// The three forms RFC 9110 §5.6.7 says a recipient must accept; anything else (Date.parse takes
// almost anything, "1" included) is garbage, not a date.
const IMF_FIXDATE = /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/;
const RFC850_DATE = /^[A-Z][a-z]{5,8}, \d{2}-[A-Z][a-z]{2}-\d{2} \d{2}:\d{2}:\d{2} GMT$/;
const ASCTIME_DATE = /^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/;

function parseHttpDate(value: string): number | undefined {
  if (!IMF_FIXDATE.test(value) && !RFC850_DATE.test(value) && !ASCTIME_DATE.test(value)) return undefined;
  // asctime carries no zone and means GMT; Date.parse would read it as local time.
  const ms = Date.parse(ASCTIME_DATE.test(value) ? `${value} GMT` : value);
  return Number.isNaN(ms) ? undefined : ms;
}

/**
 * A receiver's Retry-After (delta-seconds or an HTTP-date) as a delay from `now` (epoch ms),
 * clamped to [1 s, 1 h]: a receiver may slow us down, but not stall a message for days nor make
 * us hammer it. Undefined when absent or unreadable (the caller uses retryDelayMs then).
 */
export function retryAfterMs(header: string | undefined, now: number): number | undefined {
  if (header === undefined) return undefined;
  const value = header.trim();
  let delay: number;
  if (/^\d+$/.test(value)) delay = Number(value) * 1000;
  else {
    const at = parseHttpDate(value);
    if (at === undefined) return undefined;
    delay = at - now;
  }
  return Math.min(MAX_DELAY_MS, Math.max(MIN_RETRY_AFTER_MS, delay));
}

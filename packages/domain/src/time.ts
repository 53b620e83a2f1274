/** Time in the spec's format: ISO 8601 UTC with milliseconds, `YYYY-MM-DDTHH:mm:ss.sssZ`. */
import { AppError } from './errors.js';

export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

const TIMESTAMP_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
// Years outside 0000..9999 would print as ±YYYYYY and break the spec's format.
const MIN_MS = Date.parse('0000-01-01T00:00:00.000Z');
const MAX_MS = Date.parse('9999-12-31T23:59:59.999Z');

export function formatTimestamp(at: number | Date): string {
  const ms = typeof at === 'number' ? at : at.getTime();
  if (!Number.isFinite(ms) || ms < MIN_MS || ms > MAX_MS) {
    throw new AppError('invalid_timestamp', `timestamp out of range: ${String(at)}`);
  }
  return new Date(ms).toISOString();
}

/** Parses exactly the spec's format (and rejects impossible dates such as Feb 30). */
export function parseTimestamp(value: string): number {
  if (!TIMESTAMP_RE.test(value)) {
    throw new AppError('invalid_timestamp', `not a YYYY-MM-DDTHH:mm:ss.sssZ timestamp: '${value}'`);
  }
  const ms = Date.parse(value);
  if (Number.isNaN(ms) || new Date(ms).toISOString() !== value) {
    throw new AppError('invalid_timestamp', `not a valid date: '${value}'`);
  }
  return ms;
}

export function startOfUtcHour(ms: number): number {
  return Math.floor(ms / HOUR_MS) * HOUR_MS;
}

export function startOfUtcDay(ms: number): number {
  return Math.floor(ms / DAY_MS) * DAY_MS;
}

/** `YYYY-MM-DD` of the UTC day containing `ms`. */
export function utcDate(ms: number): string {
  return formatTimestamp(startOfUtcDay(ms)).slice(0, 10);
}

import type { IncomingHttpHeaders } from 'node:http';
import type { MarketSlug } from '@skinprices/domain';
import type { SimClock } from '../clock.js';
import type { Extras } from '../extras.js';
import type { MarketModel } from '../model.js';

export interface SimContext {
  model: MarketModel;
  extras: Extras;
  clock: SimClock;
  market: MarketSlug;
}

/** What a route answers; the server adds faults on top. */
export interface UpstreamResponse {
  status: number;
  body: unknown;
  /** Extra response headers (rate-limit headers, Retry-After where the real upstream sends one). */
  headers?: Record<string, string>;
  /** Compress the body this way (Skinport answers only in Brotli). */
  encoding?: 'br';
}

/** The parts of the request a route may look at (Accept-Encoding, Authorization). */
interface RouteRequest {
  headers: IncomingHttpHeaders;
}

export type Route = (ctx: SimContext, query: URLSearchParams, req: RouteRequest) => UpstreamResponse;

export const ok = (body: unknown): UpstreamResponse => ({ status: 200, body });
export const badRequest = (message: string): UpstreamResponse => ({ status: 400, body: { error: message } });

/** Integer query parameter within bounds, or the default. */
export function intParam(q: URLSearchParams, name: string, def: number, min: number, max: number): number {
  const raw = q.get(name);
  if (raw === null || raw === '') return def;
  const n = Number(raw);
  if (!Number.isInteger(n)) return Number.NaN;
  return Math.min(max, Math.max(min, n));
}

/** Decimal string the way some upstreams print it: no trailing zeros ("12.50" → "12.5", "3.00" → "3"). */
export function trimDecimal(minor: number): string {
  const whole = Math.floor(minor / 100);
  const frac = String(minor % 100)
    .padStart(2, '0')
    .replace(/0+$/, '');
  return frac ? `${whole}.${frac}` : String(whole);
}

/**
 * Keys, plans, endpoint ACLs and rate limits, checked in one onRequest hook before any handler
 * (or validation) runs: a refused request costs an in-memory lookup and nothing else.
 */
import type { FastifyRequest } from 'fastify';
import { ApiError } from './errors.js';
import type { ApiKey, KeyStore } from './keys.js';
import type { FailedAuthLimiter, RateLimiter, Verdict } from './limits.js';
import type { ApiMetrics } from './metrics.js';
import { keyFromCookie } from './pages/status-page.js';
import { planFor, planIncludes } from './plans.js';

const AUTH_FAILURES = {
  missing: ['key_missing', 'an API key is required: send it as x-api-key or Authorization: Bearer'],
  invalid: ['key_invalid', 'the API key is not valid'],
  disabled: ['key_disabled', 'the API key is disabled'],
  expired: ['key_expired', 'the API key has expired'],
} as const;

function presentedKey(req: FastifyRequest): string | undefined {
  const header = req.headers['x-api-key'];
  if (typeof header === 'string' && header.trim()) return header.trim();
  const auth = req.headers.authorization;
  const m = auth ? /^Bearer\s+(\S+)\s*$/i.exec(auth) : null;
  return m?.[1] ?? keyFromCookie(req);
}

export interface AuthDeps {
  keys: KeyStore;
  limiter: RateLimiter;
  failedAuth: FailedAuthLimiter;
  metrics: ApiMetrics;
  clock: () => number;
}

const limitText = (key: ApiKey, window: 'second' | 'minute' | 'day') =>
  window === 'second'
    ? `${key.perSecond} per second`
    : window === 'minute'
      ? `${key.perMinute} per minute`
      : `${key.perDay} per day`;

/** The limiter's verdict reached by the hot path for a request it handed on (hot-path.ts): used, not counted again. */
export const DECIDED = Symbol('rate limit verdict');

/** The 429 of a request over one of its key's limits. */
const limitRefusal = (key: ApiKey, verdict: Extract<Verdict, { ok: false }>): ApiError =>
  new ApiError(
    429,
    'rate_limited',
    `rate limit exceeded (${limitText(key, verdict.window)}); retry after ${verdict.retryAfterS} s`,
    { 'retry-after': String(verdict.retryAfterS) },
  );

/** The onRequest hook: sets `req.apiKey` on routes with an endpoint id, or throws the refusal. */
export function authHook(d: AuthDeps) {
  return async (req: FastifyRequest): Promise<void> => {
    const endpoint = req.routeOptions.config.endpoint;
    if (!endpoint) return;
    const key = await d.keys.authenticate(presentedKey(req));
    if (typeof key === 'string') {
      // Guessing is limited per address; a valid key from the same address still passes (a
      // customer behind one NAT with a misconfigured client keeps working). Refusals stay cheap:
      // authentication is an in-memory lookup (keys.ts).
      d.failedAuth.record(req.ip, d.clock());
      const wait = d.failedAuth.blockedFor(req.ip, d.clock());
      d.metrics.authFailures.inc({ reason: wait > 0 ? 'throttled' : key });
      if (wait > 0)
        throw new ApiError(
          429,
          'auth_rate_limited',
          `too many failed authentications from this address (${d.failedAuth.perMinute} a minute); retry after ${wait} s`,
          { 'retry-after': String(wait) },
        );
      const [code, message] = AUTH_FAILURES[key];
      throw new ApiError(401, code, message, { 'www-authenticate': 'ApiKey header="x-api-key"' });
    }
    const market = (req.params as { market?: string }).market;
    const need = planFor(endpoint, market);
    if (!planIncludes(key.plan, need))
      throw new ApiError(403, 'plan_required', `this endpoint needs the ${need} plan; the key's plan is ${key.plan}`);
    if (key.allowedEndpoints && !key.allowedEndpoints.includes(endpoint))
      throw new ApiError(403, 'endpoint_not_allowed', `the key is not allowed to call ${endpoint}`);
    // A request the hot path handed on was counted there (hot-path.ts): its verdict stands.
    const decided = (req.raw as unknown as Record<symbol, Promise<Verdict> | undefined>)[DECIDED];
    const verdict = await (decided ?? d.limiter.hit(key, d.clock()));
    if (!verdict.ok) {
      d.metrics.rateLimited.inc({ window: verdict.window });
      throw limitRefusal(key, verdict);
    }
    req.apiKey = key;
  };
}

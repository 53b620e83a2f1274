/** Query and path parameters shared by the route modules: each refusal names its parameter. */
import { isMarketSlug, type MarketSlug } from '@skinprices/domain';
import { ApiError, badParameter } from './errors.js';

/** Comma-separated or repeated `markets`, each a known slug among `allowed`. */
export function parseMarkets(value: unknown, allowed: readonly MarketSlug[]): MarketSlug[] {
  if (value === undefined || value === '') return [...allowed];
  const list: unknown[] = Array.isArray(value) ? value : [value];
  if (!list.every((v): v is string => typeof v === 'string'))
    throw badParameter('markets', 'a comma-separated string or an array of strings');
  const parts = list
    .flatMap((v) => v.split(','))
    .map((s) => s.trim())
    .filter(Boolean);
  for (const p of parts)
    if (!allowed.includes(p as MarketSlug)) throw badParameter('markets', `'${p}' is not one of ${allowed.join(', ')}`);
  return [...new Set(parts)] as MarketSlug[];
}

export function requiredString(q: Record<string, unknown>, name: string): string {
  const v = q[name];
  if (typeof v !== 'string' || v.trim() === '') throw badParameter(name, 'required');
  if (v.length > 300) throw badParameter(name, 'at most 300 characters');
  return v;
}

export function optionalInt(q: Record<string, unknown>, name: string): number | undefined {
  const v = q[name];
  if (v === undefined || v === '') return undefined;
  if (typeof v !== 'string' || !/^-?\d{1,9}$/.test(v)) throw badParameter(name, 'must be an integer');
  return Number(v);
}

export function marketParam(value: string, allowed: readonly MarketSlug[]): MarketSlug {
  if (!isMarketSlug(value) || !allowed.includes(value))
    throw new ApiError(404, 'not_found', `no such marketplace on this endpoint: '${value}'`);
  return value;
}

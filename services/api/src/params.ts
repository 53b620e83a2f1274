/** Query and path parameters shared by the route modules: each refusal names its parameter. */
import type { MarketSlug } from '@skinprices/domain';
import { badParameter } from './errors.js';

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

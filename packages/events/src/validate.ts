/**
 * Checks an event before it is encoded: the Avro shape (with the path of every bad field) and
 * the money rules Avro cannot express: every price is a decimal string > 0, every float value a
 * decimal in [0, 1]. A bad event is refused at the producer with a clear error, so no zero or
 * malformed price ever reaches a topic.
 */
import { AppError, Dec, parseDecimal, parsePrice } from '@skinprices/domain';
import type avro from 'avsc';

const PRICE_FIELDS = new Set(['price', 'blue_price', 'first_price', 'fifth_price', 'old_price', 'new_price']);
const UNIT_INTERVAL_FIELDS = new Set(['float_min', 'float_max', 'float_value', 'wear']);

function checkMoney(value: unknown, path: string, problems: string[]): void {
  if (Array.isArray(value)) {
    value.forEach((v, i) => checkMoney(v, `${path}[${i}]`, problems));
    return;
  }
  if (value === null || typeof value !== 'object') return;
  for (const [field, v] of Object.entries(value as Record<string, unknown>)) {
    const here = path ? `${path}.${field}` : field;
    if (v === null || v === undefined) continue;
    try {
      if (PRICE_FIELDS.has(field)) parsePrice(v, here);
      else if (UNIT_INTERVAL_FIELDS.has(field)) {
        const d = parseDecimal(v, here);
        if (d.lessThan(0) || d.greaterThan(new Dec(1)))
          problems.push(`${here}: must be within [0, 1], got ${String(v)}`);
      } else if (typeof v === 'object') checkMoney(v, here, problems);
    } catch (err) {
      problems.push(err instanceof Error ? err.message : String(err));
    }
  }
}

export function validateEvent(kind: string, type: avro.Type, value: unknown): void {
  const problems: string[] = [];
  type.isValid(value, {
    errorHook: (path: string[], v: unknown) => {
      problems.push(`${path.join('.') || '(root)'}: ${JSON.stringify(v) ?? 'undefined'} does not match the schema`);
    },
  });
  checkMoney(value, '', problems);
  if (problems.length > 0) {
    throw new AppError('serde_invalid_event', `invalid ${kind} event: ${problems.join('; ')}`, {
      details: { kind, problems },
    });
  }
}

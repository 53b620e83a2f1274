/**
 * Checks an event before it is encoded: the Avro shape (with the path of every bad field) and
 * the money rules Avro cannot express: every price is a decimal string > 0, every float value a
 * decimal in [0, 1]. A bad event is refused at the producer with a clear error, so no zero or
 * malformed price ever reaches a topic.
 */
import { AppError, Dec, parseDecimal, parsePrice } from '@skinprices/domain';
import type avro from 'avsc';

const PRICE_FIELDS = new Set([
  'price',
  'blue_price',
  'first_price',
  'fifth_price',
  'old_price',
  'new_price',
  // An hour's candle (history-hours.v1).
  'open',
  'high',
  'low',
  'close',
]);
const UNIT_INTERVAL_FIELDS = new Set(['float_min', 'float_max', 'float_value', 'wear']);

// The shapes every well-formed event uses, checked without building a Decimal (that was most of
// validation's cost on the produce path); anything else goes the full way and gets its message.
const PLAIN_POSITIVE = /^(?:[1-9]\d*(?:\.\d+)?|0\.\d*[1-9]\d*)$/;
const PLAIN_UNIT = /^(?:0(?:\.\d+)?|1(?:\.0+)?)$/;

function checkMoney(value: unknown, path: string, problems: string[]): void {
  if (Array.isArray(value)) {
    value.forEach((v, i) => checkMoney(v, `${path}[${i}]`, problems));
    return;
  }
  if (value === null || typeof value !== 'object') return;
  for (const field in value as Record<string, unknown>) {
    const v = (value as Record<string, unknown>)[field];
    if (v === null || v === undefined) continue;
    const price = PRICE_FIELDS.has(field);
    const unit = !price && UNIT_INTERVAL_FIELDS.has(field);
    if (!price && !unit && typeof v !== 'object') continue;
    if (typeof v === 'string' && ((price && PLAIN_POSITIVE.test(v)) || (unit && PLAIN_UNIT.test(v)))) continue;
    const here = path ? `${path}.${field}` : field;
    try {
      if (price) parsePrice(v, here);
      else if (unit) {
        const d = parseDecimal(v, here);
        if (d.lessThan(0) || d.greaterThan(new Dec(1)))
          problems.push(`${here}: must be within [0, 1], got ${String(v)}`);
      } else checkMoney(v, here, problems);
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

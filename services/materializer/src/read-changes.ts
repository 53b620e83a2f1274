/**
 * What a transaction changed, for the read model's change position (migration 0019). Rows of the
 * keyed tags — `listing:<market>` and `scores` — are noted by the tables' own triggers, only when a
 * served value changed; every other tag names no rows and its readers rebuild what depends on it,
 * so the ingest and derive paths note those here. At COMMIT the noted changes draw their positions
 * and NOTIFY wakes the readers; a transaction that rolls back notes nothing.
 */
import { readTag } from '@skinprices/domain';
import type { PoolClient } from '@skinprices/store';

/** Tags whose rows the triggers note: a whole-tag entry would make every reader of them rebuild. */
const KEYED = [readTag('LISTINGS', ''), 'scores'];

/** The tags the triggers do not cover, of those given. */
function wholeTags(tags: Iterable<string>): string[] {
  return [...new Set(tags)].filter((t) => !KEYED.some((k) => (k.endsWith(':') ? t.startsWith(k) : t === k)));
}

/** Notes `tags` (those the triggers do not cover) as changed by the running transaction. */
export async function noteReadChanges(client: PoolClient, tags: Iterable<string>): Promise<void> {
  const whole = wholeTags(tags);
  if (whole.length > 0) await client.query('SELECT note_read_changes($1::text[])', [whole]);
}

/** A listing batch's candles (history) moved even when no served row did. */
export const candlesTag = (market: string): string => `candles:${market}`;

/**
 * The change feed's cursor: `<epoch>-<seq>`, opaque to customers. The epoch names one change log
 * (a rebuilt read model starts another whose numbers restart); seq is a position in it.
 */
import { ApiError, badParameter } from '../errors.js';
import type { LogState } from './log.js';

export interface Cursor {
  epoch: string;
  seq: bigint;
}

const FORMAT = /^([0-9a-f]{12})-(\d{1,19})$/;

export const formatCursor = (epoch: string, seq: bigint): string => `${epoch}-${seq.toString()}`;

/** Parses a cursor a customer sent back (`since` or Last-Event-ID); `name` is for the error. */
export function parseCursor(value: string, name: string): Cursor {
  const m = FORMAT.exec(value.trim());
  if (!m) throw badParameter(name, "a cursor from an earlier answer (next_cursor or an event id), or 'now'");
  return { epoch: m[1] as string, seq: BigInt(m[2] as string) };
}

/**
 * Where reading starts for a cursor, against the log as it is: refuses (410) a cursor of another
 * log or one retention has overtaken — continuing from either would skip changes without a word —
 * and (400) one beyond the head, which no answer of this log can have handed out.
 */
export function startAfter(cursor: Cursor, log: LogState): bigint {
  if (cursor.epoch !== log.epoch)
    throw new ApiError(
      410,
      'cursor_expired',
      'the cursor belongs to a change log that no longer exists (the read model was rebuilt): read the lists again and continue with since=now',
    );
  if (cursor.seq < log.prunedThrough)
    throw new ApiError(
      410,
      'cursor_expired',
      'the cursor is older than the change log keeps: read the lists again and continue with since=now',
    );
  if (cursor.seq > log.head) throw badParameter('since', 'the cursor is ahead of the change log');
  return cursor.seq;
}

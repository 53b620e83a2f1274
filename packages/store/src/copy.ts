/**
 * Bulk load with COPY … FROM STDIN (pg-copy-streams) in PostgreSQL's text format, streamed with
 * back-pressure, and bulk read with COPY … TO STDOUT.
 */
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { AppError } from '@skinprices/domain';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import { ident, isTransientPgError, type PoolClient } from './pool.js';

/** A value COPY can carry: text, integers, booleans, dates; null becomes SQL NULL. */
export type CopyValue = string | number | bigint | boolean | Date | null | undefined;

/**
 * One field in COPY text format. Backslash, tab, newline and carriage return are escaped; every
 * other character (including ™ and ★) passes as UTF-8. Numbers are accepted only as integers:
 * prices arrive here as decimal strings.
 */
export function copyField(value: CopyValue): string {
  if (value === null || value === undefined) return '\\N';
  if (typeof value === 'string') {
    return value.replace(/[\\\t\n\r]/g, (c) => (c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : '\\r'));
  }
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) {
      throw new AppError('copy_failed', `COPY refuses non-integer number ${value}; pass decimals as strings`, {
        retryable: false,
      });
    }
    return String(value);
  }
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'boolean') return value ? 't' : 'f';
  return value.toISOString();
}

export function copyLine(row: readonly CopyValue[]): string {
  return `${row.map(copyField).join('\t')}\n`;
}

/**
 * Streams rows into `table (columns)`. `rows` may be an array or any (async) iterable, so a
 * large batch is never held twice in memory. Runs on the caller's client, inside the caller's
 * transaction if one is open. Returns the number of rows PostgreSQL reports.
 */
export async function copyRows(
  client: PoolClient,
  table: string,
  columns: readonly string[],
  rows: Iterable<readonly CopyValue[]> | AsyncIterable<readonly CopyValue[]>,
): Promise<number> {
  const target = table.split('.').map(ident).join('.');
  const sql = `COPY ${target} (${columns.map(ident).join(', ')}) FROM STDIN`;
  const stream = client.query(copyFrom(sql));
  async function* lines(): AsyncGenerator<string> {
    // Group lines into ~64 KiB chunks: one stream write per row costs more than the row.
    let chunk = '';
    for await (const row of rows) {
      if (row.length !== columns.length) {
        throw new AppError('copy_failed', `row has ${row.length} values for ${columns.length} columns`, {
          retryable: false,
        });
      }
      chunk += copyLine(row);
      if (chunk.length >= 65_536) {
        yield chunk;
        chunk = '';
      }
    }
    if (chunk) yield chunk;
  }
  try {
    await pipeline(Readable.from(lines()), stream);
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw new AppError('copy_failed', `COPY into ${table} failed: ${String(err)}`, {
      cause: err,
      // A dropped connection is worth another try; a row PostgreSQL refuses is not.
      retryable: isTransientPgError(err),
    });
  }
  return stream.rowCount;
}

/** Streams the output of `COPY (query) TO STDOUT WITH (…)`; e.g. CSV for exports. */
export function copyOut(client: PoolClient, sql: string): Readable {
  return client.query(copyTo(sql));
}

/**
 * The 24 h sales export (spec 4.11): a ZIP of three CSV files, each streamed straight from
 * PostgreSQL (COPY … TO STDOUT, CSV with a header) into archiver. The three COPYs run in one
 * REPEATABLE READ transaction, so the files describe the same snapshot.
 *
 * Columns (also in the OpenAPI description of the endpoint):
 *   sales.csv      market, sale_id, market_hash_name, phase, currency, price, sold_at,
 *                  float_value, paint_index, paint_seed, sticker_count, keychain_count
 *   stickers.csv   market, sale_id, slot, sticker_name, wear
 *   keychains.csv  market, sale_id, slot, keychain_name, pattern
 * (market, sale_id) joins the files. Prices are decimal strings in the marketplace's currency;
 * sold_at is ISO 8601 UTC with milliseconds; empty fields are NULL (no float, no wear …).
 * The window is [window_start, window_end): exactly 24 hours.
 */
import { PassThrough } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ZipArchive } from 'archiver';
import { copyOut, type Pool } from '@skinprices/store';

export const EXPORT_FILES = ['sales.csv', 'stickers.csv', 'keychains.csv'] as const;
export const WINDOW_MS = 24 * 3_600_000;

const ISO = `to_char(s.sold_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** Literal timestamps: COPY takes no bind parameters. Dates are formatted by us, never input. */
const lit = (d: Date): string => `'${d.toISOString()}'::timestamptz`;

function queries(from: Date, to: Date): Record<(typeof EXPORT_FILES)[number], string> {
  const window = `s.sold_at >= ${lit(from)} AND s.sold_at < ${lit(to)}`;
  return {
    'sales.csv': `SELECT s.market, s.sale_id, s.market_hash_name, s.phase, s.currency, s.price, ${ISO} AS sold_at,
                         s.float_value, s.paint_index, s.paint_seed,
                         jsonb_array_length(s.stickers) AS sticker_count, jsonb_array_length(s.charms) AS keychain_count
                  FROM sales s WHERE ${window} ORDER BY s.sold_at, s.market, s.sale_id`,
    'stickers.csv': `SELECT s.market, s.sale_id, (x->>'slot')::int AS slot, x->>'name' AS sticker_name, x->>'wear' AS wear
                     FROM sales s CROSS JOIN LATERAL jsonb_array_elements(s.stickers) x
                     WHERE ${window} ORDER BY s.sold_at, s.market, s.sale_id, 3`,
    'keychains.csv': `SELECT s.market, s.sale_id, (x->>'slot')::int AS slot, x->>'name' AS keychain_name,
                             (x->>'pattern')::int AS pattern
                      FROM sales s CROSS JOIN LATERAL jsonb_array_elements(s.charms) x
                      WHERE ${window} ORDER BY s.sold_at, s.market, s.sale_id, 3`,
  };
}

export interface BuiltExport {
  windowStart: Date;
  windowEnd: Date;
  sales: number;
  bytes: Buffer;
}

/** Builds the export of the sales sold in [to − 24 h, to). */
export async function buildSalesExport(pool: Pool, to: Date): Promise<BuiltExport> {
  const from = new Date(to.getTime() - WINDOW_MS);
  const client = await pool.connect();
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const { rows } = await client.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM sales WHERE sold_at >= $1 AND sold_at < $2',
      [from, to],
    );
    const zip = new ZipArchive({ zlib: { level: 6 } });
    const sink = new PassThrough();
    const chunks: Buffer[] = [];
    sink.on('data', (c: Buffer) => chunks.push(c));
    const done = new Promise<void>((resolve, reject) => {
      sink.on('end', resolve);
      zip.on('error', reject);
    });
    zip.pipe(sink);
    const q = queries(from, to);
    // One entry stream per file, filled one COPY at a time: a client runs one query at a time, and
    // archiver reads its entries in order, so each COPY starts when the previous file is written.
    const entries = EXPORT_FILES.map(() => new PassThrough());
    EXPORT_FILES.forEach((name, i) => zip.append(entries[i] as PassThrough, { name, date: to }));
    const finalized = zip.finalize();
    for (const [i, name] of EXPORT_FILES.entries())
      await pipeline(
        copyOut(client, `COPY (${q[name]}) TO STDOUT WITH (FORMAT csv, HEADER)`),
        entries[i] as PassThrough,
      );
    await finalized;
    await done;
    await client.query('COMMIT');
    return { windowStart: from, windowEnd: to, sales: rows[0]?.n ?? 0, bytes: Buffer.concat(chunks) };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

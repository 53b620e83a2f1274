/**
 * Versioned SQL migrations: files `NNNN_name.sql` in a folder, each applied once, in order,
 * inside its own transaction together with its row in `schema_migrations`. A second run is a
 * no-op. Editing a migration that was already applied is refused (checksum), because the
 * database would silently differ from what the file says.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AppError } from '@skinprices/domain';
import type { Pool } from './pool.js';

export interface Migration {
  version: number;
  name: string;
  sql: string;
  checksum: string;
}

export interface MigrationResult {
  applied: Migration[];
  alreadyApplied: number;
}

const FILE_RE = /^(\d{4,})_([a-z0-9_]+)\.sql$/;
// Any fixed number shared by all migrators: concurrent starters of several services queue up
// on it instead of applying the same file twice.
const LOCK_ID = 7_202_611;

/**
 * Whether a migration run holds the migrators' lock now (any schema of the database). A reader
 * whose query failed because a relation, column or function it reads is missing or being
 * replaced asks this to tell a schema still being migrated (try again shortly) from a defect.
 * pg_advisory_lock(bigint) shows in pg_locks as classid (high 32 bits), objid (low), objsubid 1.
 */
export const MIGRATION_RUNNING_SQL = `SELECT EXISTS (
  SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = 0 AND objid = ${LOCK_ID} AND objsubid = 1 AND granted
) AS running`;

export async function loadMigrations(dir: string): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const migrations: Migration[] = [];
  const seen = new Set<number>();
  for (const file of files) {
    const m = FILE_RE.exec(file);
    if (!m) throw new AppError('migration_failed', `migration file '${file}' is not named NNNN_name.sql`);
    const version = Number(m[1]);
    if (seen.has(version)) throw new AppError('migration_failed', `two migrations have version ${version}`);
    seen.add(version);
    const sql = await readFile(join(dir, file), 'utf8');
    migrations.push({ version, name: m[2] as string, sql, checksum: createHash('sha256').update(sql).digest('hex') });
  }
  return migrations;
}

/**
 * Applies the pending migrations of `dir` to the pool's schema (its search_path).
 * Holds a session advisory lock for the whole run.
 */
export async function migrate(pool: Pool, dir: string): Promise<MigrationResult> {
  const migrations = await loadMigrations(dir);
  const client = await pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [LOCK_ID]);
    try {
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version integer PRIMARY KEY,
        name text NOT NULL,
        checksum text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`);
      const { rows } = await client.query<{ version: number; checksum: string }>(
        'SELECT version, checksum FROM schema_migrations',
      );
      const done = new Map(rows.map((r) => [r.version, r.checksum]));
      const applied: Migration[] = [];
      for (const mig of migrations) {
        const sum = done.get(mig.version);
        if (sum !== undefined) {
          if (sum !== mig.checksum) {
            throw new AppError(
              'migration_checksum_mismatch',
              `migration ${mig.version}_${mig.name} was changed after it was applied; add a new migration instead`,
            );
          }
          continue;
        }
        try {
          await client.query('BEGIN');
          await client.query(mig.sql);
          await client.query('INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)', [
            mig.version,
            mig.name,
            mig.checksum,
          ]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK');
          throw new AppError('migration_failed', `migration ${mig.version}_${mig.name} failed: ${String(err)}`, {
            cause: err,
          });
        }
        applied.push(mig);
      }
      return { applied, alreadyApplied: migrations.length - applied.length };
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [LOCK_ID]);
    }
  } finally {
    client.release();
  }
}

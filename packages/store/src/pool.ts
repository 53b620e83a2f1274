/**
 * PostgreSQL access: pools bound to a schema, and creating the project's database when missing.
 */
import { AppError } from '@skinprices/domain';
import pg from 'pg';

// NUMERIC and BIGINT come back as strings (pg's default for NUMERIC; made explicit here):
// a price must never pass through a JS number on its way out of the database.
pg.types.setTypeParser(pg.types.builtins.NUMERIC, (v) => v);
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => v);

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

export interface PoolOptions {
  /** postgres://user:password@host:port/database */
  databaseUrl: string;
  /** Schema put first on the search_path of every connection (tests use one each). */
  schema?: string;
  /** @default 10 */
  max?: number;
  /** Name shown in pg_stat_activity. */
  applicationName?: string;
  /**
   * The longest a query waits for a connection: a free one of the pool's, or a new one being
   * opened. @default 10000
   */
  acquireTimeoutMs?: number;
}

const IDENT = /^[a-z_][a-z0-9_]{0,62}$/;

/** Quotes an identifier we build ourselves; refuses anything that is not a plain lower-case name. */
export function ident(name: string): string {
  if (!IDENT.test(name)) throw new AppError('config_invalid', `not a plain SQL identifier: '${name}'`);
  return `"${name}"`;
}

export function createPool(options: PoolOptions): Pool {
  const pool = new pg.Pool({
    connectionString: options.databaseUrl,
    max: options.max ?? 10,
    application_name: options.applicationName ?? 'skinprices',
    connectionTimeoutMillis: options.acquireTimeoutMs ?? 10_000,
    // JIT off: PostgreSQL compiles a query once its estimated cost passes jit_above_cost, and
    // estimates over a table partitioned by day (listing_hourly: ~100 partitions) pass it easily.
    // The market cap's hourly query then spent 3.2 s compiling to run for 20 ms (jit off: 20 ms),
    // on every complete CNY listings cycle. Our statements are short and many: never worth it.
    options: `-c jit=off${options.schema ? ` -c search_path=${ident(options.schema)},public` : ''}`,
  });
  // An idle client losing its connection (server restart) must not crash the process;
  // the next query reconnects.
  pool.on('error', () => undefined);
  return pool;
}

/**
 * Creates `schema` when missing. A pool's search_path names its schema first; until the schema
 * exists PostgreSQL silently falls through to `public`, so services call this before migrating.
 */
export async function ensureSchema(pool: Pool, schema: string): Promise<void> {
  await pool.query(`CREATE SCHEMA IF NOT EXISTS ${ident(schema)}`);
}

/**
 * pg-pool's error when a query waited `acquireTimeoutMs` for one of the pool's connections, every
 * one of them busy (it has no code: its message is the one sign). Not the server's fault and not
 * the query's: the process asked for more at once than its pool holds.
 */
export function isPoolBusy(err: unknown): boolean {
  return err instanceof Error && err.message === 'timeout exceeded when trying to connect';
}

/** True for errors where waiting and retrying can help (server away, too many connections). */
export function isTransientPgError(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code ?? '';
  return (
    ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', '57P01', '57P02', '57P03', '53300', '40001', '40P01'].includes(
      code,
    ) ||
    code.startsWith('08') ||
    isPoolBusy(err)
  );
}

/**
 * Creates the database named in `databaseUrl` when it does not exist, connecting to the
 * server's `postgres` database to do so. Says clearly what to do when no server answers.
 */
export async function ensureDatabase(databaseUrl: string): Promise<{ created: boolean; database: string }> {
  const url = new URL(databaseUrl);
  const database = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!database) throw new AppError('config_invalid', `DATABASE_URL names no database: ${redact(databaseUrl)}`);
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
  } catch (err) {
    throw new AppError(
      'db_unavailable',
      `no PostgreSQL answers at ${url.host} (${String(err)}). Run \`make up\` (it starts the ` +
        `project's own, on 127.0.0.1:5442) or set DATABASE_URL to a server that runs.`,
      { cause: err },
    );
  }
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (found.rowCount) return { created: false, database };
    await client.query(`CREATE DATABASE "${database.replaceAll('"', '""')}"`);
    return { created: true, database };
  } catch (err) {
    // Two processes creating it at once: the loser sees duplicate_database (42P04).
    if ((err as { code?: string }).code === '42P04') return { created: false, database };
    throw err;
  } finally {
    await client.end();
  }
}

/** The URL without its password, for logs and errors. */
export function redact(databaseUrl: string): string {
  try {
    const u = new URL(databaseUrl);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable DATABASE_URL)';
  }
}

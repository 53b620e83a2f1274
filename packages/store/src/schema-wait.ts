/**
 * What a reader needs of a schema it does not migrate. A process that only reads (the API on a hot
 * standby, where nothing can be written) cannot apply migrations at start; it waits until the
 * relations it reads exist as its contract describes them. Relations and columns beyond the
 * contract do not make it wait: a newer writer may publish more than an older reader knows.
 */
import { AppError } from '@skinprices/domain';
import { isTransientPgError, type Pool } from './pool.js';
import { contractTypeName, type Contract, type ViewColumns } from './read-contract.js';

/**
 * The api_* relations of `schema` (views, or tables with kind 'r') with each column's type, as
 * PostgreSQL reports them, in the contract's type names.
 */
export async function publishedRelations(
  pool: Pool,
  schema: string,
  kind: 'v' | 'r' = 'v',
): Promise<Record<string, ViewColumns>> {
  const { rows } = await pool.query<{ view: string; column: string; type: string }>(
    `SELECT c.relname AS view, a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type
     FROM pg_class c
     JOIN pg_namespace n ON n.oid = c.relnamespace
     JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
     WHERE n.nspname = $1 AND c.relkind = $2 AND c.relname LIKE 'api\\_%'
     ORDER BY c.relname, a.attnum`,
    [schema, kind],
  );
  const views: Record<string, ViewColumns> = {};
  for (const r of rows) (views[r.view] ??= {})[r.column] = contractTypeName(r.type);
  return views;
}

/** What the contract needs that `views` lacks: missing relations and columns, columns of another type. */
export function unmetNeeds(views: Record<string, ViewColumns>, contract: Contract): string[] {
  const needs: string[] = [];
  for (const [name, columns] of Object.entries(contract)) {
    const have = views[name];
    if (!have) {
      needs.push(`${name} is missing`);
      continue;
    }
    for (const [column, type] of Object.entries(columns)) {
      const got = have[column];
      const want = type.replace(/\?$/, '');
      if (got === undefined) needs.push(`${name}.${column} is missing`);
      else if (got !== want) needs.push(`${name}.${column} is ${got}, needed ${want}`);
    }
  }
  return needs;
}

export interface ContractWait {
  pool: Pool;
  schema: string;
  contract: Contract;
  kind?: 'v' | 'r';
  /** @default 600000: a writer that has not migrated in ten minutes is not coming. */
  timeoutMs?: number;
  /** @default 1000 */
  pollMs?: number;
  /** Added to the timeout's error: what makes the schema appear (which migration to run). */
  hint?: string;
  /** Told what is still missing, at most every `reportEveryMs` (@default 10000). */
  onWait?: (needs: string[]) => void;
  reportEveryMs?: number;
}

/**
 * Resolves once `schema` holds everything `contract` needs. A server that does not answer is
 * waited for too (a standby still starting); one that refuses (wrong password, no such database)
 * fails at once, as waiting cannot help. Throws `migration_failed` (not retryable) after the
 * timeout, naming what is still missing.
 */
export async function waitForContract(w: ContractWait): Promise<void> {
  const deadline = Date.now() + (w.timeoutMs ?? 600_000);
  let reported = 0;
  let needs: string[] = [];
  for (;;) {
    try {
      needs = unmetNeeds(await publishedRelations(w.pool, w.schema, w.kind), w.contract);
    } catch (err) {
      if (!isTransientPgError(err)) throw err;
      needs = [`the database does not answer (${String(err)})`];
    }
    if (needs.length === 0) return;
    if (Date.now() >= deadline)
      throw new AppError(
        'migration_failed',
        `schema ${w.schema} lacks what this process reads after ${w.timeoutMs ?? 600_000} ms: ${needs.join('; ')}` +
          (w.hint ? `. ${w.hint}` : ''),
      );
    if (Date.now() - reported >= (w.reportEveryMs ?? 10_000)) {
      reported = Date.now();
      w.onWait?.(needs);
    }
    await new Promise((r) => setTimeout(r, w.pollMs ?? 1_000));
  }
}

export {
  createPool,
  ensureDatabase,
  ensureSchema,
  ident,
  isTransientPgError,
  redact,
  type Pool,
  type PoolClient,
  type PoolOptions,
} from './pool.js';
export { loadMigrations, migrate, type Migration, type MigrationResult } from './migrate.js';
export { copyField, copyLine, copyOut, copyRows, type CopyValue } from './copy.js';

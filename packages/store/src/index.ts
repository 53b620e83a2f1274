export {
  createPool,
  ensureDatabase,
  ensureSchema,
  ident,
  isPoolBusy,
  isTransientPgError,
  redact,
  type Pool,
  type PoolClient,
  type PoolOptions,
} from './pool.js';
export { publishedRelations, unmetNeeds, waitForContract, type ContractWait } from './schema-wait.js';
export { loadMigrations, migrate, MIGRATION_RUNNING_SQL, type Migration, type MigrationResult } from './migrate.js';
export { copyField, copyLine, copyOut, copyRows, type CopyValue } from './copy.js';
export {
  contractDrift,
  type Column,
  type Contract,
  type DatabaseOf,
  contractTypeName,
  READ_CONTRACT_V1,
  type PgType,
  type ReadContractV1,
  type ViewColumns,
} from './read-contract.js';
export { parsePayload, PgNotifications, type ListenerState, type NotificationSubscription } from './notifications.js';

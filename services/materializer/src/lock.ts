/**
 * The advisory lock of a read-model schema: every materializer holds it shared for its lifetime,
 * a replay takes it exclusively, so the two never write one schema at the same time.
 */
export const schemaLockSql = (schemaExpr: string): string => `hashtext('skinprices-materializer:' || ${schemaExpr})`;

/**
 * "Written since a snapshot" by age: a row changed since a snapshot was written by a transaction
 * not older than the snapshot's xmin, so its age (age(xmin), cheap on every row) is not above the
 * xmin's. The exact test, pg_visible_in_snapshot, is wrong for subtransactions, which the ingest
 * path writes under (its poison isolation). The liquidity refresh's own bookkeeping (derived.ts),
 * inside the materializer: no reader of the read model depends on it (readers follow the change
 * position, migration 0019).
 */

/**
 * SQL for the age of the xmin of `snapshot` (an expression of type pg_snapshot): age() takes a
 * 32-bit xid, so the 64-bit xid8 is cut to its low 32 bits first.
 */
export const snapshotXminAgeSql = (snapshot: string): string =>
  `age((pg_snapshot_xmin(${snapshot})::text::bigint & 4294967295)::text::xid)`;

/**
 * Ages are 32-bit: past a quarter of the id space the comparison could wrap, so a snapshot that
 * old gets the slow path (a full read, a 64-bit id comparison) instead.
 */
export const usableSnapshotAge = (age: number): boolean => age >= 0 && age < 2 ** 30;

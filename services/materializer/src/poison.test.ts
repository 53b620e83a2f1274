/**
 * Poison isolation without a database: which failures are a record's fault, and how a batch is
 * taken apart. Root cause guarded: a record that decoded but failed in SQL was rethrown, kafkajs
 * redelivered the same batch forever and every later record of its partition waited behind it.
 */
import { AppError } from '@skinprices/domain';
import { describe, expect, it } from 'vitest';
import { applyIsolating, classifyFailure, failureMessage, sqlState } from './poison.js';

/** What pg's DatabaseError carries that the classification reads. */
const pgError = (code: string, message = `error ${code}`) =>
  Object.assign(new Error(message), { code, severity: 'ERROR' });

describe('classifyFailure: retryable vs poison', () => {
  it.each([
    ['22021', 'U+0000 in text (invalid byte sequence for UTF8)'],
    ['22P05', 'untranslatable character'],
    ['22003', 'numeric field overflow'],
    ['22P02', 'invalid text representation'],
    ['23514', 'check constraint (price > 0)'],
    ['23502', 'not-null constraint'],
    ['23505', 'unique violation'],
    ['54000', 'index row too large'],
  ])('%s (%s) is poison', (code) => {
    expect(classifyFailure(pgError(code))).toBe('poison');
  });

  it.each([
    ['40001', 'serialization failure'],
    ['40P01', 'deadlock'],
    ['57P01', 'admin shutdown'],
    ['57P03', 'cannot connect now'],
    ['57014', 'statement timeout / cancel'],
    ['08006', 'connection failure'],
    ['53100', 'disk full'],
    ['53300', 'too many connections'],
    ['55P03', 'lock not available'],
    ['42P01', 'undefined table: our SQL or schema, not the record'],
    ['42703', 'undefined column'],
    ['25P02', 'transaction aborted'],
    ['XX000', 'internal error'],
  ])('%s (%s) is retryable', (code) => {
    expect(classifyFailure(pgError(code))).toBe('retryable');
  });

  it('errors without a SQLSTATE (socket resets, timeouts, our own) are retryable', () => {
    expect(classifyFailure(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }))).toBe('retryable');
    expect(classifyFailure(new Error('Connection terminated unexpectedly'))).toBe('retryable');
    expect(classifyFailure(new AppError('copy_failed', 'row has 3 values for 4 columns', { retryable: false }))).toBe(
      'retryable',
    );
    expect(classifyFailure(undefined)).toBe('retryable');
    // An AppError's own code is not a SQLSTATE even when it is five characters long.
    expect(classifyFailure(Object.assign(new Error('x'), { code: '22021' }))).toBe('retryable');
  });

  it('looks through wrappers: a COPY failure arrives as an AppError whose cause is the server error', () => {
    const cause = pgError('22021', 'invalid byte sequence for encoding "UTF8": 0x00');
    const wrapped = new AppError('copy_failed', `COPY into stage_listings_current failed: ${String(cause)}`, { cause });
    expect(classifyFailure(wrapped)).toBe('poison');
    expect(sqlState(wrapped)).toBe('22021');
    // The stored text is the server's message, not the wrapper naming the staging table.
    expect(failureMessage(wrapped)).toBe('invalid byte sequence for encoding "UTF8": 0x00');
    expect(failureMessage(new Error('plain'))).toBe('plain');
  });

  it('a cyclic cause chain ends', () => {
    const a = new Error('a') as Error & { cause?: unknown };
    a.cause = a;
    expect(classifyFailure(a)).toBe('retryable');
  });
});

/**
 * A transaction with savepoints over an in-memory list of applied records: `apply` appends a
 * subset (or throws), SAVEPOINT / ROLLBACK TO / RELEASE behave as PostgreSQL's do.
 */
class FakeTx {
  applied: string[] = [];
  private saves: string[][] = [];
  readonly statements: string[] = [];
  /** Subsets passed to apply, in call order. */
  readonly calls: string[][] = [];

  constructor(private readonly fails: (state: readonly string[], subset: readonly string[]) => unknown) {}

  query = (sql: string): Promise<unknown> => {
    this.statements.push(sql);
    if (sql.startsWith('SAVEPOINT')) this.saves.push([...this.applied]);
    else if (sql.startsWith('ROLLBACK TO')) this.applied = [...(this.saves.at(-1) as string[])];
    else if (sql.startsWith('RELEASE')) this.saves.pop();
    return Promise.resolve();
  };

  apply = (subset: readonly string[]): Promise<void> => {
    this.calls.push([...subset]);
    // Written before the check, like a statement failing after some rows: only the savepoint undoes it.
    this.applied.push(...subset);
    const err = this.fails(this.applied, subset);
    return err ? Promise.reject(err instanceof Error ? err : new Error(String(err))) : Promise.resolve();
  };

  get open(): number {
    return this.saves.length;
  }
}

const records = (n: number) => Array.from({ length: n }, (_, i) => `r${i}`);
const poisonIf =
  (...bad: string[]) =>
  (_: readonly string[], subset: readonly string[]) =>
    subset.some((r) => bad.includes(r))
      ? pgError('22021', 'invalid byte sequence for encoding "UTF8": 0x00')
      : undefined;

describe('applyIsolating', () => {
  it('a clean batch is applied once, in one savepoint', async () => {
    const tx = new FakeTx(() => undefined);
    const result = await applyIsolating(tx, records(5), tx.apply);
    expect(result).toEqual({ poisoned: [], isolated: false, attempts: 1 });
    expect(tx.applied).toEqual(records(5));
    expect(tx.statements).toEqual(['SAVEPOINT poison_isolation', 'RELEASE SAVEPOINT poison_isolation']);
  });

  it('dead-letters the one poisoned record; the rest applies as one batch, in order, as if it were absent', async () => {
    const tx = new FakeTx(poisonIf('r6'));
    const input = records(10);
    const result = await applyIsolating(tx, input, tx.apply);
    expect(result.isolated).toBe(true);
    expect(result.poisoned.map((p) => p.record)).toEqual(['r6']);
    expect(sqlState(result.poisoned[0]?.error)).toBe('22021');
    const rest = input.filter((r) => r !== 'r6');
    expect(tx.applied).toEqual(rest);
    // The rest went through apply in one call, like a batch without the record.
    expect(tx.calls.at(-1)).toEqual(rest);
    expect(tx.open).toBe(0);
  });

  it('finds several poisoned records, among them the first and the last, with bounded work', async () => {
    const tx = new FakeTx(poisonIf('r0', 'r17', 'r63'));
    const result = await applyIsolating(tx, records(64), tx.apply);
    expect(result.poisoned.map((p) => p.record)).toEqual(['r0', 'r17', 'r63']);
    expect(tx.applied).toEqual(records(64).filter((r) => !['r0', 'r17', 'r63'].includes(r)));
    // First try + two probes per level per poisoned record (log2 64 = 6 levels) + the rest.
    expect(result.attempts).toBeLessThanOrEqual(1 + 3 * 2 * 6 + 1);
    expect(tx.open).toBe(0);
  });

  it('a batch of one poisoned record applies nothing and leaves no savepoint open', async () => {
    const tx = new FakeTx(poisonIf('r0'));
    const result = await applyIsolating(tx, records(1), tx.apply);
    expect(result.poisoned.map((p) => p.record)).toEqual(['r0']);
    expect(tx.applied).toEqual([]);
    expect(tx.open).toBe(0);
  });

  it('a batch of one record that fails once (a race, not its content) is retried alone and applied', async () => {
    let n = 0;
    const tx = new FakeTx(() => (++n === 1 ? pgError('23505', 'duplicate key value violates pg_type') : undefined));
    const result = await applyIsolating(tx, records(1), tx.apply);
    expect(result.poisoned).toEqual([]);
    expect(tx.applied).toEqual(['r0']);
    expect(tx.open).toBe(0);
  });

  it('an empty batch runs nothing', async () => {
    const tx = new FakeTx(() => undefined);
    expect(await applyIsolating(tx, [], tx.apply)).toEqual({ poisoned: [], isolated: false, attempts: 0 });
    expect(tx.statements).toEqual([]);
  });

  it('a retryable error is rethrown at once: nothing is dead-lettered, the batch is redelivered', async () => {
    const tx = new FakeTx(() => pgError('40P01', 'deadlock detected'));
    await expect(applyIsolating(tx, records(8), tx.apply)).rejects.toMatchObject({ code: '40P01' });
    expect(tx.calls).toHaveLength(1);
  });

  it('a retryable error while probing is rethrown too (the connection went away mid-isolation)', async () => {
    let n = 0;
    const tx = new FakeTx((_, subset) =>
      ++n === 1 ? pgError('22021') : subset.length < 8 ? pgError('57P01', 'terminating connection') : undefined,
    );
    await expect(applyIsolating(tx, records(8), tx.apply)).rejects.toMatchObject({ code: '57P01' });
  });

  it('a failure only a combination causes falls back to one record at a time, keeping what applies', async () => {
    // r2 fails once r5 is in the same transaction state (no record fails on its own).
    const tx = new FakeTx((state) =>
      state.includes('r2') && state.includes('r5') ? pgError('23505', 'duplicate key') : undefined,
    );
    const result = await applyIsolating(tx, records(8), tx.apply);
    expect(result.isolated).toBe(true);
    expect(result.poisoned.map((p) => p.record)).toEqual(['r5']);
    expect(tx.applied).toEqual(records(8).filter((r) => r !== 'r5'));
    expect(tx.open).toBe(0);
  });
});

/*
 * Poison records: a record that decodes but that PostgreSQL refuses (a U+0000 in a name, a price
 * beyond numeric(20, 2), a violated CHECK). Rethrowing would make kafkajs redeliver the same
 * batch forever and every later record of the partition would wait behind it; instead the batch
 * is taken apart inside its own transaction and only the refused records go to dead_letters.
 *
 *   apply all (savepoint) ──ok──▶ done
 *        │ poison error            (any other error: rethrown, the whole batch is retried)
 *        ▼
 *   bisect: probe halves, each in a savepoint that is always rolled back, down to the single
 *   records that fail on their own ──▶ apply the rest as one batch (savepoint) ──ok──▶ done
 *        │ poison error again (the failure needed several records together)
 *        ▼
 *   one record at a time, each in its own savepoint: kept if it applies, dead-lettered if not
 *
 * The rest is applied as one batch, exactly as if the refused records had never been on the
 * topic: a replay, which cuts batches elsewhere, then dead-letters the same records and builds
 * the same tables (a record's own content decides, never its neighbours). Every step is bounded:
 * at most 2n probes for n records, then at most n single applies; nothing is redelivered.
 */

/** What a failed statement means for the batch that ran it. */
export type FailureClass =
  /** The server, the connection or a concurrent transaction: the same batch can succeed later. */
  | 'retryable'
  /** The records' content: the same records fail the same way every time. */
  | 'poison';

/** The SQLSTATE of the first PostgreSQL error in `err`'s cause chain (COPY wraps it in an AppError). */
export function sqlState(err: unknown): string | undefined {
  return pgError(err)?.code;
}

/** The PostgreSQL error's own message (without our wrapping), or the error's text. */
export function failureMessage(err: unknown): string {
  return pgError(err)?.message ?? (err instanceof Error ? err.message : String(err));
}

function pgError(err: unknown): { code: string; message: string } | undefined {
  let e: unknown = err;
  // Bounded: a cause chain is short, and a cyclic one must not hang the consumer.
  for (let depth = 0; depth < 8 && e && typeof e === 'object'; depth++) {
    const c = e as { code?: unknown; severity?: unknown; message?: unknown; cause?: unknown };
    if (typeof c.code === 'string' && /^[0-9A-Z]{5}$/.test(c.code) && typeof c.severity === 'string')
      return { code: c.code, message: typeof c.message === 'string' ? c.message : String(e) };
    e = c.cause;
  }
  return undefined;
}

/**
 * Only errors a record's content can raise are poison:
 * - class 22, data exception: invalid byte sequence (U+0000 in text: 22021), untranslatable
 *   character (22P05), numeric out of range (22003), invalid text representation (22P02) …
 * - class 23, integrity constraint violation: CHECK (a price ≤ 0), NOT NULL, unique …
 * - 54000 program_limit_exceeded: a text too long for its btree index entry.
 * Everything else is retryable: no SQLSTATE (connection reset, timeouts), 08 connection, 40001 /
 * 40P01 serialization and deadlock, 53 out of disk or memory, 55 lock not available, 57 admin
 * shutdown or statement timeout, 58 and XX server faults. Class 42 (undefined table or column,
 * syntax) is deliberately not poison: parameters and COPY cannot put content into SQL text, so
 * it means our SQL or the schema is wrong, and dead-lettering would silently empty the topic
 * into dead_letters after a bad deploy; stopping (lag grows, the batch-failure metric counts)
 * is the visible failure. A catalogue race that surfaces as 23505 (two transactions creating one
 * day partition) passes this test but not isolation: a record is only dead-lettered when it
 * also fails alone, and a race does not repeat.
 */
export function classifyFailure(err: unknown): FailureClass {
  const code = sqlState(err);
  if (code === undefined) return 'retryable';
  if (code.startsWith('22') || code.startsWith('23') || code === '54000') return 'poison';
  return 'retryable';
}

/** The minimal client surface isolation needs (a pg PoolClient fits). */
export interface SavepointClient {
  query: (sql: string) => Promise<unknown>;
}

interface Poisoned<M> {
  record: M;
  error: unknown;
}

export interface IsolationResult<M> {
  /** The records refused on their own, in input order. */
  poisoned: Poisoned<M>[];
  /** Whether the batch had to be taken apart (its first apply failed with a poison error). */
  isolated: boolean;
  /** Savepoint applies run: 1 when the batch applied at once. */
  attempts: number;
}

const SP = 'poison_isolation';

/**
 * Applies `records` with `apply` inside the caller's open transaction, isolating poison records
 * (see the diagram at the top). `apply` must be callable on any subset, in input order, and
 * must leave nothing behind on failure beyond what the savepoint rolls back. Retryable errors
 * propagate with the transaction still usable only for ROLLBACK.
 */
export async function applyIsolating<M>(
  client: SavepointClient,
  records: readonly M[],
  apply: (records: readonly M[]) => Promise<void>,
): Promise<IsolationResult<M>> {
  let attempts = 0;
  /** Runs `apply(subset)` in a savepoint; returns the poison error, or undefined if it applied. */
  const attempt = async (subset: readonly M[], keep: boolean): Promise<unknown> => {
    attempts++;
    await client.query(`SAVEPOINT ${SP}`);
    try {
      await apply(subset);
    } catch (err) {
      await client.query(`ROLLBACK TO SAVEPOINT ${SP}`);
      await client.query(`RELEASE SAVEPOINT ${SP}`);
      if (classifyFailure(err) === 'retryable') throw err;
      return err ?? new Error('apply failed without an error');
    }
    if (!keep) await client.query(`ROLLBACK TO SAVEPOINT ${SP}`);
    await client.query(`RELEASE SAVEPOINT ${SP}`);
    return undefined;
  };

  if (records.length === 0) return { poisoned: [], isolated: false, attempts };
  const first = await attempt(records, true);
  if (first === undefined) return { poisoned: [], isolated: false, attempts };

  // Bisect with probes (always rolled back): which records fail on their own?
  const poisoned: { index: number; error: unknown }[] = [];
  // `alone`: the error came from applying exactly this range by itself, as a retry.
  type Range = { from: number; to: number; error: unknown; alone: boolean };
  const stack: Range[] = [{ from: 0, to: records.length, error: first, alone: false }];
  while (stack.length > 0) {
    const { from, to, error, alone } = stack.pop() as Range;
    if (to - from === 1) {
      // A batch of one record is retried alone once too: a race (23505 on a catalogue index while
      // two transactions create one day partition) must not dead-letter a sound record.
      const confirmed = alone ? error : await attempt(records.slice(from, to), false);
      if (confirmed !== undefined) poisoned.push({ index: from, error: confirmed });
      continue;
    }
    const mid = from + Math.ceil((to - from) / 2);
    for (const [a, b] of [
      [from, mid],
      [mid, to],
    ] as const) {
      const err = await attempt(records.slice(a, b), false);
      if (err !== undefined) stack.push({ from: a, to: b, error: err, alone: true });
    }
    // Neither half fails alone: the failure needs records from both; the fallback below handles it.
  }
  poisoned.sort((x, y) => x.index - y.index);
  const refused = new Set(poisoned.map((p) => p.index));
  const rest = records.filter((_, i) => !refused.has(i));
  if (rest.length === 0 || (await attempt(rest, true)) === undefined)
    return {
      poisoned: poisoned.map((p) => ({ record: records[p.index] as M, error: p.error })),
      isolated: true,
      attempts,
    };

  // Still refused with the lone offenders out: apply one record at a time, keeping what applies.
  // Each kept record is one released subtransaction; this path is for the rare failure that only
  // a combination of records causes, so its cost (and PostgreSQL's subtransaction cache overflowing
  // past 64 of them) is acceptable.
  const out: Poisoned<M>[] = [];
  for (const [i, record] of records.entries()) {
    const known = poisoned.find((p) => p.index === i);
    if (known) {
      out.push({ record, error: known.error });
      continue;
    }
    const err = await attempt([record], true);
    if (err !== undefined) out.push({ record, error: err });
  }
  return { poisoned: out, isolated: true, attempts };
}

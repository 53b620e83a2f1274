/**
 * Reads at a position of the read model's change journal (changes/position.ts), each in one
 * repeatable-read transaction with the journal's head as that transaction sees it: a patched
 * list's rows, whole or changed since a position, the liquidity scores that move without them, and
 * the tags of what changed (ReadModelVersion). ReadModel (readmodel.ts) answers with these.
 */
import { readTag, type MarketSlug } from '@skinprices/domain';
import { sql } from 'kysely';
import { continues, formatPosition, parsePosition, type JournalState } from './changes/position.js';
import type { FieldChange, RowChange } from './list-segments.js';
import { listKey, rowChange, type ListingRow, type ReadDb } from './readmodel-rows.js';

/** The journal's tag of liquidity scores (materializer migration 0019). */
const SCORES_TAG = 'scores';

/** Changed rows placed by a patch at most: beyond, the rows were most of a cycle and a rebuild is as cheap. */
const MAX_PLACED = 2_000;

/**
 * For changed priced rows, the key of the priced row before each in the list's order, read in the
 * caller's snapshot (an index step back per row): what lets a patch place a row the list does not
 * hold yet. Undefined when there are too many to ask for.
 */
async function predecessors(
  trx: ReadDb,
  market: MarketSlug,
  rows: readonly { market_hash_name: string; phase: string; price: string | null }[],
): Promise<Map<string, string | null> | undefined> {
  const priced = rows.filter((r) => r.price !== null);
  if (priced.length === 0 || priced.length > MAX_PLACED) return undefined;
  const { rows: found } = await sql<{
    name: string;
    phase: string;
    prev_name: string | null;
    prev_phase: string | null;
  }>`
    SELECT c.name, c.phase, p.market_hash_name AS prev_name, p.phase AS prev_phase
    FROM unnest(${priced.map((r) => r.market_hash_name)}::text[], ${priced.map((r) => r.phase)}::text[]) AS c(name, phase)
    LEFT JOIN LATERAL (
      SELECT v.market_hash_name, v.phase FROM api_listings_v1 v
      WHERE v.market = ${market} AND v.price IS NOT NULL AND (v.market_hash_name, v.phase) < (c.name, c.phase)
      ORDER BY v.market_hash_name DESC, v.phase DESC
      LIMIT 1
    ) p ON true`.execute(trx);
  return new Map(
    found.map((f) => [
      listKey(f.name, f.phase),
      f.prev_name === null ? null : listKey(f.prev_name, f.prev_phase as string),
    ]),
  );
}

/**
 * Runs `read` in one read-only repeatable-read transaction with the change journal's state as that
 * transaction sees it: everything the read returns is as of the journal's head (positions become
 * visible in commit order, so no change at or below the head is missing from the read).
 */
function atPosition<T>(db: ReadDb, read: (trx: ReadDb, state: JournalState) => Promise<T>): Promise<T> {
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute(async (trx) => read(trx, await journalState(trx)));
}

async function journalState(db: ReadDb): Promise<JournalState> {
  const { rows } = await sql<{ epoch: string; pruned_through: string; head: string }>`
    SELECT s.epoch, s.pruned_through,
           coalesce((SELECT max(pos) FROM api_read_changes_v1), s.pruned_through) AS head
    FROM api_read_change_state_v1 s`.execute(db);
  const r = rows[0];
  // A schema migrated before 0019 ran has no row; a migration under way is retried by the caller.
  if (!r) throw new Error('the read model has no change journal (materializer migration 0019)');
  return { epoch: r.epoch, prunedThrough: BigInt(r.pruned_through), head: BigInt(r.head) };
}

/**
 * The keys (name, phase) that journal entries of `tag` after `since` name, or undefined when the
 * list must be read whole: the journal no longer reaches back to `since`, or an entry of the tag
 * names no rows.
 */
async function changedKeys(
  trx: ReadDb,
  state: JournalState,
  tag: string,
  since: string,
): Promise<{ names: string[]; phases: string[] } | undefined> {
  const from = parsePosition(since);
  if (!continues(from, state)) return undefined;
  const { rows } = await sql<{ name: string | null; phase: string | null; whole: boolean }>`
    SELECT u.name, u.phase, r.names IS NULL AS whole
    FROM api_read_changes_v1 r
    LEFT JOIN LATERAL unnest(r.names, r.phases) AS u(name, phase) ON true
    WHERE r.tag = ${tag} AND r.pos > ${from.pos.toString()}::bigint`.execute(trx);
  const seen = new Set<string>();
  const names: string[] = [];
  const phases: string[] = [];
  for (const r of rows) {
    if (r.whole) return undefined;
    const key = listKey(r.name as string, r.phase as string);
    if (seen.has(key)) continue;
    seen.add(key);
    names.push(r.name as string);
    phases.push(r.phase as string);
  }
  return { names, phases };
}

/**
 * When the marketplace's listings were last confirmed complete (its last complete cycle's end,
 * upstream time), as the caller's transaction sees it; null: never.
 */
async function confirmedAt(trx: ReadDb, market: string): Promise<Date | null> {
  const row = await trx
    .selectFrom('api_freshness_v1')
    .select('last_complete_at')
    .where('market', '=', market)
    .where('kind', '=', 'LISTINGS')
    .executeTakeFirst();
  return row?.last_complete_at ?? null;
}

/**
 * One marketplace's price list for a patched body (list-segments.ts): every priced row in list order,
 * and the change position they were read at (one repeatable-read transaction).
 */
export async function listingRows(
  db: ReadDb,
  market: MarketSlug,
): Promise<{ position: string; rows: RowChange[]; confirmedAt: Date | null }> {
  return atPosition(db, async (trx, state) => {
    const rows = await trx
      .selectFrom('api_listings_v1')
      .selectAll()
      .where('market', '=', market)
      .where('price', 'is not', null)
      .orderBy('market_hash_name')
      .orderBy('phase')
      .execute();
    return {
      position: formatPosition({ epoch: state.epoch, pos: state.head }),
      rows: rows.map(rowChange),
      confirmedAt: await confirmedAt(trx, market),
    };
  });
}

/**
 * The rows of a marketplace's price list the change journal names since position `since` (JSON
 * null: no longer priced), each the list does not hold (`known`) with its place, and the position
 * they were read at; undefined when the journal no longer reaches back that far and the list
 * must be read whole. Index reads in proportion to what changed, nothing else.
 */
export async function listingChanges(
  db: ReadDb,
  market: MarketSlug,
  since: string,
  /** Keys the caller's list holds: rows of theirs need no predecessor. */
  known: (key: string) => boolean,
): Promise<{ position: string; rows: RowChange[]; confirmedAt: Date | null } | undefined> {
  return atPosition(db, async (trx, state) => {
    const keys = await changedKeys(trx, state, readTag('LISTINGS', market), since);
    if (keys === undefined) return undefined;
    const position = formatPosition({ epoch: state.epoch, pos: state.head });
    const confirmed = await confirmedAt(trx, market);
    if (keys.names.length === 0) return { position, rows: [], confirmedAt: confirmed };
    const { rows } = await sql<ListingRow>`
      SELECT v.* FROM unnest(${keys.names}::text[], ${keys.phases}::text[]) AS k(name, phase)
      JOIN api_listings_v1 v ON v.market = ${market} AND v.market_hash_name = k.name AND v.phase = k.phase`.execute(
      trx,
    );
    const after = await predecessors(
      trx,
      market,
      rows.filter((r) => !known(listKey(r.market_hash_name, r.phase))),
    );
    return {
      position,
      confirmedAt: confirmed,
      rows: rows.map((r) => {
        const change = rowChange(r);
        if (change.json !== null && after?.has(change.key)) change.after = after.get(change.key) as string | null;
        return change;
      }),
    };
  });
}

/**
 * The items' liquidity scores the change journal names since position `since`, as the list
 * rows' `liquidity` field (null: the item has no score any more), and the position they were
 * read at. The score alone, for every marketplace's list (api_liquidity_v1), not the listing
 * rows. Where the journal no longer reaches back that far (scores quiet for longer than its
 * retention, a replay), every score: the lists take them as field changes, which drop what did
 * not change, instead of each reading its rows whole at once.
 */
export async function liquidityScores(
  db: ReadDb,
  since: string,
): Promise<{ position: string; changes: FieldChange[] }> {
  return atPosition(db, async (trx, state) => {
    const keys = await changedKeys(trx, state, SCORES_TAG, since);
    if (keys === undefined) {
      const every = await trx
        .selectFrom('api_liquidity_v1')
        .select(['market_hash_name', 'phase', 'liquidity'])
        .execute();
      return {
        position: formatPosition({ epoch: state.epoch, pos: state.head }),
        changes: every.map((r) => ({
          key: listKey(r.market_hash_name, r.phase),
          fields: { liquidity: r.liquidity },
        })),
      };
    }
    const { rows } =
      keys.names.length === 0
        ? { rows: [] }
        : await sql<{ name: string; phase: string; liquidity: string | null }>`
            SELECT k.name, k.phase, v.liquidity
            FROM unnest(${keys.names}::text[], ${keys.phases}::text[]) AS k(name, phase)
            LEFT JOIN api_liquidity_v1 v ON v.market_hash_name = k.name AND v.phase = k.phase`.execute(trx);
    return {
      position: formatPosition({ epoch: state.epoch, pos: state.head }),
      changes: rows.map((r) => ({ key: listKey(r.name, r.phase), fields: { liquidity: r.liquidity } })),
    };
  });
}

/**
 * The tags of the changes committed after position `since` and the position read up to: what
 * readers of the read model must look at again. `tags` undefined: anything may have changed
 * (the first read, a journal that no longer reaches back to `since`, or another journal).
 */
export async function changedTags(db: ReadDb, since?: string): Promise<{ position: string; tags?: string[] }> {
  return atPosition(db, async (trx, state) => {
    const position = formatPosition({ epoch: state.epoch, pos: state.head });
    if (since === undefined || !continues(parsePosition(since), state)) return { position };
    const from = parsePosition(since).pos;
    if (from >= state.head) return { position, tags: [] };
    const { rows } = await sql<{ tag: string }>`
      SELECT DISTINCT tag FROM api_read_changes_v1 WHERE pos > ${from.toString()}::bigint`.execute(trx);
    return { position, tags: rows.map((r) => r.tag) };
  });
}

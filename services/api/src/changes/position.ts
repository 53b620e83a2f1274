/**
 * The read model's change position as the API holds it (materializer migration 0019): the journal
 * it counts in (`epoch`: a replay starts another) and the last position read. Positions become
 * visible in commit order, so a reader that read up to `pos` has seen every change at or below it
 * and reads only what is above next time. Kept as a string (`epoch:pos`) where a cache stores it.
 */
export interface Position {
  epoch: string;
  pos: bigint;
}

export const formatPosition = (p: Position): string => `${p.epoch}:${p.pos}`;

export function parsePosition(text: string): Position {
  const colon = text.lastIndexOf(':');
  return colon < 0
    ? { epoch: '', pos: BigInt(text) }
    : { epoch: text.slice(0, colon), pos: BigInt(text.slice(colon + 1)) };
}

/** The journal as one read sees it: its epoch, what retention removed, and the newest position. */
export interface JournalState {
  epoch: string;
  prunedThrough: bigint;
  head: bigint;
}

/**
 * Whether the journal still holds everything after `since`: the same journal, and nothing above
 * `since` pruned. Otherwise the reader reads whole.
 */
export const continues = (since: Position, state: JournalState): boolean =>
  since.epoch === state.epoch && since.pos >= state.prunedThrough;

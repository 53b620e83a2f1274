/**
 * What each listings_current row serves, held in memory per partition of listings.v1 this process
 * owns, so that a record repeating it is dropped before SQL (migration 0021;
 * docs/decisions/0003-repeats-before-sql.md).
 *
 * A record is classed against the row as PostgreSQL holds it at that point of the partition:
 * - `skip`: its cycle sends removals as records (`removals_sent`), it is newer than the row, and
 *   it serves the same values (price, count, currency, wear, StatTrak/souvenir, template id, item
 *   page) within the same quarter hour as the row's observation: no row version, no candle;
 * - `candle`: the same, in a later quarter hour: its hourly and daily candles are written (history
 *   keeps a point per hour observed, and the market cap looks back six hours), the row is not;
 * - `write`: anything else, through the whole ingest path.
 * A quarter hour, not an hour: listing_hourly buckets by the session's time zone, whose offset is
 * a multiple of 15 minutes, so within a UTC quarter hour the hour bucket is the same in any zone.
 *
 * The decision reads only the row's state and the record, so a replay, a restart and the live run
 * decide alike, and the read model stays a function of the topics (checksums.ts). The rows are
 * loaded from PostgreSQL when a partition is assigned (one COPY for the assignment), kept as the
 * ingest path changes them (after its commit), and read again by key where they are unknown:
 * after a marker removed listings of the marketplace (listing_removal_epochs, markers.ts), after
 * a batch was taken apart (poison.ts), or past the memory bound.
 *
 * Attributes other than price and count are compared by a 53-bit hash (cyrb53): a change of only
 * the item page or template id could be missed with probability 2^-53; price and count exactly.
 */
import type { ListingEvent } from '@skinprices/events';
import { itemKey, partitionOfKey } from '@skinprices/events';
import { StringDecoder } from 'node:string_decoder';
import { copyOut, type PoolClient } from '@skinprices/store';

export type RepeatClass = 'skip' | 'candle' | 'write';

const QUARTER_HOUR_MS = 900_000;
/** Values per row in the store: observed_at (ms), price (cents; -1: none; NaN: not comparable), count, attributes. */
const STRIDE = 4;
/** A key whose row is not known (forgotten): read from PostgreSQL when needed. */
const UNKNOWN = -1;

/** The served values of one row. */
export interface ServedRow {
  observedAt: number;
  price: number;
  count: number;
  attrs: number;
}

/**
 * A price as a whole number of cents (numeric(20, 2), as stored), -1 for none; NaN where that is
 * not exact (more than two non-zero decimals, or past 2^53): such a record is never a repeat.
 */
export function priceCents(price: string | null): number {
  if (price === null) return -1;
  const dot = price.indexOf('.');
  const whole = dot < 0 ? price : price.slice(0, dot);
  let frac = dot < 0 ? '' : price.slice(dot + 1);
  while (frac.length > 2 && frac.endsWith('0')) frac = frac.slice(0, -1);
  if (frac.length > 2 || whole.length > 13 || !/^\d+$/.test(whole) || !/^\d*$/.test(frac)) return Number.NaN;
  return Number(whole) * 100 + Number(frac.padEnd(2, '0'));
}

/** cyrb53 (public domain, bryc): a 53-bit string hash. */
function cyrb53(s: string): number {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < s.length; i++) {
    const ch = s.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return 4294967296 * (2097151 & h2) + (h1 >>> 0);
}

/** The attributes a row serves besides price and count, hashed (the same from an event and from a row). */
export function attrsHash(a: {
  currency: string;
  exterior: string | null;
  stattrak: boolean;
  souvenir: boolean;
  template_id: string | number | null;
  item_page_url: string | null;
}): number {
  return cyrb53(
    `${a.currency}\u0001${a.exterior ?? '\u0002'}\u0001${a.stattrak ? 1 : 0}${a.souvenir ? 1 : 0}\u0001${
      a.template_id ?? '\u0002'
    }\u0001${a.item_page_url ?? '\u0002'}`,
  );
}

export function rowOf(e: ListingEvent): ServedRow {
  return { observedAt: e.observed_at, price: priceCents(e.price), count: e.count, attrs: attrsHash(e) };
}

/**
 * How a record relates to the row as it stands (null: no row). Pure. `removalsSent`: its cycle
 * sends removals as records, so its marker will not need the row stamped.
 */
export function classify(row: ServedRow | null, next: ServedRow, removalsSent: boolean): RepeatClass {
  if (!removalsSent || row === null || next.observedAt <= row.observedAt) return 'write';
  if (next.price !== row.price || next.count !== row.count || next.attrs !== row.attrs) return 'write';
  return Math.floor(next.observedAt / QUARTER_HOUR_MS) === Math.floor(row.observedAt / QUARTER_HOUR_MS)
    ? 'skip'
    : 'candle';
}

/** One partition's rows. */
class PartitionRows {
  readonly index = new Map<string, number>();
  values = new Float64Array(STRIDE * 1024);
  used = 0;
  /** Every row of the partition is here, but for the markets in `dirty` (an absent key: no row). */
  complete = true;
  readonly dirty = new Set<string>();
  /** Per market, the removal epoch these rows reflect. */
  readonly epochs = new Map<string, number>();
  /**
   * The partition's stored next offset these rows reflect (undefined: none stored when loaded).
   * A batch that finds another one stored was preceded by a commit these rows did not see (the
   * partition's previous owner finishing a batch after the rebalance): they are dropped.
   */
  nextOffset: bigint | undefined;

  /** Drops every row: each is read by key when needed. */
  reset(nextOffset: bigint | undefined): void {
    this.index.clear();
    this.used = 0;
    this.complete = false;
    this.nextOffset = nextOffset;
  }

  /** The row; null: none in PostgreSQL; undefined: unknown here. */
  get(key: string, market: string): ServedRow | null | undefined {
    const at = this.index.get(key);
    if (at === undefined) return this.complete && !this.dirty.has(market) ? null : undefined;
    if (at === UNKNOWN) return undefined;
    const v = this.values;
    return {
      observedAt: v[at] as number,
      price: v[at + 1] as number,
      count: v[at + 2] as number,
      attrs: v[at + 3] as number,
    };
  }

  /** Keeps the row; false when the bound is reached (the key is then unknown). */
  set(key: string, row: ServedRow, room: () => boolean): boolean {
    let at = this.index.get(key);
    if (at === undefined || at === UNKNOWN) {
      if (!room()) {
        if (at === UNKNOWN || this.complete) this.forget(key);
        return false;
      }
      if (this.used + STRIDE > this.values.length) {
        const grown = new Float64Array(this.values.length * 2);
        grown.set(this.values);
        this.values = grown;
      }
      at = this.used;
      this.used += STRIDE;
      this.index.set(key, at);
    }
    this.values[at] = row.observedAt;
    this.values[at + 1] = row.price;
    this.values[at + 2] = row.count;
    this.values[at + 3] = row.attrs;
    return true;
  }

  forget(key: string): void {
    this.index.set(key, UNKNOWN);
  }

  /** Forgets every row of the market (their keys start with its JSON prefix: keys.ts). */
  forgetMarket(market: string): void {
    const prefix = itemKey(market, '', '').slice(0, -6);
    for (const key of this.index.keys()) if (key.startsWith(prefix)) this.index.delete(key);
    this.dirty.add(market);
  }

  rows(): number {
    return this.used / STRIDE;
  }
}

/** A listings batch's view: its records classed, and the rows they leave once it commits. */
export interface BatchView {
  /** Per record (in the order given), its class. */
  classes: RepeatClass[];
  /** Applies the rows the batch leaves, once its transaction committed the partition's next offset. */
  commit(nextOffset: bigint): void;
  /** Forgets the rows the batch touched (it was taken apart: which records applied is not known here). */
  forget(nextOffset: bigint): void;
}

export interface ServedOptions {
  /** The materializer's group and its listings topic: whose stored offsets the rows go with. */
  groupId: string;
  topic: string;
  /** Rows held at most, over all partitions; past it rows are read from PostgreSQL by key. */
  maxRows: number;
  /** Hears each load: its partitions, the rows it read into them, how long it took, or why it failed. */
  onLoad?: (r: { partitions: number[]; rows: number; ms: number; error?: unknown }) => void;
}

export class ServedListings {
  private readonly partitions = new Map<number, PartitionRows>();
  /** The partitions of the current assignment: a load that ends after a later one keeps only these. */
  private assigned = new Set<number>();
  private loading: Promise<void> = Promise.resolve();

  constructor(private readonly options: ServedOptions) {}

  /** Rows held over every partition. */
  rows(): number {
    let n = 0;
    for (const p of this.partitions.values()) n += p.rows();
    return n;
  }

  /**
   * The partitions of listings.v1 now this process's: rows of the others are dropped, the new ones
   * loaded by one COPY of listings_current (awaited by `ready`). `numPartitions`: the topic's.
   */
  assign(connect: () => Promise<PoolClient>, partitions: readonly number[], numPartitions: number): void {
    this.assigned = new Set(partitions);
    for (const p of [...this.partitions.keys()]) if (!this.assigned.has(p)) this.partitions.delete(p);
    const fresh = partitions.filter((p) => !this.partitions.has(p));
    if (fresh.length === 0 || this.options.maxRows <= 0) return;
    // A failed load leaves those partitions without rows (no record of theirs is skipped); the
    // next assignment loads them again.
    const t0 = performance.now();
    this.loading = this.loading
      .then(async () => {
        const loaded = await this.load(connect, fresh, numPartitions);
        let n = 0;
        for (const [p, rows] of loaded)
          if (this.assigned.has(p)) {
            this.partitions.set(p, rows);
            n += rows.rows();
          }
        this.options.onLoad?.({ partitions: fresh, rows: n, ms: performance.now() - t0 });
      })
      .catch((error: unknown) =>
        this.options.onLoad?.({ partitions: fresh, rows: 0, ms: performance.now() - t0, error }),
      );
  }

  /** Waits for the loads of the assignments made so far. */
  async ready(): Promise<void> {
    await this.loading;
  }

  private async load(
    connect: () => Promise<PoolClient>,
    partitions: readonly number[],
    numPartitions: number,
  ): Promise<Map<number, PartitionRows>> {
    const loaded = new Map(partitions.map((p) => [p, new PartitionRows()]));
    const client = await connect();
    try {
      // One snapshot for the epochs and the rows: a removal committed after it moves the epoch
      // the next batch reads, one before it is in the rows.
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const { rows: epochs } = await client.query<{ market: string; epoch: string }>(
        'SELECT market, epoch FROM listing_removal_epochs',
      );
      for (const rows of loaded.values()) for (const e of epochs) rows.epochs.set(e.market, Number(e.epoch));
      const { rows: offsets } = await client.query<{ partition: number; next_offset: string }>(
        'SELECT partition, next_offset FROM consumer_offsets WHERE group_id = $1 AND topic = $2',
        [this.options.groupId, this.options.topic],
      );
      for (const o of offsets) {
        const rows = loaded.get(o.partition);
        if (rows) rows.nextOffset = BigInt(o.next_offset);
      }
      const stream = copyOut(
        client,
        `COPY (SELECT market, market_hash_name, phase, price, count, (extract(epoch FROM observed_at) * 1000)::bigint,
                      currency, exterior, stattrak, souvenir, template_id, item_page_url
               FROM listings_current) TO STDOUT`,
      );
      let rest = '';
      let held = this.rows();
      const room = () => held < this.options.maxRows;
      const take = (line: string) => {
        const f = line.split('\t').map(unescapeCopy);
        const key = itemKey(f[0] as string, f[1] as string, f[2] as string);
        const rows = loaded.get(partitionOfKey(Buffer.from(key), numPartitions));
        if (!rows) return;
        const row: ServedRow = {
          observedAt: Number(f[5]),
          price: f[3] === null ? -1 : priceCents(f[3] as string),
          count: Number(f[4]),
          attrs: attrsHash({
            currency: f[6] as string,
            exterior: f[7] ?? null,
            stattrak: f[8] === 't',
            souvenir: f[9] === 't',
            template_id: f[10] ?? null,
            item_page_url: f[11] ?? null,
          }),
        };
        if (rows.set(key, row, room)) held++;
        else rows.complete = false;
      };
      // A chunk may end inside a character (★ and ™ are three bytes): the decoder keeps the
      // partial bytes for the next one, where toString per chunk would garble the name.
      const utf8 = new StringDecoder('utf8');
      for await (const chunk of stream) {
        const text = rest + utf8.write(chunk as Buffer);
        const lines = text.split('\n');
        rest = lines.pop() ?? '';
        for (const line of lines) take(line);
      }
      rest += utf8.end();
      if (rest) take(rest);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
    return loaded;
  }

  /**
   * Classes a listings batch of one partition, in the batch's transaction (undefined: the
   * partition's rows are not held, every record is written). Reads the removal epochs first, then
   * the rows of unknown keys among records that could be repeats.
   */
  async view(
    client: PoolClient,
    partition: number,
    events: readonly ListingEvent[],
    storedNext: bigint,
  ): Promise<BatchView | undefined> {
    const rows = this.partitions.get(partition);
    if (!rows) return undefined;
    if (rows.nextOffset !== storedNext && !(rows.nextOffset === undefined && storedNext === 0n)) rows.reset(storedNext);
    const markets = [...new Set(events.map((e) => e.market))];
    const { rows: epochs } = await client.query<{ market: string; epoch: string }>(
      'SELECT market, epoch FROM listing_removal_epochs WHERE market = ANY($1)',
      [markets],
    );
    for (const e of epochs) {
      const epoch = Number(e.epoch);
      if (rows.epochs.get(e.market) !== epoch) {
        rows.forgetMarket(e.market);
        rows.epochs.set(e.market, epoch);
      }
    }
    const keys = events.map((e) => itemKey(e.market, e.market_hash_name, e.phase));
    // The batch's own view: rows as each record leaves them, over the partition's.
    const overlay = new Map<string, ServedRow | null>();
    const unknown: number[] = [];
    for (let i = 0; i < events.length; i++) {
      const e = events[i] as ListingEvent;
      const key = keys[i] as string;
      if (e.removals_sent && !overlay.has(key) && rows.get(key, e.market) === undefined) {
        overlay.set(key, null);
        unknown.push(i);
      }
    }
    if (unknown.length > 0) {
      for (const i of unknown) overlay.delete(keys[i] as string);
      const read = await readRows(
        client,
        unknown.map((i) => events[i] as ListingEvent),
      );
      for (const i of unknown) {
        const key = keys[i] as string;
        if (!overlay.has(key)) overlay.set(key, read.get(key) ?? null);
      }
    }
    const unsure = new Set<string>();
    const classes: RepeatClass[] = [];
    for (let i = 0; i < events.length; i++) {
      const e = events[i] as ListingEvent;
      const key = keys[i] as string;
      const row = overlay.has(key) ? (overlay.get(key) as ServedRow | null) : rows.get(key, e.market);
      const next = rowOf(e);
      const c = row === undefined ? 'write' : classify(row, next, e.removals_sent === true);
      classes.push(c);
      if (c !== 'write') continue;
      // What the ingest path's guard leaves: the record if newer than the row (or no row).
      if (row === undefined) unsure.add(key);
      else if (row === null || next.observedAt > row.observedAt) overlay.set(key, next);
    }
    return {
      classes,
      commit: (nextOffset) => {
        const room = () => this.rows() < this.options.maxRows;
        for (const [key, row] of overlay) {
          if (unsure.has(key)) continue;
          if (row === null) continue;
          if (!rows.set(key, row, room)) rows.complete = false;
        }
        for (const key of unsure) rows.forget(key);
        rows.nextOffset = nextOffset;
      },
      forget: (nextOffset) => {
        for (const key of keys) rows.forget(key);
        rows.nextOffset = nextOffset;
      },
    };
  }

  /** A listings batch of the partition committed without a view of its records (none applied). */
  moved(partition: number, storedNext: bigint, nextOffset: bigint): void {
    const rows = this.partitions.get(partition);
    if (!rows) return;
    if (rows.nextOffset === storedNext || (rows.nextOffset === undefined && storedNext === 0n))
      rows.nextOffset = nextOffset;
    else rows.reset(nextOffset);
  }
}

/** The rows of these records' keys, as PostgreSQL holds them now. */
async function readRows(client: PoolClient, events: readonly ListingEvent[]): Promise<Map<string, ServedRow>> {
  const { rows } = await client.query<{
    market: string;
    market_hash_name: string;
    phase: string;
    price: string | null;
    count: number;
    o: string;
    currency: string;
    exterior: string | null;
    stattrak: boolean;
    souvenir: boolean;
    template_id: string | null;
    item_page_url: string | null;
  }>(
    `SELECT c.market, c.market_hash_name, c.phase, c.price::text AS price, c.count,
            (extract(epoch FROM c.observed_at) * 1000)::bigint::text AS o, c.currency, c.exterior, c.stattrak,
            c.souvenir, c.template_id::text AS template_id, c.item_page_url
     FROM unnest($1::text[], $2::text[], $3::text[]) AS k(market, market_hash_name, phase)
     JOIN listings_current c USING (market, market_hash_name, phase)`,
    [events.map((e) => e.market), events.map((e) => e.market_hash_name), events.map((e) => e.phase)],
  );
  return new Map(
    rows.map((r) => [
      itemKey(r.market, r.market_hash_name, r.phase),
      { observedAt: Number(r.o), price: priceCents(r.price), count: r.count, attrs: attrsHash(r) },
    ]),
  );
}

const COPY_ESCAPES: Readonly<Record<string, string>> = { b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v' };

/** A field of COPY's text format: \N is NULL; backslash escapes undone. */
function unescapeCopy(field: string): string | null {
  if (field === '\\N') return null;
  if (!field.includes('\\')) return field;
  return field.replace(/\\(.)/g, (_, c: string) => COPY_ESCAPES[c] ?? c);
}

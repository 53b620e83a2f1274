/**
 * The Avro schemas (../schemas/*.avsc, the contract for downstream teams) and the topic
 * definitions (infra/kafka/topics.json, the one list of topics). Both are files so that
 * non-TypeScript consumers and the infra scripts read the same source.
 */
import { readdirSync, readFileSync } from 'node:fs';
import avro from 'avsc';
import type { EventKind } from './types.js';

const SCHEMA_FILES: Record<EventKind, string> = {
  listing: 'listing.avsc',
  buyorder: 'buyorder.avsc',
  floatRanged: 'float-ranged.avsc',
  floatBuyorder: 'float-buyorder.avsc',
  sale: 'sale.avsc',
  orderBook: 'order-book.avsc',
  historyPoint: 'history-point.avsc',
  historyHours: 'history-hours.avsc',
  pollCycle: 'poll-cycle.avsc',
  pollerCursor: 'poller-cursor.avsc',
  priceChange: 'price-change.avsc',
  currentPrice: 'current-price.avsc',
};
export const EVENT_KINDS = Object.keys(SCHEMA_FILES) as EventKind[];

const SCHEMA_DIR = new URL('../schemas/', import.meta.url);
const TOPICS_FILE = new URL('../../../infra/kafka/topics.json', import.meta.url);

export interface EventSchema {
  kind: EventKind;
  /** The schema as registered (JSON text of the .avsc file). */
  text: string;
  /** Parsed avsc type, used to validate before encoding. */
  type: avro.Type;
  /**
   * The type our consumers decode into: `type`, or for a kind with a withdrawn version
   * (WITHDRAWN) the version whose shape reads every version a record on the topic may have.
   */
  reader: avro.Type;
}

/**
 * Versions published once and withdrawn: no writer uses them again, but their records stay on
 * the topic, and consumers on them still decode everything written now. history-point v2 made
 * `price` nullable for points that carried only hours, which consumers on v1 could not read;
 * v3 is v1 again, and the hours have their own topic (history-hours.v1). Our consumers read with
 * `reader`, so the records written with v2 still decode.
 */
const WITHDRAWN: Partial<Record<EventKind, { versions: readonly number[]; reader: number }>> = {
  historyPoint: { versions: [2], reader: 2 },
};

/** The versions of a kind that were withdrawn (WITHDRAWN). */
export function withdrawnVersions(kind: EventKind): readonly number[] {
  return WITHDRAWN[kind]?.versions ?? [];
}

const schemaCache = new Map<EventKind, EventSchema>();

export function eventSchema(kind: EventKind): EventSchema {
  let s = schemaCache.get(kind);
  if (!s) {
    const text = readFileSync(new URL(SCHEMA_FILES[kind], SCHEMA_DIR), 'utf8');
    const type = avro.Type.forSchema(JSON.parse(text));
    const readerVersion = WITHDRAWN[kind]?.reader;
    const readerText = schemaVersions(kind).find((v) => v.version === readerVersion)?.text;
    const reader = readerText === undefined ? type : avro.Type.forSchema(JSON.parse(readerText));
    s = { kind, text: JSON.stringify(JSON.parse(text)), type, reader };
    schemaCache.set(kind, s);
  }
  return s;
}

/** The name a kind's schema is kept under (schemas/<stem>.avsc, schemas/versions/<stem>/). */
export function schemaStem(kind: EventKind): string {
  return SCHEMA_FILES[kind].replace(/\.avsc$/, '');
}

/**
 * Every version of a kind's schema ever published, oldest first (schemas/versions/<name>/vN.avsc;
 * the last is the current one): the readers downstream teams may still run, which every record
 * written now must decode with (compatibilityOf).
 */
export function schemaVersions(kind: EventKind): { version: number; text: string }[] {
  const dir = new URL(`versions/${schemaStem(kind)}/`, SCHEMA_DIR);
  return readdirSync(dir)
    .map((f) => /^v(\d+)\.avsc$/.exec(f))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ version: Number(m[1]), text: readFileSync(new URL(m[0], dir), 'utf8') }))
    .sort((a, b) => a.version - b.version);
}

export interface TopicDefinition {
  name: string;
  event: EventKind;
  partitions: number;
  /** Topic-level configs (retention.ms, cleanup.policy …) as Kafka expects them: strings. */
  config: Record<string, string>;
}

let topicCache: readonly TopicDefinition[] | undefined;

export function topicDefinitions(): readonly TopicDefinition[] {
  if (!topicCache) {
    const parsed = JSON.parse(readFileSync(TOPICS_FILE, 'utf8')) as { topics: TopicDefinition[] };
    for (const t of parsed.topics) {
      if (!(t.event in SCHEMA_FILES)) throw new Error(`topics.json: ${t.name} names unknown event '${t.event}'`);
    }
    topicCache = Object.freeze(parsed.topics);
  }
  return topicCache;
}

/** The project topic carrying one kind of event (e.g. listing → listings.v1). */
export function topicFor(kind: EventKind): TopicDefinition {
  const t = topicDefinitions().find((d) => d.event === kind);
  if (!t) throw new Error(`no topic carries '${kind}' events`);
  return t;
}

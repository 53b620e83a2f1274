/**
 * Every version of every schema ever published is kept (schemas/versions), and what is written
 * now must be read by consumers on each of them, and read their records (FULL_TRANSITIVE,
 * serde.ts compatibilityOf): checked here with avsc's schema resolution, pair by pair, and on a
 * record of every kind. A withdrawn version (schemas.ts WITHDRAWN) is left out of the pairs, but
 * its consumers must still read what is written now, and our consumers must read its records.
 * The registry enforces the same rule at registration (test/integration/schema-evolution.test.ts).
 */
import avro from 'avsc';
import { describe, expect, it } from 'vitest';
import { SAMPLES } from '../../../test/support/samples.js';
import { compatibilityOf } from './serde.js';
import { EVENT_KINDS, eventSchema, schemaVersions, withdrawnVersions } from './schemas.js';

const typeOf = (text: string) => avro.Type.forSchema(JSON.parse(text) as avro.Schema);
/** Whether a reader on `reader` decodes what `writer` wrote. */
const reads = (reader: string, writer: string): boolean => {
  try {
    typeOf(reader).createResolver(typeOf(writer));
    return true;
  } catch {
    return false;
  }
};

describe('schema versions', () => {
  it('the current schema of every kind is its last kept version', () => {
    for (const kind of EVENT_KINDS) {
      const versions = schemaVersions(kind);
      expect(versions.length, kind).toBeGreaterThan(0);
      expect(
        versions.map((v) => v.version),
        kind,
      ).toEqual(versions.map((_, i) => i + 1));
      expect(JSON.parse(versions.at(-1)?.text ?? 'null'), kind).toEqual(JSON.parse(eventSchema(kind).text));
    }
  });

  it('every pair of versions reads each other both ways, withdrawn versions aside', () => {
    for (const kind of EVENT_KINDS) {
      expect(compatibilityOf(kind), kind).toBe('FULL_TRANSITIVE');
      const versions = schemaVersions(kind).filter((v) => !withdrawnVersions(kind).includes(v.version));
      for (const older of versions)
        for (const newer of versions) {
          if (older.version >= newer.version) continue;
          expect(reads(newer.text, older.text), `${kind}: v${newer.version} reads v${older.version}`).toBe(true);
          expect(reads(older.text, newer.text), `${kind}: v${older.version} reads v${newer.version}`).toBe(true);
        }
    }
  });

  it('a withdrawn version reads what is written now, and our reader reads every version', () => {
    expect(withdrawnVersions('historyPoint')).toEqual([2]);
    for (const kind of EVENT_KINDS) {
      const versions = schemaVersions(kind);
      const now = eventSchema(kind).text;
      for (const v of versions) {
        if (withdrawnVersions(kind).includes(v.version))
          expect(reads(v.text, now), `${kind}: withdrawn v${v.version} reads the current version`).toBe(true);
        expect(
          () => eventSchema(kind).reader.createResolver(typeOf(v.text)),
          `${kind}: our reader reads v${v.version}`,
        ).not.toThrow();
      }
    }
    // history.v1's withdrawn version wrote points without a close; ours decodes them.
    const v2 = typeOf(schemaVersions('historyPoint')[1]?.text as string);
    const hoursOnly = v2.toBuffer({ ...SAMPLES.historyPoint, price: null, hours: SAMPLES.historyHours.hours });
    const reader = eventSchema('historyPoint').reader;
    expect(reader.fromBuffer(hoursOnly, reader.createResolver(v2))).toMatchObject({ price: null, hours: [{}, {}] });
  });

  it("a record of every kind, written now, decodes with each earlier version's reader", () => {
    for (const kind of EVENT_KINDS) {
      const current = eventSchema(kind).type;
      const record = current.toBuffer(SAMPLES[kind]);
      for (const v of schemaVersions(kind)) {
        const reader = typeOf(v.text);
        const decoded = reader.fromBuffer(record, reader.createResolver(current)) as Record<string, unknown>;
        const readerFields = (JSON.parse(v.text) as { fields: { name: string }[] }).fields.map((f) => f.name);
        for (const f of readerFields)
          expect(decoded[f], `${kind} v${v.version}.${f}`).toEqual(
            (SAMPLES[kind] as unknown as Record<string, unknown>)[f] ?? decoded[f],
          );
      }
    }
  });
});

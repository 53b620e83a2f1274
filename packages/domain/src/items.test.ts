import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  catalogueKey,
  DOPPLER_PHASES,
  GAMMA_DOPPLER_PHASES,
  exteriorOfName,
  flagsOfName,
  normalizeExterior,
  normalizePhase,
  parseCatalogueKey,
  PHASES,
} from './items.js';

describe('normalizePhase', () => {
  it.each([
    ['Phase 1', 'Phase 1'],
    ['phase1', 'Phase 1'],
    ['PHASE_2', 'Phase 2'],
    ['p3', 'Phase 3'],
    ['phase-4', 'Phase 4'],
    ['ruby', 'Ruby'],
    ['SAPPHIRE', 'Sapphire'],
    ['black_pearl', 'Black Pearl'],
    ['BlackPearl', 'Black Pearl'],
    ['emerald', 'Emerald'],
    ['', ''],
    [null, ''],
    [undefined, ''],
  ])('%j -> %j', (input, expected) => {
    expect(normalizePhase(input)).toBe(expected);
  });

  it('refuses an unknown phase instead of merging it into "no phase"', () => {
    expect(() => normalizePhase('Phase 5')).toThrow(/unknown phase/);
    expect(() => normalizePhase('Diamond')).toThrow(/unknown phase/);
  });
});

describe('Doppler phase sets', () => {
  it('Doppler has four phases and three gems; Gamma Doppler four phases and Emerald', () => {
    expect(DOPPLER_PHASES).toEqual(['Phase 1', 'Phase 2', 'Phase 3', 'Phase 4', 'Ruby', 'Sapphire', 'Black Pearl']);
    expect(GAMMA_DOPPLER_PHASES).toEqual(['Phase 1', 'Phase 2', 'Phase 3', 'Phase 4', 'Emerald']);
  });
});

describe('normalizeExterior', () => {
  it.each([
    ['factory new', 'Factory New'],
    ['FACTORY NEW', 'Factory New'],
    ['Field-Tested', 'Field-Tested'],
    ['field tested', 'Field-Tested'],
    ['field_tested', 'Field-Tested'],
    ['WW', 'Well-Worn'],
    ['battle-scarred', 'Battle-Scarred'],
    ['WearCategory1', 'Minimal Wear'],
    ['', null],
    ['Not Painted', null],
  ])('%j -> %j', (input, expected) => {
    expect(normalizeExterior(input)).toBe(expected);
  });
  it('refuses garbage', () => {
    expect(() => normalizeExterior('shiny')).toThrow(/unknown exterior/);
  });
});

describe('names', () => {
  it('reads exterior and flags from the market_hash_name', () => {
    const name = 'StatTrak™ AK-47 | Redline (Field-Tested)';
    expect(exteriorOfName(name)).toBe('Field-Tested');
    expect(flagsOfName(name)).toEqual({ stattrak: 1, souvenir: 0 });
    expect(flagsOfName('Souvenir AWP | Dragon Lore (Factory New)')).toEqual({
      stattrak: 0,
      souvenir: 1,
    });
    expect(exteriorOfName('Sticker | Crown (Foil)')).toBeNull();
  });
});

describe('catalogue keys', () => {
  it('appends the phase once, after the exterior', () => {
    expect(catalogueKey({ marketHashName: '★ Karambit | Doppler (Factory New)', phase: 'Ruby' })).toBe(
      '★ Karambit | Doppler (Factory New) (Ruby)',
    );
    expect(catalogueKey({ marketHashName: 'AK-47 | Redline (Field-Tested)', phase: '' })).toBe(
      'AK-47 | Redline (Field-Tested)',
    );
  });

  it('parses back what it builds, for any name and phase (property)', () => {
    const name = fc
      .string({ minLength: 1, maxLength: 60 })
      .map((s) => s.trim())
      .filter((s) => s.length > 0 && !PHASES.some((p) => s.endsWith(`(${p})`)));
    const phase = fc.constantFrom('' as const, ...PHASES);
    fc.assert(
      fc.property(name, phase, (marketHashName, p) => {
        expect(parseCatalogueKey(catalogueKey({ marketHashName, phase: p }))).toEqual({
          marketHashName,
          phase: p,
        });
      }),
    );
  });

  it('refuses an empty key', () => {
    expect(() => parseCatalogueKey('  ')).toThrow(/empty/);
  });
});

import { catalogueKey, exteriorOfName, flagsOfName, parseCatalogueKey, type Exterior } from '@skinprices/domain';
import { describe, expect, it } from 'vitest';
import {
  FULL_CATALOGUE_SIZE,
  SMALL_CATALOGUE_SIZE,
  generateCatalogue,
  type CatalogueItem,
  type ItemCategory,
} from './catalogue.js';

const DOPPLER_PHASES = ['Phase 1', 'Phase 2', 'Phase 3', 'Phase 4', 'Ruby', 'Sapphire', 'Black Pearl'];
const GAMMA_DOPPLER_PHASES = ['Phase 1', 'Phase 2', 'Phase 3', 'Phase 4', 'Emerald'];
const CATEGORIES: readonly ItemCategory[] = ['weapon', 'knife', 'gloves', 'sticker', 'case', 'agent', 'charm', 'other'];

// Generated once: most checks read the same full catalogue. This first call also builds the
// cached item universe, so its time is the cold one a simulator start pays.
const coldStarted = performance.now();
const full = generateCatalogue({ size: FULL_CATALOGUE_SIZE });
const coldMs = performance.now() - coldStarted;
const small = generateCatalogue();

const distinctNames = (rows: readonly CatalogueItem[]): number => new Set(rows.map((r) => r.marketHashName)).size;

/** Phases of each name, in row order. */
function phasesByName(rows: readonly CatalogueItem[]): Map<string, string[]> {
  const byName = new Map<string, string[]>();
  for (const r of rows) byName.set(r.marketHashName, [...(byName.get(r.marketHashName) ?? []), r.phase]);
  return byName;
}

/** Names per category. */
function categoryMix(rows: readonly CatalogueItem[]): Record<ItemCategory, number> {
  const mix = Object.fromEntries(CATEGORIES.map((c) => [c, 0])) as Record<ItemCategory, number>;
  for (const r of rows) if (r.phase === '' || r.phase === 'Phase 1') mix[r.category]++;
  return mix;
}

/** 'StatTrak™ AK-47 | Redline (Field-Tested)' → 'Redline'; null for names without a finish. */
function finishOf(name: string): string | null {
  const m = /\| (.+) \((Factory New|Minimal Wear|Field-Tested|Well-Worn|Battle-Scarred)\)$/.exec(name);
  return m?.[1] ?? null;
}

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

describe('generateCatalogue: determinism', () => {
  it('returns identical output for the same seed and size', () => {
    expect(generateCatalogue({ seed: 7, size: 2_000 })).toEqual(generateCatalogue({ seed: 7, size: 2_000 }));
    expect(generateCatalogue()).toEqual(generateCatalogue({ seed: 1, size: SMALL_CATALOGUE_SIZE }));
  });

  it('returns a different catalogue for another seed', () => {
    const a = generateCatalogue({ seed: 7, size: 2_000 });
    const b = generateCatalogue({ seed: 8, size: 2_000 });
    expect(a.map((r) => r.marketHashName)).not.toEqual(b.map((r) => r.marketHashName));
    // Even the full catalogue, whose names barely depend on the seed, gets other prices.
    const fullOther = generateCatalogue({ seed: 2, size: FULL_CATALOGUE_SIZE });
    expect(fullOther.map((r) => r.basePriceCents)).not.toEqual(full.map((r) => r.basePriceCents));
  });

  it('prices an item the same whatever the catalogue size', () => {
    const fullPrice = new Map(full.map((r) => [catalogueKey(r), r.basePriceCents]));
    const shared = small.filter((r) => fullPrice.has(catalogueKey(r)));
    expect(shared.length).toBeGreaterThan(small.length / 2);
    expect(shared.filter((r) => fullPrice.get(catalogueKey(r)) !== r.basePriceCents)).toEqual([]);
  });
});

describe('generateCatalogue: size and identity', () => {
  it.each([1, SMALL_CATALOGUE_SIZE, 5_000, FULL_CATALOGUE_SIZE])('size %i gives exactly that many names', (size) => {
    const rows = size === FULL_CATALOGUE_SIZE ? full : generateCatalogue({ seed: 3, size });
    expect(distinctNames(rows)).toBe(size);
  });

  it.each([2, 7, 11, 12, 13, 299, 34_999])('size %i gives exactly that many names', (size) => {
    expect(distinctNames(generateCatalogue({ seed: 5, size }))).toBe(size);
  });

  it('has unique (name, phase) rows and a dense index', () => {
    expect(new Set(full.map((r) => catalogueKey(r))).size).toBe(full.length);
    expect(full.filter((r, i) => r.index !== i)).toEqual([]);
  });

  it('keeps the phase out of the name', () => {
    const bad = full.filter((r) => {
      const back = parseCatalogueKey(catalogueKey(r));
      return (
        parseCatalogueKey(r.marketHashName).phase !== '' ||
        back.marketHashName !== r.marketHashName ||
        back.phase !== r.phase
      );
    });
    expect(bad).toEqual([]);
  });

  it('refuses sizes outside 1..FULL_CATALOGUE_SIZE and non-integer seeds', () => {
    expect(() => generateCatalogue({ size: 0 })).toThrow(RangeError);
    expect(() => generateCatalogue({ size: FULL_CATALOGUE_SIZE + 1 })).toThrow(RangeError);
    expect(() => generateCatalogue({ size: 2.5 })).toThrow(RangeError);
    expect(() => generateCatalogue({ seed: 0.5 })).toThrow(RangeError);
  });
});

describe('generateCatalogue: phases', () => {
  const byName = phasesByName(full);

  it('gives Doppler knives exactly the 7 Doppler phases and Gamma Doppler knives the 5 Gamma ones', () => {
    const expected = (name: string): readonly string[] =>
      name.includes('| Gamma Doppler (') ? GAMMA_DOPPLER_PHASES : name.includes('| Doppler (') ? DOPPLER_PHASES : [''];
    const wrong = [...byName].filter(([name, phases]) => phases.join() !== expected(name).join());
    expect(wrong).toEqual([]);
    const names = [...byName.keys()];
    expect(names.filter((n) => n.includes('| Doppler (')).length).toBeGreaterThan(10);
    expect(names.filter((n) => n.includes('| Gamma Doppler (')).length).toBeGreaterThan(10);
  });

  it('keeps phases on knives, and the rows of one name together', () => {
    expect(full.filter((r) => r.phase !== '' && r.category !== 'knife')).toEqual([]);
    const runs = full.filter((r, i) => full[i - 1]?.marketHashName !== r.marketHashName).length;
    expect(runs).toBe(FULL_CATALOGUE_SIZE);
  });
});

describe('generateCatalogue: names agree with the fields', () => {
  it('has the exterior of the name, flags of the name and float only with wear', () => {
    const bad = full.filter((r) => {
      const flags = flagsOfName(r.marketHashName);
      return (
        r.exterior !== exteriorOfName(r.marketHashName) ||
        r.stattrak !== (flags.stattrak === 1) ||
        r.souvenir !== (flags.souvenir === 1) ||
        (r.stattrak && r.souvenir) ||
        r.hasFloat !== (r.exterior !== null) ||
        !Number.isInteger(r.basePriceCents) ||
        r.basePriceCents < 3
      );
    });
    expect(bad).toEqual([]);
  });

  it('spells knives, gloves and variants the Steam way', () => {
    const misspelt = full.filter((r) => {
      const name = r.marketHashName;
      const wantsPrefix: Partial<Record<ItemCategory, string>> = {
        knife: r.stattrak ? '★ StatTrak™ ' : '★ ',
        gloves: '★ ',
        weapon: r.stattrak ? 'StatTrak™ ' : r.souvenir ? 'Souvenir ' : '',
        sticker: 'Sticker | ',
        charm: 'Charm | ',
      };
      const noWear = ['sticker', 'case', 'agent', 'charm'].includes(r.category);
      return (
        !name.startsWith(wantsPrefix[r.category] ?? '') ||
        (r.category === 'gloves' && (r.stattrak || r.souvenir)) ||
        (r.souvenir && r.category !== 'weapon') ||
        (noWear && r.exterior !== null)
      );
    });
    expect(misspelt).toEqual([]);
    const names = new Set(full.map((r) => r.marketHashName));
    expect(names.has('★ Karambit')).toBe(true);
    expect(full.find((r) => r.marketHashName === '★ Karambit')?.exterior).toBeNull();
  });

  it('limits Fade-like weapon and knife finishes to Factory New and Minimal Wear', () => {
    const lowFloat: readonly (Exterior | null)[] = ['Factory New', 'Minimal Wear'];
    const fadeLike = full.filter((r) => {
      const finish = finishOf(r.marketHashName);
      // Gloves are exempt: a Specialist Gloves | Fade drops in every wear.
      return r.category !== 'gloves' && (finish === 'Fade' || finish === 'Doppler' || finish === 'Gamma Doppler');
    });
    expect(fadeLike.length).toBeGreaterThan(100);
    expect(fadeLike.filter((r) => !lowFloat.includes(r.exterior))).toEqual([]);
  });

  it('gives a paint index exactly to finishes, one per finish name', () => {
    const indexOfFinish = new Map<string, number | null>();
    const finishOfIndex = new Map<number | null, string>();
    const bad = full.filter((r) => {
      const finish = finishOf(r.marketHashName);
      if (finish === null) return r.paintIndex !== null;
      const known = indexOfFinish.get(finish) ?? r.paintIndex;
      const knownFinish = finishOfIndex.get(r.paintIndex) ?? finish;
      indexOfFinish.set(finish, r.paintIndex);
      finishOfIndex.set(r.paintIndex, finish);
      return r.paintIndex === null || known !== r.paintIndex || knownFinish !== finish;
    });
    expect(bad).toEqual([]);
  });
});

describe('generateCatalogue: prices', () => {
  it('prices Ruby above Phase 2 for the same knife', () => {
    const byKey = new Map(full.map((r) => [catalogueKey(r), r.basePriceCents]));
    let checked = 0;
    for (const r of full) {
      if (r.phase !== 'Ruby') continue;
      const phase2 = byKey.get(catalogueKey({ marketHashName: r.marketHashName, phase: 'Phase 2' }));
      expect(phase2).toBeDefined();
      expect(r.basePriceCents, r.marketHashName).toBeGreaterThan(phase2 ?? Infinity);
      checked++;
    }
    expect(checked).toBeGreaterThan(10);
  });

  it('prices Factory New at or above Battle-Scarred for the same skin, on average', () => {
    const byName = new Map(full.map((r) => [r.marketHashName, r.basePriceCents]));
    const ratios: number[] = [];
    for (const r of full) {
      if (r.exterior !== 'Factory New' || r.phase !== '') continue;
      const bs = byName.get(r.marketHashName.replace('(Factory New)', '(Battle-Scarred)'));
      if (bs !== undefined) ratios.push(r.basePriceCents / bs);
    }
    expect(ratios.length).toBeGreaterThan(1_000);
    expect(median(ratios)).toBeGreaterThan(2);
    expect(ratios.filter((x) => x >= 1).length / ratios.length).toBeGreaterThan(0.95);
  });

  it('puts a StatTrak™ premium of about 1.5–3x on weapon skins', () => {
    const byName = new Map(full.map((r) => [r.marketHashName, r.basePriceCents]));
    const ratios: number[] = [];
    for (const r of full) {
      if (r.category !== 'weapon' || !r.stattrak || r.basePriceCents < 100) continue;
      const plain = byName.get(r.marketHashName.replace('StatTrak™ ', ''));
      if (plain !== undefined) ratios.push(r.basePriceCents / plain);
    }
    expect(ratios.length).toBeGreaterThan(500);
    expect(median(ratios)).toBeGreaterThan(1.5);
    expect(median(ratios)).toBeLessThan(3);
  });

  it('is long-tailed and plausible per category', () => {
    const prices = (category: ItemCategory): number[] =>
      full.filter((r) => r.category === category).map((r) => r.basePriceCents);
    expect(median(prices('sticker'))).toBeLessThan(500);
    expect(median(prices('case'))).toBeLessThan(1_000);
    expect(median(prices('weapon'))).toBeGreaterThan(5);
    expect(median(prices('weapon'))).toBeLessThan(5_000);
    expect(median(prices('knife'))).toBeGreaterThan(5_000);
    expect(median(prices('gloves'))).toBeGreaterThan(5_000);
    expect(Math.max(...prices('knife'))).toBeGreaterThan(500_000);
  });
});

describe('generateCatalogue: content mix', () => {
  it('makes the full catalogue mostly weapon skins, then stickers, then knives and gloves', () => {
    const mix = categoryMix(full);
    expect(mix.weapon).toBeGreaterThan(FULL_CATALOGUE_SIZE / 2);
    expect(mix.weapon).toBeGreaterThan(mix.sticker);
    expect(mix.sticker).toBeGreaterThan(mix.knife + mix.gloves);
    expect(mix.knife).toBeGreaterThan(mix.gloves);
    for (const c of ['case', 'agent', 'charm'] as const) {
      expect(mix[c]).toBeGreaterThanOrEqual(10);
      expect(mix[c]).toBeLessThan(100);
    }
  });

  it.each([1, 2, 3, 4, 5])('samples every kind of item into the small catalogue (seed %i)', (seed) => {
    const rows = generateCatalogue({ seed, size: SMALL_CATALOGUE_SIZE });
    const mix = categoryMix(rows);
    for (const c of CATEGORIES) expect(mix[c], c).toBeGreaterThan(0);
    expect(rows.some((r) => r.marketHashName.includes('| Doppler ('))).toBe(true);
    expect(rows.some((r) => r.marketHashName.includes('| Gamma Doppler ('))).toBe(true);
    expect(rows.some((r) => r.stattrak)).toBe(true);
    expect(rows.some((r) => r.souvenir)).toBe(true);
    expect(rows.filter((r) => r.phase !== '').length).toBeGreaterThanOrEqual(12);
  });

  it('is not a prefix: a small catalogue spreads over many weapons', () => {
    const weapons = new Set(
      small
        .filter((r) => r.category === 'weapon')
        .map((r) => r.marketHashName.replace(/^(StatTrak™ |Souvenir )/, '').split(' | ')[0]),
    );
    expect(weapons.size).toBeGreaterThan(20);
  });
});

describe('generateCatalogue: speed', () => {
  it('generates the full catalogue in well under a second, cold and warm', () => {
    expect(coldMs).toBeLessThan(1_000);
    const started = performance.now();
    generateCatalogue({ seed: 42, size: FULL_CATALOGUE_SIZE });
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});

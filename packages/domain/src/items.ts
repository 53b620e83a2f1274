/**
 * Item identity: (`market_hash_name`, phase). Phases are never merged: a Doppler Ruby and a
 * Doppler Phase 2 are different items with very different prices.
 */
import { AppError } from './errors.js';

export const PHASES = [
  'Phase 1',
  'Phase 2',
  'Phase 3',
  'Phase 4',
  'Ruby',
  'Sapphire',
  'Black Pearl',
  'Emerald',
] as const;
export type Phase = (typeof PHASES)[number];
/** The phases a Doppler finish comes in (no Emerald), and a Gamma Doppler (Emerald, no other gem). */
export const DOPPLER_PHASES: readonly Phase[] = PHASES.filter((p) => p !== 'Emerald');
export const GAMMA_DOPPLER_PHASES: readonly Phase[] = [...PHASES.filter((p) => p.startsWith('Phase ')), 'Emerald'];

/** `''` means "no phase"; we store and emit the empty string, the API may show null. */
export type PhaseOrNone = Phase | '';

export const EXTERIORS = ['Factory New', 'Minimal Wear', 'Field-Tested', 'Well-Worn', 'Battle-Scarred'] as const;
export type Exterior = (typeof EXTERIORS)[number];

export interface ItemIdentity {
  marketHashName: string;
  phase: PhaseOrNone;
}

const squash = (s: string): string => s.toLowerCase().replace(/[^a-z0-9]/g, '');

const PHASE_ALIASES: ReadonlyMap<string, Phase> = new Map<string, Phase>([
  ...PHASES.map((p): [string, Phase] => [squash(p), p]),
  ['p1', 'Phase 1'],
  ['p2', 'Phase 2'],
  ['p3', 'Phase 3'],
  ['p4', 'Phase 4'],
  ['bp', 'Black Pearl'],
]);

/**
 * Upstreams spell phases many ways (`phase1`, `PHASE_2`, `ruby`, `black-pearl`, `P4`).
 * Returns the English canonical name, `''` for none, and throws `invalid_phase` for anything
 * else: an unknown phase must not silently become "no phase" and merge two items.
 */
export function normalizePhase(input: string | null | undefined): PhaseOrNone {
  if (input === null || input === undefined) return '';
  const key = squash(input);
  if (key === '') return '';
  const phase = PHASE_ALIASES.get(key);
  if (!phase) {
    throw new AppError('invalid_phase', `unknown phase '${input}'`, { details: { phase: input } });
  }
  return phase;
}

export function isPhase(value: unknown): value is Phase {
  return typeof value === 'string' && (PHASES as readonly string[]).includes(value);
}

const EXTERIOR_ALIASES: ReadonlyMap<string, Exterior> = new Map<string, Exterior>([
  ...EXTERIORS.map((e): [string, Exterior] => [squash(e), e]),
  ['fn', 'Factory New'],
  ['mw', 'Minimal Wear'],
  ['ft', 'Field-Tested'],
  ['ww', 'Well-Worn'],
  ['bs', 'Battle-Scarred'],
  // Some upstreams send the wear as a machine tag.
  ['wearcategory0', 'Factory New'],
  ['wearcategory1', 'Minimal Wear'],
  ['wearcategory2', 'Field-Tested'],
  ['wearcategory3', 'Well-Worn'],
  ['wearcategory4', 'Battle-Scarred'],
]);

/** Exterior in any case or abbreviation → canonical name; `null` for items without wear. */
export function normalizeExterior(input: string | null | undefined): Exterior | null {
  if (input === null || input === undefined) return null;
  const key = squash(input);
  if (key === '' || key === 'notpainted') return null;
  const ext = EXTERIOR_ALIASES.get(key);
  if (!ext) {
    throw new AppError('invalid_exterior', `unknown exterior '${input}'`, {
      details: { exterior: input },
    });
  }
  return ext;
}

const EXTERIOR_SUFFIX = new RegExp(`\\((${EXTERIORS.join('|')})\\)$`);

/** The exterior a market_hash_name carries at its end, e.g. `… (Field-Tested)`. */
export function exteriorOfName(marketHashName: string): Exterior | null {
  const m = EXTERIOR_SUFFIX.exec(marketHashName);
  return m ? (m[1] as Exterior) : null;
}

export interface ItemFlags {
  stattrak: 0 | 1;
  souvenir: 0 | 1;
}

/** StatTrak and Souvenir are part of the name in CS2 (`StatTrak™ AK-47 | …`, `Souvenir AWP | …`). */
export function flagsOfName(marketHashName: string): ItemFlags {
  return {
    stattrak: marketHashName.includes('StatTrak™') ? 1 : 0,
    souvenir: marketHashName.startsWith('Souvenir ') ? 1 : 0,
  };
}

/**
 * Catalogue key of the spec (2.6): the name already carries the exterior, so the phase is
 * appended once: `★ Karambit | Doppler (Factory New) (Ruby)`.
 */
export function catalogueKey(item: ItemIdentity): string {
  return item.phase ? `${item.marketHashName} (${item.phase})` : item.marketHashName;
}

const PHASE_SUFFIX = new RegExp(`^(.*) \\((${PHASES.join('|')})\\)$`);

/**
 * Inverse of `catalogueKey`. A trailing `(Ruby)` etc. is read as a phase; no CS2
 * market_hash_name ends in a phase name in parentheses, so this is unambiguous.
 */
export function parseCatalogueKey(key: string): ItemIdentity {
  const name = key.trim();
  if (name === '') {
    throw new AppError('invalid_item', 'empty item name');
  }
  const m = PHASE_SUFFIX.exec(name);
  if (m) return { marketHashName: m[1] as string, phase: m[2] as Phase };
  return { marketHashName: name, phase: '' };
}

/**
 * The one key of an item in code (in-memory maps, de-duplication): NUL-separated, as NUL cannot
 * occur in a name. Topics key items their own way (events' itemKey: a published JSON format).
 */
export function identityKey(item: ItemIdentity): string {
  return `${item.marketHashName}\u0000${item.phase}`;
}

/** An item of one marketplace, keyed like identityKey with the marketplace first. */
export function marketItemKey(market: string, marketHashName: string, phase: string): string {
  return `${market}\u0000${marketHashName}\u0000${phase}`;
}

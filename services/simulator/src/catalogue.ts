/**
 * Deterministic CS2 item catalogue for the marketplace simulator.
 *
 * The content (which names exist, their wear, flags, paint index) is a fixed "universe" built
 * combinatorially from the embedded lists below; it does not depend on the seed, so the same skin
 * always has the same shape. The seed decides which names a catalogue smaller than the universe
 * keeps, and every price. Prices are drawn from hashes of (seed, name) rather than from one PRNG
 * stream, so an item keeps its price whatever the catalogue size.
 *
 * A catalogue of `size` names is a stratified sample of the universe: every stratum (plain,
 * StatTrak™ and Souvenir weapon skins, Doppler / Gamma Doppler / other knives, gloves, stickers,
 * cases, agents, charms, other) gets at least one name, the rest is shared in proportion to the
 * real catalogue's mix. A prefix would give a 300-name catalogue of AK-47s only.
 */
import {
  DOPPLER_PHASES,
  EXTERIORS,
  GAMMA_DOPPLER_PHASES,
  type Exterior,
  type Phase,
  type PhaseOrNone,
} from '@skinprices/domain';

export type ItemCategory = 'weapon' | 'knife' | 'gloves' | 'sticker' | 'case' | 'agent' | 'charm' | 'other';

export interface CatalogueItem {
  /** Dense row index 0..rows-1, stable for a given (seed, size). */
  index: number;
  /** Full Steam-style name incl. StatTrak™/Souvenir prefix and wear, e.g. 'StatTrak™ AK-47 | Redline (Field-Tested)', '★ Karambit | Doppler (Factory New)'. Never contains the phase. */
  marketHashName: string;
  /** '' when none. Doppler knives: one row per 'Phase 1'..'Phase 4','Ruby','Sapphire','Black Pearl'; Gamma Doppler knives: 'Phase 1'..'Phase 4','Emerald'. */
  phase: PhaseOrNone;
  exterior: Exterior | null; // null for stickers, cases, agents, charms, vanilla knives ('★ Karambit' has no wear)
  stattrak: boolean;
  souvenir: boolean;
  category: ItemCategory;
  /** Reference price in integer US cents, >= 3. Long-tailed and plausible: cases/stickers mostly cents to a few dollars, most skins $0.05–$50, coverts/knives/gloves $50–$5,000+, Ruby/Sapphire/Black Pearl/Emerald far above the plain phases, Factory New > Battle-Scarred, StatTrak™ ~1.5–3x. */
  basePriceCents: number;
  /** Paint (finish) index for weapon/knife/glove finishes; null otherwise. Same finish name → same paint index. */
  paintIndex: number | null;
  /** Whether float ranges apply (true exactly when exterior !== null). */
  hasFloat: boolean;
}

export interface CatalogueOptions {
  /** PRNG seed; same seed + size → identical output. @default 1 */
  seed?: number;
  /** Number of distinct market_hash_names (phase rows share one name, so rows >= size). @default SMALL_CATALOGUE_SIZE */
  size?: number;
}

/** Size of the real CS2 catalogue (distinct market_hash_names); the largest size accepted. */
export const FULL_CATALOGUE_SIZE = 35_000;
/** Default size: small enough for quick runs, large enough to hold every kind of item. */
export const SMALL_CATALOGUE_SIZE = 300;

// ---------------------------------------------------------------------------------------------
// Hashing and the seeded PRNG
// ---------------------------------------------------------------------------------------------

/** 32-bit integer finaliser (lowbias32): every input bit affects every output bit. */
function mix32(x: number): number {
  let h = x >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x7feb352d);
  h ^= h >>> 15;
  h = Math.imul(h, 0x846ca68b);
  h ^= h >>> 16;
  return h >>> 0;
}

/** FNV-1a over UTF-16 code units; only used to key hash-derived draws, never for security. */
function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

const TWO_POW_32 = 4_294_967_296;

/** Uniform in (0, 1) from a key and a salt; open at both ends so `Math.log` is always finite. */
function unit(key: number, salt: number): number {
  return (mix32(mix32(key) ^ salt) + 0.5) / TWO_POW_32;
}

/** Standard normal from a key and a salt (Box–Muller). */
function normal(key: number, salt: number): number {
  const u1 = unit(key, salt);
  const u2 = unit(key, salt ^ 0x5bd1e995);
  return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
}

/** mulberry32: a tiny, fast, well-mixed PRNG; plenty for shuffles. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / TWO_POW_32;
  };
}

/** Picks from `[value, weight]` pairs with a uniform `u` in [0, 1). */
function pickWeighted<T>(choices: readonly (readonly [T, number])[], u: number): T {
  const total = choices.reduce((sum, [, w]) => sum + w, 0);
  let x = u * total;
  for (const [value, weight] of choices) {
    x -= weight;
    if (x < 0) return value;
  }
  const last = choices[choices.length - 1];
  if (!last) throw new Error('pickWeighted: no choices');
  return last[0];
}

/**
 * Splits an embedded name list. The lists are template literals of `a | b | c` so that long
 * lists stay a few dense lines (an array literal would be formatted one name per line).
 */
function list(text: string, separator = '|'): string[] {
  return text
    .split(separator)
    .map((name) => name.trim())
    .filter((name) => name !== '');
}

// Salts keep the independent draws about one key independent.
const SALT = {
  rarity: 0x1001,
  source: 0x1002,
  floats: 0x1003,
  filler: 0x1004,
  roster: 0x1005,
  stickerVariant: 0x1006,
  gloveFinish: 0x1007,
  family: 0x2001,
  premium: 0x2002,
  row: 0x2003,
  stratum: 0x2004,
} as const;

// ---------------------------------------------------------------------------------------------
// Universe entries
// ---------------------------------------------------------------------------------------------

type Stratum =
  | 'weapon'
  | 'weapon-stattrak'
  | 'weapon-souvenir'
  | 'knife-doppler'
  | 'knife-gamma'
  | 'knife'
  | 'gloves'
  | 'sticker'
  | 'case'
  | 'agent'
  | 'charm'
  | 'other';

/** A StatTrak™ or Souvenir multiplier, drawn once per family between `min` and `max`. */
interface Premium {
  min: number;
  max: number;
}

/** One distinct market_hash_name of the universe, with a seed-independent price model. */
interface Entry {
  name: string;
  category: ItemCategory;
  stratum: Stratum;
  exterior: Exterior | null;
  stattrak: boolean;
  souvenir: boolean;
  paintIndex: number | null;
  phases: readonly PhaseOrNone[];
  /** Median price in cents before the seeded draws. */
  medianCents: number;
  /**
   * Names of one family (all wears and variants of a skin, all variants of a sticker) share
   * their seeded price factor, so Factory New stays above Battle-Scarred for the same skin.
   */
  familyHash: number;
  /** Log-normal sigma of the family factor. */
  spread: number;
  premium: Premium | null;
  nameHash: number;
}

type EntryInit = Omit<Entry, 'familyHash' | 'nameHash' | 'phases' | 'paintIndex' | 'premium'> & {
  family: string;
  phases?: readonly PhaseOrNone[];
  paintIndex?: number | null;
  premium?: Premium | null;
};

/** Builds every entry with the same property order, so all share one hidden class (fast rows). */
function entry(init: EntryInit): Entry {
  return {
    name: init.name,
    category: init.category,
    stratum: init.stratum,
    exterior: init.exterior,
    stattrak: init.stattrak,
    souvenir: init.souvenir,
    paintIndex: init.paintIndex ?? null,
    phases: init.phases ?? NO_PHASE,
    medianCents: init.medianCents,
    familyHash: hashString(init.family),
    spread: init.spread,
    premium: init.premium ?? null,
    nameHash: hashString(init.name),
  };
}

const NO_PHASE: readonly PhaseOrNone[] = [''];

/** Price multiplier of a phase over the finish's median; the gems are what traders chase. */
const PHASE_PREMIUM: Readonly<Record<Phase, number>> = {
  'Phase 1': 0.9,
  'Phase 2': 1.25,
  'Phase 3': 0.85,
  'Phase 4': 1.05,
  Ruby: 7,
  Sapphire: 8.5,
  'Black Pearl': 5,
  Emerald: 7.5,
};

// ---------------------------------------------------------------------------------------------
// Wear
// ---------------------------------------------------------------------------------------------

/** Inclusive float range a finish can drop with. */
type FloatRange = readonly [min: number, max: number];

/** Upper float bound of each exterior, in `EXTERIORS` order (FN < 0.07 … BS <= 1). */
const EXTERIOR_UPPER = [0.07, 0.15, 0.38, 0.45, 1] as const;

/** Exteriors a float range reaches: Fade (0–0.08) only FN/MW, Asiimov (0.18–1) only FT/WW/BS. */
function exteriorsOf([min, max]: FloatRange): Exterior[] {
  return EXTERIORS.filter((_, i) => {
    const lower = i === 0 ? 0 : (EXTERIOR_UPPER[i - 1] ?? 1);
    const upper = EXTERIOR_UPPER[i] ?? 1;
    return min < upper && max > lower;
  });
}

/** Range of gloves and of knife finishes without a range of their own: every wear exists. */
const STANDARD_WEAR: FloatRange = [0.06, 0.8];

/** Float ranges of finishes whose range is part of their identity, wherever they appear. */
const FINISH_FLOATS: ReadonlyMap<string, FloatRange> = new Map<string, FloatRange>([
  ['Fade', [0, 0.08]],
  ['Doppler', [0, 0.08]],
  ['Gamma Doppler', [0, 0.08]],
  ['Marble Fade', [0, 0.08]],
  ['Tiger Tooth', [0, 0.08]],
  ['Slaughter', [0.01, 0.26]],
  ['Rust Coat', [0.4, 1]],
  ['Asiimov', [0.18, 1]],
  ['Crimson Web', [0.06, 0.8]],
  ['Ultraviolet', [0.06, 0.8]],
  ['Hot Rod', [0, 0.08]],
  ['Blaze', [0, 0.08]],
  ['Lightning Strike', [0, 0.08]],
  ['Graphite', [0, 0.12]],
  ['Howl', [0, 0.4]],
  ['Dragon Lore', [0, 0.7]],
  ['Redline', [0.1, 0.7]],
  ['Poseidon', [0, 0.1]],
  ['Knight', [0, 0.1]],
  ['Icarus Fell', [0, 0.1]],
  ['Blue Phosphor', [0, 0.08]],
  ['Emerald Pinstripe', [0, 0.4]],
  ["Man-o'-war", [0.1, 0.2]],
]);

/** Float presets of ordinary finishes, weighted like the game's: most drop in every wear. */
const FLOAT_PRESETS: readonly (readonly [FloatRange, number])[] = [
  [[0, 1], 30],
  [[0, 0.8], 15],
  [[0.06, 0.8], 15],
  [[0, 0.5], 10],
  [[0.02, 0.6], 10],
  [[0.1, 1], 6],
  [[0, 0.08], 4],
  [[0.18, 1], 4],
  [[0, 0.3], 4],
  [[0, 0.4], 2],
];

// ---------------------------------------------------------------------------------------------
// Paint indexes
// ---------------------------------------------------------------------------------------------

/** The game's indexes of some well-known finishes, so simulated listings look familiar. */
const KNOWN_PAINT_INDEX: readonly (readonly [string, number])[] = [
  ['Forest DDPAT', 5],
  ['Crimson Web', 12],
  ['Blaze', 37],
  ['Fade', 38],
  ['Night', 40],
  ['Blue Steel', 42],
  ['Stained', 43],
  ['Case Hardened', 44],
  ['Lightning Strike', 51],
  ['Slaughter', 59],
  ['Safari Mesh', 72],
  ['Boreal Forest', 77],
  ['Ultraviolet', 98],
  ['Urban Masked', 143],
  ['Scorched', 175],
  ['Fire Serpent', 180],
  ['Asiimov', 279],
  ['Redline', 282],
  ['Vulcan', 302],
  ['Howl', 309],
  ['Dragon Lore', 344],
  ['Tiger Tooth', 409],
  ['Marble Fade', 413],
  ['Rust Coat', 414],
  // The game gives every Doppler phase its own index; our contract is one index per finish name.
  ['Doppler', 418],
  ['Hyper Beast', 430],
  ['Hot Rod', 445],
  ['Medusa', 446],
  ['Kill Confirmed', 504],
  ['Gamma Doppler', 569],
];

/** Finish name → paint index; names the game list does not cover get 2000, 2001, … in build order. */
function paintIndexRegistry(): (finish: string) => number {
  const byName = new Map<string, number>(KNOWN_PAINT_INDEX);
  let next = 2000;
  return (finish) => {
    let index = byName.get(finish);
    if (index === undefined) {
      index = next++;
      byName.set(finish, index);
    }
    return index;
  };
}

// ---------------------------------------------------------------------------------------------
// Weapon skins
// ---------------------------------------------------------------------------------------------

type Rarity = 'consumer' | 'industrial' | 'milspec' | 'restricted' | 'classified' | 'covert';
/** Where a skin drops: cases give StatTrak™ variants, map collections Souvenirs, others neither. */
type Source = 'case' | 'souvenir' | 'collection';

const RARITY_WEIGHTS: readonly (readonly [Rarity, number])[] = [
  ['consumer', 11],
  ['industrial', 15],
  ['milspec', 32],
  ['restricted', 22],
  ['classified', 13],
  ['covert', 7],
];

/** Factory New median in cents for a weapon of popularity 1. */
const RARITY_FN_CENTS: Readonly<Record<Rarity, number>> = {
  consumer: 12,
  industrial: 30,
  milspec: 90,
  restricted: 400,
  classified: 1_600,
  covert: 9_000,
};

/** Rarer skins vary more: a covert can be $40 or $4,000. */
const RARITY_SPREAD: Readonly<Record<Rarity, number>> = {
  consumer: 0.5,
  industrial: 0.6,
  milspec: 0.7,
  restricted: 0.8,
  classified: 0.85,
  covert: 0.9,
};

/** Price relative to Factory New; worn copies of the same skin are cheaper. */
const WEAPON_WEAR_FACTOR: Readonly<Record<Exterior, number>> = {
  'Factory New': 1,
  'Minimal Wear': 0.55,
  'Field-Tested': 0.35,
  'Well-Worn': 0.28,
  'Battle-Scarred': 0.24,
};

const WEAPON_STATTRAK: Premium = { min: 1.5, max: 3 };
const WEAPON_SOUVENIR: Premium = { min: 1.5, max: 8 };

interface WeaponSpec {
  name: string;
  /** Demand multiplier; also how many finishes the weapon gets. */
  popularity: number;
  /** Real finishes of this weapon; invented ones fill up to its skin count. */
  finishes: readonly string[];
}

const WEAPONS: readonly WeaponSpec[] = [
  {
    name: 'AK-47',
    popularity: 2.2,
    finishes: list(`
      Redline | Fire Serpent | Case Hardened | Vulcan | Asiimov | Bloodsport | Wild Lotus | Gold Arabesque |
      Hydroponic | Neon Rider | Neon Revolution | Fuel Injector | Wasteland Rebel | Jaguar | Frontside Misty |
      Point Disarray | Aquamarine Revenge | Elite Build | Phantom Disruptor | Jet Set | Panthera onca | X-Ray |
      The Empress | Legion of Anubis | Ice Coaled | Nightwish | Head Shot | Inheritance | Slate | Leet Museo |
      Black Laminate | Emerald Pinstripe | Blue Laminate | Red Laminate | First Class | Jungle Spray | Predator |
      Safari Mesh | Orbit Mk01 | Cartel | Rat Rod | Uncharted | Baroque Purple | Safety Net | Steel Delta |
      Searing Rage | Olive Polycam | Crossfade
    `),
  },
  {
    name: 'AWP',
    popularity: 2.4,
    finishes: list(`
      Dragon Lore | Gungnir | Medusa | Asiimov | Lightning Strike | Fade | Hyper Beast | Containment Breach |
      Wildfire | Oni Taiji | Neo-Noir | Redline | Graphite | Electric Hive | Man-o'-war | Corticera | Fever Dream |
      Printstream | Chromatic Aberration | Desert Hydra | Pink DDPAT | Safari Mesh | BOOM | Pit Viper | Snake Camo |
      Atheris | Mortis | PAW | Silk Tiger | Duality | Sun in Leo | Worm God | Elite Build | Phobos | Capillary |
      Exoskeleton | Black Nile | Acheron | The Prince
    `),
  },
  {
    name: 'M4A4',
    popularity: 1.7,
    finishes: list(`
      Howl | Asiimov | The Emperor | Neo-Noir | Desolate Space | Buzz Kill | Royal Paladin | Hellfire | Poseidon |
      Temukau | In Living Color | Cyber Security | Spider Lily | Tooth Fairy | Eye of Horus | Dragon King |
      Evil Daimyo | Griffin | Bullet Rain | X-Ray | Magnesium | Modern Hunter | Desert-Strike | Global Offensive |
      Zirka | Faded Zebra | Urban DDPAT | Jungle Tiger | Tornado | Radiation Hazard | Converter | Etch Lord |
      Choppa
    `),
  },
  {
    name: 'M4A1-S',
    popularity: 1.8,
    finishes: list(`
      Printstream | Hot Rod | Knight | Icarus Fell | Golden Coil | Chantico's Fire | Master Piece | Player Two |
      Hyper Beast | Mecha Industries | Decimator | Leaded Glass | Cyrex | Guardian | Atomic Alloy | Basilisk |
      Dark Water | Nitro | Bright Water | Blood Tiger | Imminent Danger | Welcome to the Jungle | Nightmare |
      Black Lotus | Emphorosaur-S | Blue Phosphor | Fade | VariCamo | Boreal Forest | Flashback | Briefing |
      Control Panel | Moss Quartz | Night Terror | Fizzy POP
    `),
  },
  {
    name: 'Desert Eagle',
    popularity: 1.5,
    finishes: list(`
      Blaze | Printstream | Kumicho Dragon | Code Red | Ocean Drive | Mecha Industries | Golden Koi |
      Cobalt Disruption | Conspiracy | Hypnotic | Directive | Crimson Web | Heirloom | Corinthian | Oxide Blaze |
      Naga | Light Rail | Trigger Discipline | Fennec Fox | Emerald Jörmungandr | Hand Cannon | Sunset Storm 壱 |
      Midnight Storm | Night Heist | Bronze Deco | Mudder | Urban Rubble | Blue Ply | Meteorite | Night | Pilot |
      Sputnik | Calligraffiti | Serpent Strike | Tilted
    `),
  },
  {
    name: 'USP-S',
    popularity: 1.5,
    finishes: list(`
      Kill Confirmed | Neo-Noir | Printstream | The Traitor | Orion | Cortex | Caiman | Monster Mashup | Whiteout |
      Jawbreaker | Ticket to Hell | Black Lotus | Cyrex | Guardian | Overgrowth | Stainless | Road Rash | Serum |
      Torque | Blueprint | Lead Conduit | Flashback | Business Class | Pathfinder | Blood Tiger | Dark Water |
      Night Ops | Check Engine | Para Green | Forest Leaves | Royal Blue | Alpine Camo | Target Acquired |
      Desert Tactical | 27
    `),
  },
  {
    name: 'Glock-18',
    popularity: 1.4,
    finishes: list(`
      Fade | Water Elemental | Wasteland Rebel | Twilight Galaxy | Dragon Tattoo | Bullet Queen | Neo-Noir | Vogue |
      Moonrise | Royal Legion | Grinder | Brass | Steel Disruption | Ironwork | Weasel | Candy Apple |
      Death Rattle | High Beam | Off World | Warhawk | Reactor | Bunsen Burner | Catacombs | Nuclear Garden |
      Snack Attack | Umbral Rabbit | Winterized | Shinobu | Block-18 | Sacrifice | Clear Polymer | Synth Leaf |
      Pink DDPAT | Sand Dune | Groundwater | Night | Blue Fissure | Franklin | Oxide Blaze | Wraiths | Red Tire |
      Glockingbird | Ramese's Reach
    `),
  },
  {
    name: 'P250',
    popularity: 0.7,
    finishes: list(`
      Asiimov | Muertos | Mehndi | Undertow | See Ya Later | Franklin | Cartel | Wingshot | Supernova | Splash |
      Nuclear Threat | Hive | Sand Dune | Boreal Forest | Whiteout | Visions | Vino Primo | Nevermore |
      Cyber Shell | Bone Mask | Gunsmoke | Metallic DDPAT | Modern Hunter | Facility Draft
    `),
  },
  {
    name: 'Five-SeveN',
    popularity: 0.8,
    finishes: list(`
      Case Hardened | Hyper Beast | Monkey Business | Fowl Play | Copper Galaxy | Angry Mob | Fairy Tale | Kami |
      Triumvirate | Retrobution | Neon Kimono | Nightshade | Urban Hazard | Forest Night | Orange Peel |
      Candy Apple | Silver Quartz | Hot Shot | Violent Daimyo | Boost Protocol | Scrawl | Flame Test | Coolant
    `),
  },
  {
    name: 'Tec-9',
    popularity: 0.7,
    finishes: list(`
      Nuclear Threat | Fuel Injector | Decimator | Remote Control | Avalanche | Titanium Bit | Red Quartz | Isaac |
      Sandstorm | Bamboo Forest | Groundwater | Urban DDPAT | Toxic | Ice Cap | Re-Entry | Jambiya | Fubar |
      Snek-9 | Brother | Flash Out | Blue Titanium | Terrace
    `),
  },
  {
    name: 'CZ75-Auto',
    popularity: 0.7,
    finishes: list(`
      Victoria | The Fuschia Is Now | Xiangliu | Yellow Jacket | Tigris | Red Astor | Pole Position | Chalice |
      Emerald | Crimson Web | Tread Plate | Hexane | Twist | Polymer | Imprint | Eco | Tacticat | Green Plaid |
      Nitro | Circaetus | Vendetta | Syndicate | Tuxedo | Army Sheen | Jungle Dashed
    `),
  },
  {
    name: 'P2000',
    popularity: 0.8,
    finishes: list(`
      Fire Elemental | Ocean Foam | Corticera | Imperial Dragon | Handgun | Chainmail | Scorpion | Amber Fade |
      Ivory | Pulse | Red FragCam | Silver | Granite Marbleized | Grassland Leaves | Woodsman | Turf | Obsidian |
      Acid Etched | Gnarled | Space Race | Wicked Sick | Urban Hazard | Pathfinder
    `),
  },
  {
    name: 'Dual Berettas',
    popularity: 0.6,
    finishes: list(`
      Cobra Strike | Twin Turbo | Melondrama | Royal Consorts | Urban Shock | Marina | Hemoglobin |
      Dualing Dragons | Cartel | Panther | Retribution | Stained | Demolition | Colony | Contractor | Black Limba |
      Anodized Navy | Elite 1.6 | Briar | Moon in Libra | Balance | Shred | Flora Carnivora
    `),
  },
  {
    name: 'R8 Revolver',
    popularity: 0.6,
    finishes: list(`
      Fade | Amber Fade | Crimson Web | Llama Cannon | Reboot | Grip | Survivalist | Nitro | Bone Forged |
      Skull Crusher | Memento | Canal Spray | Night | Banana Cannon | Crazy 8 | Junk Yard | Blaze
    `),
  },
  {
    name: 'Zeus x27',
    popularity: 0.8,
    finishes: ['Olympus', 'Tosai', 'Dragon Snore', 'Electric Blue', 'Charged Up', 'Swamp DDPAT', 'Earthbound'],
  },
  {
    name: 'FAMAS',
    popularity: 0.7,
    finishes: list(`
      Commemoration | Afterimage | Mecha Industries | Roll Cage | Eye of Athena | Djinn | Valence | Pulse | Styx |
      Sergeant | Hexane | Doomkitty | Spitfire | Survivor Z | Neural Net | Crypsis | Decommissioned | Colony |
      Cyanospatter | Teardown | Contrast Spray | Dark Water | Macabre | ZX Spectron | Rapid Eye Movement | Meow 36
    `),
  },
  {
    name: 'Galil AR',
    popularity: 0.7,
    finishes: list(`
      Chatterbox | Cerberus | Eco | Sugar Rush | Firefight | Stone Cold | Sandstorm | Orange DDPAT | Kami |
      Crimson Tsunami | Signal | Shattered | Blue Titanium | Urban Rubble | Tuxedo | Winter Forest | Hunting Blind |
      Rocket Pop | Black Sand | Connexion | Aqua Terrace | Chromatic Aberration | Phoenix Blacklight | Destroyer
    `),
  },
  {
    name: 'AUG',
    popularity: 0.8,
    finishes: list(`
      Akihabara Accept | Chameleon | Hot Rod | Bengal Tiger | Torque | Syd Mead | Fleet Flock | Momentum | Wings |
      Aristocrat | Stymphalian | Triqua | Random Access | Death by Puppy | Arctic Wolf | Flame Jörmungandr |
      Plague | Storm | Contractor | Colony | Copperhead | Anodized Navy | Radiation Hazard | Midnight Lily |
      Sweeper | Condemned | Amber Slipstream | Carved Jade | Snake Pit
    `),
  },
  {
    name: 'SG 553',
    popularity: 0.7,
    finishes: list(`
      Integrale | Cyrex | Pulse | Tiger Moth | Bulldozer | Aerial | Triarch | Phantom | Ultraviolet | Wave Spray |
      Gator Mesh | Army Sheen | Damascus Steel | Traveler | Atlas | Danger Close | Darkwing | Colony IV |
      Ol' Rusty | Dragon Tech | Cyberforce | Hazard Pay | Heavy Metal | Barricade
    `),
  },
  {
    name: 'SSG 08',
    popularity: 0.9,
    finishes: list(`
      Dragonfire | Blood in the Water | Big Iron | Abyss | Ghost Crusader | Detour | Death Strike | Turbo Peek |
      Necropos | Slashed | Dark Water | Acid Fade | Tropical Storm | Lichen Dashed | Sand Dune | Mayan Dreams |
      Bloodshot | Fever Dream | Threat Detected | Parallax | Sea Calico | Jungle Dashed | Red Stone | Handbrake
    `),
  },
  {
    name: 'SCAR-20',
    popularity: 0.5,
    finishes: list(`
      Cyrex | Emerald | Splash Jam | Cardiac | Bloodsport | Crimson Web | Palm | Enforcer | Grotto | Outbreak |
      Powercore | Jungle Slipstream | Blueprint | Green Marine | Torn | Stone Mosaico | Contractor | Sand Mesh |
      Storm | Army Sheen | Magna Carta | Fragments | Assault | Trail Blazer
    `),
  },
  {
    name: 'G3SG1',
    popularity: 0.5,
    finishes: list(`
      The Executioner | Chronos | Flux | Azure Zebra | High Seas | Demeter | The Bakery | Stinger | Hunter |
      Scavenger | Orange Crash | Ventilator | Murky | Arctic Camo | Desert Storm | Jungle Dashed | Safari Mesh |
      Contractor | Polar Camo | Black Sand | Digital Mesh | Keeping Tabs | Dream Glade | Green Cell
    `),
  },
  {
    name: 'MAC-10',
    popularity: 0.7,
    finishes: list(`
      Neon Rider | Fade | Case Hardened | Disco Tech | Stalker | Heat | Curse | Tatter | Malachite | Graven |
      Lapis Gator | Rangeen | Last Dive | Ultraviolet | Silver | Amber Fade | Candy Apple | Whitefish | Pipe Down |
      Classic Crate | Allure | Carnivore | Nuclear Garden | Urban DDPAT | Palm | Indigo | Tornado | Hot Snakes |
      Toybox | Propaganda | Button Masher | Sakkaku | Monkeyflage | Ensnared | Gold Brick | Light Box
    `),
  },
  {
    name: 'MP9',
    popularity: 0.8,
    finishes: list(`
      Hydra | Rose Iron | Bulldozer | Airlock | Stained Glass | Mount Fuji | Food Chain | Starlight Protector |
      Wild Lily | Hot Rod | Hypnotic | Dark Age | Setting Sun | Ruby Poison Dart | Deadly Poison | Pandora's Box |
      Bioleak | Sand Dashed | Storm | Orange Peel | Dry Season | Green Plaid | Modest Threat | Black Sand | Slide |
      Goo | Capillary | Mischief | Featherweight | Music Box
    `),
  },
  {
    name: 'MP7',
    popularity: 0.7,
    finishes: list(`
      Bloodsport | Nemesis | Fade | Whiteout | Impire | Special Delivery | Skulls | Ocean Foam | Neon Ply |
      Powercore | Akoben | Cirrus | Armor Core | Urban Hazard | Orange Peel | Army Recon | Forest DDPAT | Gunsmoke |
      Anodized Navy | Full Stop | Olive Plaid | Motherboard | Asterion | Mischief | Abyssal Apparition | Guerrilla |
      Vault Heist | Sunbaked | Just Smile | Smoking Kills | Tall Grass | Astrolabe
    `),
  },
  {
    name: 'MP5-SD',
    popularity: 0.7,
    finishes: list(`
      Phosphor | Liquidation | Lab Rats | Gauss | Agent | Acid Wash | Kitbash | Bamboo Garden | Condition Zero |
      Dirt Drop | Desert Strike | Co-Processor | Necro Jr. | Autumn Twilly | Oxide Oasis | Nitro | Focus |
      Savannah Halftone | Statics | Wood Block
    `),
  },
  {
    name: 'UMP-45',
    popularity: 0.7,
    finishes: list(`
      Fade | Primal Saber | Blaze | Momentum | Arctic Wolf | Crime Scene | Moonrise | Exposure | Delusion |
      Grand Prix | Riot | Labyrinth | Corporal | Scaffold | Metal Flowers | Briefing | Bone Pile | Indigo |
      Carbon Fiber | Gunsmoke | Urban DDPAT | Caramel | Mudder | Fallout Warning | Minotaur's Labyrinth |
      Plastique | Oscillator | Wild Child | Roadblock | Motorized | K.O. Factory | Gold Bismuth | Neo-Noir
    `),
  },
  {
    name: 'P90',
    popularity: 0.8,
    finishes: list(`
      Asiimov | Death by Kitty | Emerald Dragon | Shapewood | Trigon | Shallow Grave | Cold Blooded | Blind Spot |
      Chopper | Elite Build | Module | Virus | Glacier Mesh | Desert Warfare | Ash Wood | Teardown | Sand Spray |
      Storm | Fallout Warning | Scorched | Leather | Grim | Traction | Nostalgia | Off World | Baroque Red |
      Astral Jörmungandr | Freight | Run and Hide | Tiger Pit | Neoqueen | Vent Rush | Schematic | Wave Breaker
    `),
  },
  {
    name: 'PP-Bizon',
    popularity: 0.5,
    finishes: list(`
      Judgement of Anubis | Blue Streak | Osiris | Antique | Water Sigil | Fuel Rod | High Roller | Photic Zone |
      Harvester | Jungle Slipstream | Bamboo Print | Brass | Rust Coat | Night Ops | Sand Dashed | Carbon Fiber |
      Irradiated Alert | Modern Hunter | Forest Leaves | Urban Dashed | Candy Apple | Cobalt Halftone |
      Chemical Green | Embargo | Runic | Space Cat | Lumen | Thermal Currents
    `),
  },
  {
    name: 'Nova',
    popularity: 0.5,
    finishes: list(`
      Antique | Bloomstick | Hyper Beast | Koi | Graphite | Rising Skull | Ghost Camo | Tempest | Rust Coat |
      Predator | Sand Dune | Polar Mesh | Walnut | Forest Leaves | Caged Steel | Green Apple | Candy Apple |
      Blaze Orange | Modern Hunter | Exo | Ranger | Gila | Wild Six | Toy Soldier | Plume | Clear Polymer |
      Windblown | Dark Sigil | Baroque Orange | Interlock
    `),
  },
  {
    name: 'XM1014',
    popularity: 0.6,
    finishes: list(`
      Tranquility | Seasons | Heaven Guard | Teclu Burner | Ziggy | Black Tie | Bone Machine | Incinegator |
      Entombed | Quicksilver | Slipstream | Scumbria | Red Python | Red Leather | VariCamo Blue | Blue Spruce |
      Blue Steel | Grassland | Urban Perforated | Jungle | Fallout Warning | Oxide Blaze | Watchdog | XOXO |
      Elegant Vines | Frost Borre | Irezumi | Zombie Offensive | Halftone Shift
    `),
  },
  {
    name: 'MAG-7',
    popularity: 0.5,
    finishes: list(`
      Bulldozer | Justice | Praetorian | Heat | Heaven Guard | Cinquedea | Hazard | Memento | Firestarter |
      Petroglyph | Sonar | Hard Water | Silver | Metallic DDPAT | Sand Dune | Storm | Irradiated Alert | Seabird |
      Rust Coat | Counter Terrace | Core Breach | SWAG-7 | Monster Call | Popdog | Navy Sheen | BI83 Spectrum |
      Foresight | Prism Terrace | Copper Coated
    `),
  },
  {
    name: 'Sawed-Off',
    popularity: 0.5,
    finishes: list(`
      The Kraken | Wasteland Princess | Serenity | Highwayman | Devourer | Limelight | Origami | Orange DDPAT |
      Copper | Bamboo Shadow | Forest DDPAT | Irradiated Alert | Mosaico | Sage Spray | Snake Camo | Full Stop |
      Zander | Fubar | Morris | Black Sand | Yorick | Apocalypto | Kiss♥Love | Spirit Board | Analog Input |
      Clay Ambush
    `),
  },
  {
    name: 'Negev',
    popularity: 0.5,
    finishes: list(`
      Mjölnir | Power Loader | Loudmouth | Bratatat | Lionfish | Dazzle | Man-o'-war | Terrain | Desert-Strike |
      Nuclear Waste | Army Sheen | Palm | CaliCamo | Anodized Navy | Bulkhead | Prototype | Ultralight |
      Dev Texture | Drop Me | Phoenix Stencil | Infrastructure | Wall Bang | Sour Grapes
    `),
  },
  {
    name: 'M249',
    popularity: 0.5,
    finishes: list(`
      Emerald Poison Dart | Nebula Crusader | Magma | Aztec | Shipping Forecast | Spectre | System Lock |
      Impact Drill | Gator Mesh | Contrast Spray | Blizzard Marbleized | Jungle DDPAT | Predator | Jungle |
      Warbird | Deep Relief | O.S.I.P.R. | Humidor | Midnight Palm | Downtown | Submerged | Hypnosis
    `),
  },
];

/** Finishes per weapon = base + per-popularity; sized so the full catalogue is mostly weapon skins. */
const SKINS_BASE = 72;
const SKINS_PER_POPULARITY = 26;

// Invented finish names ("Cobalt Wraith") fill each weapon beyond its real finishes: the real game
// has fewer weapon skins than a 35,000-name catalogue of mostly skins needs.
const INVENTED_ADJECTIVES = list(`
  Acid | Amber | Arctic | Ashen | Azure | Binary | Bone | Bronze | Carbon | Cinder | Cobalt | Copper | Coral |
  Crimson | Cyber | Dusk | Ember | Feral | Frost | Gilded | Glacier | Golden | Grim | Hollow | Iron | Ivory | Jade |
  Lunar | Midnight | Molten | Nebula | Neon | Obsidian | Onyx | Phantom | Polar | Rogue | Rusted | Scarlet |
  Shadow | Silent | Solar | Static | Storm | Sunset | Toxic | Velvet | Venom | Violet | Wild
`);
const INVENTED_NOUNS = list(`
  Viper | Wraith | Circuit | Tide | Reaper | Bloom | Rift | Fang | Drift | Echo | Pulse Line | Talon | Vortex |
  Mirage | Serpent | Harbinger | Specter | Prowler | Nomad | Cascade | Lotus | Monarch | Oracle | Sentinel |
  Kraken | Hydra Scale | Comet | Glyph | Mosaic | Ronin
`);

/** Invented finish names in a fixed, well-spread order (a stride walk over adjective × noun). */
function inventedFinishes(): string[] {
  const names: string[] = [];
  const total = INVENTED_ADJECTIVES.length * INVENTED_NOUNS.length;
  // 7 is coprime with 1500, so the walk visits every pair once and neighbours differ in both words.
  for (let k = 0, i = 0; k < total; k++, i = (i + 7) % total) {
    const adjective = INVENTED_ADJECTIVES[i % INVENTED_ADJECTIVES.length];
    const noun = INVENTED_NOUNS[Math.floor(i / INVENTED_ADJECTIVES.length)];
    if (adjective && noun) names.push(`${adjective} ${noun}`);
  }
  return names;
}

/** What makes a famous skin famous: its rarity, where it drops and how far above its peers it trades. */
interface SkinOverride {
  rarity: Rarity;
  source: Source;
  boost: number;
}

const SKIN_OVERRIDES: ReadonlyMap<string, SkinOverride> = new Map<string, SkinOverride>([
  ['AWP | Dragon Lore', { rarity: 'covert', source: 'souvenir', boost: 40 }],
  ['AWP | Gungnir', { rarity: 'covert', source: 'collection', boost: 25 }],
  ['AWP | Medusa', { rarity: 'covert', source: 'collection', boost: 15 }],
  ['M4A4 | Howl', { rarity: 'covert', source: 'case', boost: 30 }],
  ['AK-47 | Fire Serpent', { rarity: 'covert', source: 'case', boost: 6 }],
  ['AK-47 | Wild Lotus', { rarity: 'covert', source: 'collection', boost: 20 }],
  ['AK-47 | Gold Arabesque', { rarity: 'covert', source: 'souvenir', boost: 15 }],
  ['AWP | Desert Hydra', { rarity: 'covert', source: 'souvenir', boost: 6 }],
  ['AK-47 | Case Hardened', { rarity: 'classified', source: 'case', boost: 3 }],
  ['AK-47 | Redline', { rarity: 'classified', source: 'case', boost: 1.2 }],
  ['AK-47 | Vulcan', { rarity: 'covert', source: 'case', boost: 1.5 }],
  ['AK-47 | Asiimov', { rarity: 'covert', source: 'case', boost: 1 }],
  ['AK-47 | Hydroponic', { rarity: 'classified', source: 'collection', boost: 4 }],
  ['AK-47 | Safari Mesh', { rarity: 'industrial', source: 'souvenir', boost: 1 }],
  ['AWP | Asiimov', { rarity: 'covert', source: 'case', boost: 1.5 }],
  ['AWP | Lightning Strike', { rarity: 'covert', source: 'case', boost: 1 }],
  ['AWP | Fade', { rarity: 'covert', source: 'collection', boost: 4 }],
  ['AWP | Printstream', { rarity: 'covert', source: 'case', boost: 1 }],
  ['AWP | Safari Mesh', { rarity: 'industrial', source: 'souvenir', boost: 1 }],
  ['M4A4 | Asiimov', { rarity: 'covert', source: 'case', boost: 1 }],
  ['M4A4 | Poseidon', { rarity: 'classified', source: 'collection', boost: 5 }],
  ['M4A1-S | Printstream', { rarity: 'covert', source: 'case', boost: 1.3 }],
  ['M4A1-S | Hot Rod', { rarity: 'classified', source: 'collection', boost: 3 }],
  ['M4A1-S | Knight', { rarity: 'classified', source: 'collection', boost: 10 }],
  ['M4A1-S | Welcome to the Jungle', { rarity: 'covert', source: 'souvenir', boost: 5 }],
  ['M4A1-S | Master Piece', { rarity: 'classified', source: 'souvenir', boost: 3 }],
  ['M4A1-S | Imminent Danger', { rarity: 'covert', source: 'souvenir', boost: 3 }],
  ['Desert Eagle | Printstream', { rarity: 'covert', source: 'case', boost: 1 }],
  ['Desert Eagle | Blaze', { rarity: 'restricted', source: 'collection', boost: 8 }],
  ['Glock-18 | Fade', { rarity: 'restricted', source: 'collection', boost: 12 }],
  ['USP-S | Kill Confirmed', { rarity: 'covert', source: 'case', boost: 1 }],
]);

/** One weapon × finish with everything that does not depend on the wear or the variant. */
interface Skin {
  weapon: WeaponSpec;
  finish: string;
  rarity: Rarity;
  source: Source;
  boost: number;
  floats: FloatRange;
}

function skinOf(weapon: WeaponSpec, finish: string): Skin {
  const key = `${weapon.name} | ${finish}`;
  const h = hashString(key);
  const override = SKIN_OVERRIDES.get(key);
  const rarity = override?.rarity ?? pickWeighted(RARITY_WEIGHTS, unit(h, SALT.rarity));
  return {
    weapon,
    finish,
    rarity,
    source: override?.source ?? sourceOf(rarity, unit(h, SALT.source)),
    boost: override?.boost ?? 1,
    floats: FINISH_FLOATS.get(finish) ?? pickWeighted(FLOAT_PRESETS, unit(h, SALT.floats)),
  };
}

/** Cases start at Mil-Spec, so low grades come from collections, many of them souvenir maps. */
function sourceOf(rarity: Rarity, u: number): Source {
  if (rarity === 'consumer' || rarity === 'industrial') return u < 0.45 ? 'souvenir' : 'collection';
  return pickWeighted<Source>(
    [
      ['case', 75],
      ['souvenir', 12],
      ['collection', 13],
    ],
    u,
  );
}

/** The weapon's real finishes, then invented ones chosen by a fixed per-weapon shuffle. */
function finishesOf(weapon: WeaponSpec, invented: readonly string[]): string[] {
  const count = Math.round(SKINS_BASE + SKINS_PER_POPULARITY * weapon.popularity);
  const own = new Set(weapon.finishes);
  const fillers = shuffled(
    invented.filter((f) => !own.has(f)),
    mulberry32(hashString(weapon.name) ^ SALT.filler),
  );
  return [...weapon.finishes, ...fillers.slice(0, Math.max(0, count - weapon.finishes.length))];
}

function weaponEntries(paintIndexOf: (finish: string) => number): Entry[] {
  const invented = inventedFinishes();
  const entries: Entry[] = [];
  for (const weapon of WEAPONS) {
    for (const finish of finishesOf(weapon, invented)) {
      entries.push(...skinEntries(skinOf(weapon, finish), paintIndexOf(finish)));
    }
  }
  return entries;
}

function skinEntries(skin: Skin, paintIndex: number): Entry[] {
  const family = `${skin.weapon.name} | ${skin.finish}`;
  const variants: readonly ('' | 'StatTrak™ ' | 'Souvenir ')[] =
    skin.source === 'case' ? ['', 'StatTrak™ '] : skin.source === 'souvenir' ? ['', 'Souvenir '] : [''];
  const entries: Entry[] = [];
  for (const exterior of exteriorsOf(skin.floats)) {
    for (const prefix of variants) {
      const stattrak = prefix === 'StatTrak™ ';
      const souvenir = prefix === 'Souvenir ';
      entries.push(
        entry({
          name: `${prefix}${family} (${exterior})`,
          category: 'weapon',
          stratum: stattrak ? 'weapon-stattrak' : souvenir ? 'weapon-souvenir' : 'weapon',
          exterior,
          stattrak,
          souvenir,
          paintIndex,
          medianCents:
            RARITY_FN_CENTS[skin.rarity] * skin.weapon.popularity * skin.boost * WEAPON_WEAR_FACTOR[exterior],
          family,
          spread: RARITY_SPREAD[skin.rarity],
          premium: stattrak ? WEAPON_STATTRAK : souvenir ? WEAPON_SOUVENIR : null,
        }),
      );
    }
  }
  return entries;
}

// ---------------------------------------------------------------------------------------------
// Knives
// ---------------------------------------------------------------------------------------------

interface KnifeSpec {
  name: string;
  /** Median cents of a mid-priced finish in Factory New. */
  baseCents: number;
  /** Chroma finishes (Doppler, Marble Fade, …) and Gamma finishes (Gamma Doppler, Lore, …). */
  modern: boolean;
}

const KNIVES: readonly KnifeSpec[] = [
  { name: 'Karambit', baseCents: 95_000, modern: true },
  { name: 'Butterfly Knife', baseCents: 110_000, modern: true },
  { name: 'M9 Bayonet', baseCents: 70_000, modern: true },
  { name: 'Bayonet', baseCents: 45_000, modern: true },
  { name: 'Talon Knife', baseCents: 60_000, modern: true },
  { name: 'Stiletto Knife', baseCents: 35_000, modern: true },
  { name: 'Flip Knife', baseCents: 30_000, modern: true },
  { name: 'Ursus Knife', baseCents: 24_000, modern: true },
  { name: 'Huntsman Knife', baseCents: 24_000, modern: true },
  { name: 'Bowie Knife', baseCents: 22_000, modern: true },
  { name: 'Falchion Knife', baseCents: 21_000, modern: true },
  { name: 'Shadow Daggers', baseCents: 21_000, modern: true },
  { name: 'Navaja Knife', baseCents: 20_000, modern: true },
  { name: 'Gut Knife', baseCents: 20_000, modern: true },
  { name: 'Skeleton Knife', baseCents: 55_000, modern: false },
  { name: 'Classic Knife', baseCents: 32_000, modern: false },
  { name: 'Nomad Knife', baseCents: 28_000, modern: false },
  { name: 'Kukri Knife', baseCents: 26_000, modern: false },
  { name: 'Paracord Knife', baseCents: 21_000, modern: false },
  { name: 'Survival Knife', baseCents: 20_000, modern: false },
];

/** Finish → price factor over the knife's base. Every knife has the classic ones. */
const KNIFE_CLASSIC_FINISHES: readonly (readonly [string, number])[] = [
  ['Fade', 1.7],
  ['Slaughter', 1.3],
  ['Crimson Web', 1.2],
  ['Case Hardened', 1.05],
  ['Blue Steel', 0.8],
  ['Night', 0.7],
  ['Stained', 0.65],
  ['Boreal Forest', 0.5],
  ['Urban Masked', 0.5],
  ['Forest DDPAT', 0.48],
  ['Scorched', 0.47],
  ['Safari Mesh', 0.45],
];
const KNIFE_MODERN_FINISHES: readonly (readonly [string, number])[] = [
  ['Doppler', 1.3],
  ['Marble Fade', 1.6],
  ['Tiger Tooth', 1.35],
  ['Damascus Steel', 0.8],
  ['Rust Coat', 0.6],
  ['Ultraviolet', 0.85],
  ['Gamma Doppler', 1.4],
  ['Lore', 1.5],
  ['Autotronic', 1.2],
  ['Black Laminate', 0.8],
  ['Freehand', 0.85],
  ['Bright Water', 0.75],
];

/** Knife wear matters less than weapon wear: the knife itself carries most of the price. */
const KNIFE_WEAR_FACTOR: Readonly<Record<Exterior, number>> = {
  'Factory New': 1,
  'Minimal Wear': 0.8,
  'Field-Tested': 0.66,
  'Well-Worn': 0.58,
  'Battle-Scarred': 0.52,
};
/** Knife StatTrak™ premium is smaller than on guns: buyers pay for the knife, not the counter. */
const KNIFE_STATTRAK: Premium = { min: 1.1, max: 1.5 };
const KNIFE_SPREAD = 0.3;
const VANILLA_FACTOR = 1.1;

function knifeEntries(paintIndexOf: (finish: string) => number): Entry[] {
  const entries: Entry[] = [];
  for (const knife of KNIVES) {
    entries.push(...vanillaKnifeEntries(knife));
    const finishes = knife.modern ? [...KNIFE_CLASSIC_FINISHES, ...KNIFE_MODERN_FINISHES] : KNIFE_CLASSIC_FINISHES;
    for (const [finish, factor] of finishes) {
      entries.push(...knifeFinishEntries(knife, finish, factor, paintIndexOf(finish)));
    }
  }
  return entries;
}

/** '★ Karambit' and '★ StatTrak™ Karambit': no finish, so no wear and no paint index. */
function vanillaKnifeEntries(knife: KnifeSpec): Entry[] {
  return [false, true].map((stattrak) =>
    entry({
      name: `★ ${stattrak ? 'StatTrak™ ' : ''}${knife.name}`,
      category: 'knife',
      stratum: 'knife',
      exterior: null,
      stattrak,
      souvenir: false,
      medianCents: knife.baseCents * VANILLA_FACTOR,
      family: knife.name,
      spread: KNIFE_SPREAD,
      premium: stattrak ? KNIFE_STATTRAK : null,
    }),
  );
}

function knifeFinishEntries(knife: KnifeSpec, finish: string, factor: number, paintIndex: number): Entry[] {
  const isDoppler = finish === 'Doppler';
  const isGamma = finish === 'Gamma Doppler';
  const entries: Entry[] = [];
  for (const exterior of exteriorsOf(FINISH_FLOATS.get(finish) ?? STANDARD_WEAR)) {
    for (const stattrak of [false, true]) {
      entries.push(
        entry({
          name: `★ ${stattrak ? 'StatTrak™ ' : ''}${knife.name} | ${finish} (${exterior})`,
          category: 'knife',
          stratum: isDoppler ? 'knife-doppler' : isGamma ? 'knife-gamma' : 'knife',
          exterior,
          stattrak,
          souvenir: false,
          paintIndex,
          phases: isDoppler ? DOPPLER_PHASES : isGamma ? GAMMA_DOPPLER_PHASES : NO_PHASE,
          medianCents: knife.baseCents * factor * KNIFE_WEAR_FACTOR[exterior],
          family: `${knife.name} | ${finish}`,
          spread: KNIFE_SPREAD,
          premium: stattrak ? KNIFE_STATTRAK : null,
        }),
      );
    }
  }
  return entries;
}

// ---------------------------------------------------------------------------------------------
// Gloves
// ---------------------------------------------------------------------------------------------

interface GloveSpec {
  name: string;
  baseCents: number;
  finishes: readonly string[];
}

const GLOVES: readonly GloveSpec[] = [
  {
    name: 'Sport Gloves',
    baseCents: 120_000,
    finishes: list(`
      Pandora's Box | Hedge Maze | Superconductor | Vice | Amphibious | Omega | Arid | Bronze Morph | Slingshot |
      Nocts | Big Game | Scarlet Shamagh
    `),
  },
  {
    name: 'Specialist Gloves',
    baseCents: 90_000,
    finishes: list(`
      Crimson Kimono | Emerald Web | Fade | Foundation | Forest DDPAT | Mogul | Crimson Web | Buckshot |
      Tiger Strike | Field Agent | Marksman | Lt. Commander
    `),
  },
  {
    name: 'Driver Gloves',
    baseCents: 60_000,
    finishes: list(`
      Crimson Weave | King Snake | Imperial Plaid | Lunar Weave | Diamondback | Overtake | Racing Green | Convoy |
      Rezan the Red | Snow Leopard | Queen Jaguar | Black Tie
    `),
  },
  {
    name: 'Moto Gloves',
    baseCents: 65_000,
    finishes: list(`
      Spearmint | Cool Mint | POW! | Boom! | Polygon | Eclipse | Turtle | Transport | Smoke Out | Blood Pressure |
      Finish Line | 3rd Commando Company
    `),
  },
  {
    name: 'Hand Wraps',
    baseCents: 55_000,
    finishes: list(`
      Cobalt Skulls | Slaughter | Leather | Badlands | Overprint | Arboreal | Duct Tape | Spruce DDPAT | Cashmere |
      Giraffe | Constrictor | Desert Shamagh
    `),
  },
  { name: 'Hydra Gloves', baseCents: 55_000, finishes: ['Case Hardened', 'Emerald', 'Rattler', 'Mangrove'] },
  { name: 'Bloodhound Gloves', baseCents: 55_000, finishes: ['Charred', 'Snakebite', 'Bronzed', 'Guerrilla'] },
  { name: 'Broken Fang Gloves', baseCents: 55_000, finishes: ['Jade', 'Yellow-banded', 'Needle Point', 'Unhinged'] },
];

/** The glove finishes everyone wants; the rest get a fixed hash-drawn factor around 0.8. */
const GLOVE_FINISH_BOOST: ReadonlyMap<string, number> = new Map([
  ["Pandora's Box", 5],
  ['Crimson Kimono', 4],
  ['Hedge Maze', 3],
  ['Vice', 2.5],
  ['Emerald Web', 2.5],
  ['Fade', 2.5],
  ['Superconductor', 2.2],
  ['Slaughter', 2.2],
  ['Cobalt Skulls', 2],
  ['Spearmint', 2],
  ['King Snake', 1.8],
  ['Crimson Weave', 1.8],
  ['POW!', 1.8],
]);

/** Gloves: a Factory New pair is rare enough to cost many times a Field-Tested one. */
const GLOVE_WEAR_FACTOR: Readonly<Record<Exterior, number>> = {
  'Factory New': 1,
  'Minimal Wear': 0.42,
  'Field-Tested': 0.2,
  'Well-Worn': 0.16,
  'Battle-Scarred': 0.14,
};

function gloveEntries(paintIndexOf: (finish: string) => number): Entry[] {
  const entries: Entry[] = [];
  for (const glove of GLOVES) {
    for (const finish of glove.finishes) {
      const family = `${glove.name} | ${finish}`;
      const boost =
        GLOVE_FINISH_BOOST.get(finish) ?? 0.8 * Math.exp(0.3 * normal(hashString(family), SALT.gloveFinish));
      const paintIndex = paintIndexOf(finish);
      for (const exterior of exteriorsOf(STANDARD_WEAR)) {
        entries.push(
          entry({
            name: `★ ${family} (${exterior})`,
            category: 'gloves',
            stratum: 'gloves',
            exterior,
            stattrak: false,
            souvenir: false,
            paintIndex,
            medianCents: glove.baseCents * boost * GLOVE_WEAR_FACTOR[exterior],
            family,
            spread: 0.5,
          }),
        );
      }
    }
  }
  return entries;
}

// ---------------------------------------------------------------------------------------------
// Stickers
// ---------------------------------------------------------------------------------------------

interface Tournament {
  name: string;
  year: number;
  organizer: string;
  teams: number;
  /** Player autograph stickers were sold for this event. */
  players: boolean;
}

const TOURNAMENTS: readonly Tournament[] = [
  { name: 'Katowice 2014', year: 2014, organizer: 'ESL One', teams: 16, players: false },
  { name: 'Cologne 2014', year: 2014, organizer: 'ESL One', teams: 16, players: false },
  { name: 'DreamHack 2014', year: 2014, organizer: 'DreamHack', teams: 16, players: false },
  { name: 'Katowice 2015', year: 2015, organizer: 'ESL', teams: 16, players: false },
  { name: 'Cologne 2015', year: 2015, organizer: 'ESL One', teams: 16, players: true },
  { name: 'Cluj-Napoca 2015', year: 2015, organizer: 'DreamHack', teams: 16, players: true },
  { name: 'MLG Columbus 2016', year: 2016, organizer: 'MLG', teams: 16, players: true },
  { name: 'Cologne 2016', year: 2016, organizer: 'ESL One', teams: 16, players: true },
  { name: 'Atlanta 2017', year: 2017, organizer: 'ELEAGUE', teams: 16, players: true },
  { name: 'Krakow 2017', year: 2017, organizer: 'PGL', teams: 16, players: true },
  { name: 'Boston 2018', year: 2018, organizer: 'ELEAGUE', teams: 24, players: true },
  { name: 'London 2018', year: 2018, organizer: 'FACEIT', teams: 24, players: true },
  { name: 'Katowice 2019', year: 2019, organizer: 'IEM', teams: 24, players: true },
  { name: 'Berlin 2019', year: 2019, organizer: 'StarLadder', teams: 24, players: true },
  { name: '2020 RMR', year: 2020, organizer: 'RMR', teams: 24, players: false },
  { name: 'Stockholm 2021', year: 2021, organizer: 'PGL', teams: 24, players: true },
  { name: 'Antwerp 2022', year: 2022, organizer: 'PGL', teams: 24, players: true },
  { name: 'Rio 2022', year: 2022, organizer: 'IEM', teams: 24, players: true },
  { name: 'Paris 2023', year: 2023, organizer: 'BLAST.tv', teams: 24, players: true },
  { name: 'Copenhagen 2024', year: 2024, organizer: 'PGL', teams: 24, players: true },
  { name: 'Shanghai 2024', year: 2024, organizer: 'Perfect World', teams: 24, players: true },
  { name: 'Austin 2025', year: 2025, organizer: 'BLAST.tv', teams: 24, players: true },
  { name: 'Budapest 2025', year: 2025, organizer: 'StarLadder', teams: 24, players: true },
];

const TEAMS = list(`
  NAVI | Astralis | FaZe Clan | G2 Esports | Team Vitality | Team Liquid | Cloud9 | Fnatic | Ninjas in Pyjamas |
  MOUZ | ENCE | Heroic | BIG | Virtus.pro | Gambit Esports | Team Spirit | FURIA | Complexity Gaming | OG | North |
  Renegades | Evil Geniuses | MIBR | Team Dignitas | SK Gaming | Luminosity Gaming | OpTic Gaming | TyLoo |
  Flipsid3 Tactics | HellRaisers | Titan | LDLC.com | Team EnVyUs | Copenhagen Flames | Imperial Esports |
  Outsiders | 9INE | Eternal Fire | Monte | The MongolZ | paiN Gaming | Apeks | GamerLegion | Grayhound Gaming |
  Rare Atom | Lynn Vision | Wildcard | 3DMAX | SAW | Falcons | Legacy | B8 | iBUYPOWER | Counter Logic Gaming |
  Vox Eminor | Epsilon eSports | Clan-Mystik | Reason Gaming
`);

/** Well-known player handles; generated ones extend the pool so each event has a full roster. */
const REAL_PLAYERS = list(`
  s1mple | ZywOo | NiKo | device | electroNic | sh1ro | m0NESY | ropz | broky | rain | karrigan | Twistzz | EliGE |
  NAF | blameF | huNter- | Aleksib | b1t | Perfecto | Boombl4 | flamie | GuardiaN | olofmeister | f0rest |
  GeT_RiGhT | kennyS | shox | apEX | Happy | NBK- | kioShiMa | dupreeh | Xyp9x | gla1ve | Magisk | coldzera |
  FalleN | fer | TACO | fnx | KRIMZ | JW | flusha | pashaBiceps | Snax | TaZ | NEO | byali | Stewie2K | tarik |
  autimatic | Skadoodle | seized | Edward | Zeus | Dosia | mou | Hobbit | Ax1Le | frozen | jks | Spinx | YEKINDAR |
  donk | jL | iM | w0nderful | Jame | Qikert | XANTARES | woxic | nitr0 | arT | KSCERATO | yuurih | stavn | cadiaN |
  TeSeS | chopper | magixx | zont1x | Brollan | headtr1ck | mezii | flameZ | Mzinho | bLitz | Techno4K | senzu
`);
const HANDLE_HEADS = list(`
  ax | bl | cr | dex | el | fr | gh | hy | ix | jo | kr | lu | mx | ny | ox | pr | qu | rz | sy | tr | vo | wy |
  xa | ze
`);
const HANDLE_TAILS = ['n1', 'ko', 'ro', 'zer', 'ly', 'x', 'ga', 'mi', 'to', 'sh', 'k1d', 'vy'] as const;

/** Real handles plus generated ones ('axko', 'bl1n'…), deduplicated (case-insensitively, like Steam). */
function playerPool(): string[] {
  const seen = new Set<string>();
  const pool: string[] = [];
  const add = (handle: string): void => {
    if (seen.has(handle.toLowerCase())) return;
    seen.add(handle.toLowerCase());
    pool.push(handle);
  };
  REAL_PLAYERS.forEach(add);
  for (const head of HANDLE_HEADS) for (const tail of HANDLE_TAILS) add(`${head}${tail}`);
  return pool;
}

type StickerVariant = '' | 'Holo' | 'Foil' | 'Gold' | 'Glitter';

/** The finishes sold per era: Foil until 2019, Glitter after; autographs from Cologne 2015. */
function stickerVariants(year: number, kind: 'team' | 'player'): readonly StickerVariant[] {
  if (year <= 2014) return kind === 'team' ? ['', 'Holo', 'Foil'] : [];
  if (year <= 2019) return kind === 'team' ? ['', 'Holo', 'Foil', 'Gold'] : ['', 'Foil', 'Gold'];
  return ['', 'Glitter', 'Holo', 'Gold'];
}

/** Older events had few capsules opened and most were applied, so their stickers are scarce. */
function stickerAgeFactor(year: number): number {
  if (year <= 2014) return 250;
  if (year === 2015) return 25;
  if (year <= 2017) return 8;
  if (year <= 2019) return 3;
  if (year <= 2021) return 1.6;
  return 1;
}

const STICKER_VARIANT_FACTOR: Readonly<Record<StickerVariant, number>> = {
  '': 1,
  Glitter: 2.5,
  Holo: 6,
  Foil: 12,
  Gold: 30,
};

const STICKER_PAPER_CENTS = 4;
const COMMUNITY_PAPER_CENTS = 60;

/** Community and operation stickers, outside tournaments. */
const COMMUNITY_STICKERS = list(`
  Crown | Howling Dawn | Flammable | Headhunter | Drug War Veteran | Harp of War | Bish | Bash | Bosh |
  Winged Defuser | Shavemaster | Banana | Bomb Doge | Sneaky Beaky Like | Hello AK-47 | Hello AWP | Hello M4A4 |
  Good Game | Nice Shot | Welcome to the Clutch | Lucky 13 | Fearsome | Knife Club | Pigeon Master | Rekt |
  Headshot Guarantee | Merry Gibmas | Teamwork | Clutch King | Bullet Rain | Blitzkrieg | Cheongsam | Dinked |
  Doomed | Eco Rush | Flickshot | Shooting Star Return | Ace Clutch Co. | Battle Scarred | Chicken Lover |
  Ninja Defuse | Nuke Beast | Queen Of Pain | Stay Frosty | Thug Life | Unicorn | Vigilance | War Penguin |
  Death Comes | Dessert Eagle | Gold Web | Lambda | Mondays | Obey SAS | Pocket BBQ | Quickdraw | Rage Mode |
  Spray Paint | Terrorized | To B or not to B
`);

function stickerEntries(): Entry[] {
  const players = playerPool();
  return [...TOURNAMENTS.flatMap((t) => tournamentStickerEntries(t, players)), ...communityStickerEntries()];
}

/** The organizer, each team and (from Cologne 2015) each player, in every finish of the era. */
function tournamentStickerEntries(t: Tournament, players: readonly string[]): Entry[] {
  const roster = mulberry32(hashString(t.name) ^ SALT.roster);
  const teams = shuffled(TEAMS, roster).slice(0, t.teams);
  const subjects: [string, 'team' | 'player'][] = [t.organizer, ...teams].map((n) => [n, 'team']);
  if (t.players) {
    for (const n of shuffled(players, roster).slice(0, 5 * t.teams)) subjects.push([n, 'player']);
  }
  const entries: Entry[] = [];
  for (const [subject, kind] of subjects) {
    // Team stickers sell better than autographs of all but the stars.
    const paperCents = STICKER_PAPER_CENTS * stickerAgeFactor(t.year) * (kind === 'team' ? 1.5 : 1);
    for (const variant of stickerVariants(t.year, kind)) {
      const label = `${subject}${variant ? ` (${variant})` : ''} | ${t.name}`;
      entries.push(stickerEntry(label, `${subject} | ${t.name}`, paperCents * STICKER_VARIANT_FACTOR[variant]));
    }
  }
  return entries;
}

/** Community stickers: paper, plus a Holo or Foil version for about two in three. */
function communityStickerEntries(): Entry[] {
  const entries: Entry[] = [];
  for (const sticker of COMMUNITY_STICKERS) {
    const u = unit(hashString(sticker), SALT.stickerVariant);
    const variants: readonly StickerVariant[] = u < 1 / 3 ? [''] : u < 2 / 3 ? ['', 'Holo'] : ['', 'Foil'];
    for (const v of variants) {
      entries.push(
        stickerEntry(`${sticker}${v ? ` (${v})` : ''}`, sticker, COMMUNITY_PAPER_CENTS * STICKER_VARIANT_FACTOR[v]),
      );
    }
  }
  return entries;
}

function stickerEntry(label: string, family: string, medianCents: number): Entry {
  return entry({
    name: `Sticker | ${label}`,
    category: 'sticker',
    stratum: 'sticker',
    exterior: null,
    stattrak: false,
    souvenir: false,
    medianCents,
    family: `Sticker | ${family}`,
    spread: 0.9,
  });
}

// ---------------------------------------------------------------------------------------------
// Cases, agents, charms, other
// ---------------------------------------------------------------------------------------------

/** Containers with a rough market price in cents: discontinued cases are the expensive ones. */
const CASES: readonly (readonly [string, number])[] = [
  ['CS:GO Weapon Case', 12_000],
  ['CS:GO Weapon Case 2', 1_800],
  ['CS:GO Weapon Case 3', 1_200],
  ['Operation Bravo Case', 6_000],
  ['Winter Offensive Weapon Case', 1_100],
  ['eSports 2013 Case', 8_000],
  ['eSports 2013 Winter Case', 1_600],
  ['eSports 2014 Summer Case', 1_400],
  ['Operation Phoenix Weapon Case', 600],
  ['Huntsman Weapon Case', 1_300],
  ['Operation Breakout Weapon Case', 700],
  ['Operation Vanguard Weapon Case', 900],
  ['Chroma Case', 500],
  ['Chroma 2 Case', 450],
  ['Chroma 3 Case', 300],
  ['Falchion Case', 200],
  ['Shadow Case', 180],
  ['Revolver Case', 250],
  ['Operation Wildfire Case', 350],
  ['Gamma Case', 250],
  ['Gamma 2 Case', 240],
  ['Glove Case', 800],
  ['Spectrum Case', 350],
  ['Spectrum 2 Case', 250],
  ['Operation Hydra Case', 2_500],
  ['Clutch Case', 80],
  ['Horizon Case', 150],
  ['Danger Zone Case', 90],
  ['Prisma Case', 90],
  ['CS20 Case', 100],
  ['Shattered Web Case', 900],
  ['Prisma 2 Case', 80],
  ['Fracture Case', 45],
  ['Operation Broken Fang Case', 400],
  ['Snakebite Case', 35],
  ['Operation Riptide Case', 600],
  ['Dreams & Nightmares Case', 200],
  ['Recoil Case', 40],
  ['Revolution Case', 50],
  ['Kilowatt Case', 60],
  ['Gallery Case', 120],
  ['Fever Case', 110],
  ['Katowice 2019 Legends (Holo/Foil)', 900],
  ['Berlin 2019 Legends (Holo/Foil)', 500],
  ['Stockholm 2021 Legends Sticker Capsule', 150],
  ['Antwerp 2022 Challengers Sticker Capsule', 90],
  ['Rio 2022 Contenders Sticker Capsule', 60],
  ['Paris 2023 Legends Sticker Capsule', 40],
  ['Copenhagen 2024 Legends Sticker Capsule', 35],
  ['Shanghai 2024 Challengers Sticker Capsule', 30],
  ['Austin 2025 Legends Sticker Capsule', 30],
  ['Community Sticker Capsule 1', 2_500],
  ['Sticker Capsule 2', 1_500],
  ['Katowice 2019 Inferno Souvenir Package', 1_500],
  ['Berlin 2019 Vertigo Souvenir Package', 900],
  ['Stockholm 2021 Dust II Souvenir Package', 700],
  ['Antwerp 2022 Nuke Souvenir Package', 400],
  ['Rio 2022 Mirage Souvenir Package', 300],
  ['Paris 2023 Inferno Souvenir Package', 250],
  ['Copenhagen 2024 Ancient Souvenir Package', 200],
  ['Shanghai 2024 Anubis Souvenir Package', 180],
];

const AGENTS = list(
  `
  Sir Bloody Darryl The Strapped | The Professionals ; Sir Bloody Miami Darryl | The Professionals ;
  Sir Bloody Skullhead Darryl | The Professionals ; Sir Bloody Silent Darryl | The Professionals ;
  Sir Bloody Loudmouth Darryl | The Professionals ; Number K | The Professionals ;
  Safecracker Voltzmann | The Professionals ; Little Kev | The Professionals ; Getaway Sally | The Professionals ;
  Bloody Darryl The Strapped | The Professionals ; Special Agent Ava | FBI ; Michael Syfers | FBI Sniper ;
  Markus Delrow | FBI HRT ; Operator | FBI SWAT ; Cmdr. Mae 'Dead Cold' Jamison | SWAT ;
  Lt. Commander Ricksaw | NSWC SEAL ; Lieutenant Rex Krikey | SEAL Frogman ; 'Two Times' McCoy | USAF TACP ;
  'Blueberries' Buckshot | NSWC SEAL ; Buckshot | NSWC SEAL ; Cmdr. Davida 'Goggles' Fernandez | SEAL Frogman ;
  Chem-Haz Specialist | SWAT ; Bio-Haz Specialist | SWAT ; Sergeant Bombson | SWAT ;
  Chef d'Escadron Rouchard | Gendarmerie Nationale ; Sous-Lieutenant Medic | Gendarmerie Nationale ;
  Chem-Haz Capitaine | Gendarmerie Nationale ; Aspirant | Gendarmerie Nationale ;
  Officer Jacques Beltram | Gendarmerie Nationale ; Primeiro Tenente | Brazilian 1st Battalion ;
  Lieutenant 'Tree Hugger' Farlow | SWAT ; Crasswater The Forgotten | Guerrilla Warfare ;
  Vypa Sista of the Revolution | Guerrilla Warfare ; Elite Trapper Solman | Guerrilla Warfare ;
  Arno The Overgrown | Guerrilla Warfare ; Col. Mangos Dabisi | Guerrilla Warfare ;
  Trapper Aggressor | Guerrilla Warfare ; Medium Rare 'Crasswater' | Guerrilla Warfare ;
  The Elite Mr. Muhlik | Elite Crew ; Ground Rebel | Elite Crew ; Prof. Shahmat | Elite Crew ; Osiris | Elite Crew ;
  Jungle Rebel | Elite Crew ; Street Soldier | Phoenix ; Slingshot | Phoenix ; Soldier | Phoenix ;
  Enforcer | Phoenix ; Dragomir | Sabre ; Rezan The Ready | Sabre ; Maximus | Sabre ; Blackwolf | Sabre ;
  Rezan the Redshirt | Sabre ; Dragomir | Sabre Footsoldier ; 'The Doctor' Romanov | Sabre ;
  Mr. Muhlik | Elite Crew
`,
  ';',
);

const CHARMS = list(`
  Lil' Ava | Lil' Squirt | Lil' Whiskers | Lil' Cap | Lil' Monster | Lil' Sandy | Lil' Squatch | Lil' Teacup |
  Lil' SAS | Lil' Crass | Lil' Tusk | Lil' Chirp | Lil' Yeti | Lil' Boo | Lil' Chomper | Lil' Eldritch |
  Lil' Ferno | Lil' Hero | Lil' Kev | Lil' Prick | Lil' Smokey | Lil' Tank | Lil' Vino | Lil' Zen | Lil' Zombie |
  Lil' Serpent | Lil' Buns | Lil' Goop | Lil' Cackle | Lil' Bloody | Lil' Dumplin' | Lil' Baller | Lil' Bacon |
  Lil' Sousa | Hot Wurst | Baby's AK | Die-cast AK | Pocket AWP | Disco MAC | Titeenium AWP | Hot Howl | Hot Hands |
  Semi-Precious | Whittle Knife | Glamour Shot | Big Kev | Diamond Dog | Pinch O' Salt | Hang Loose | Dead Weight |
  Backsplash | Bomb Tag | Magmatude | Lil' Ruby | Chicken Little | Biomech
`);

const MUSIC_KITS = list(`
  Daniel Sadowski, Crimson Assault | Noisia, Sharpened | Robert Allaire, Insurgency | Sean Murray, A*D*8 |
  Feed Me, High Noon | Dren, Death's Head Demolition | Austin Wintory, Desert Fire | Sasha, LNOE | Skog, Metal |
  Matt Lange, IsoRhythm | Mateo Messina, For No Mankind | Various Artists, Hotline Miami |
  Damjan Mravunac, The Talos Principle | Troels Folmann, Uber Blasto Phone | Kelly Bailey, Hazardous Environments |
  Lennie Moore, Java Havana Funkaloo | Darude, Moments CS:GO | Beartooth, Disgusting | Blitz Kids, The Good Youth |
  Hundredth, FREE | Neck Deep, Life's Not Out To Get You | Roam, Backbone | Twin Atlantic, GLA | Skog, II-Headshot |
  Proxy, Battlepack | Ki:Theory, MOLOTOV | Scarlxrd, King, Scar | Chipzel, ~Yellow Magic~ |
  Amon Tobin, All for Dust | Mord Fustang, Diamonds
`);

const PATCHES = list(`
  Bloodhound | Crazy Banana | Metal Crown | Hydra | Silver | Gold Nova I | Master Guardian Elite |
  The Global Elite | Howl | Dragon Lore | Welcome to the Clutch | Wildfire | Phoenix | Vigilance | Dust II |
  Inferno | Mirage | Nuke | Overpass | Vertigo | Anubis | Ancient | Chicken Lover | Bananas | Cyclops | Boss |
  Clutch | Eco Rush | Worry | Kawaii Killer | Rage Mode | Headshot | The Boss | Tactics | Legendary Eagle
`);

const PINS = list(`
  Guardian Elite | Howl | Dragon Lore | Bloodhound | Victory | Chroma | Tactics | Phoenix | Hydra | Inferno | Nuke |
  Mirage | Dust II | Cache | Cobblestone | Overpass | Train | Guardian | Guardian 2 | Guardian 3 | Bravo | Baggage |
  Valeria Phoenix | Easy Peasy | Canals | Italy | Militia | Office | Wildfire | Brigadier General
`);

const GRAFFITI = list(`
  GGWP | GLHF | Headshot | Clutch King | Eco Rush | Rage Mode | Recoil | Nice Shot | Lambda | Cocky | Jump Shot |
  Backstab | Keep the Change | Hop | Piggles | Take Flight | Chess King | Dizzy | Sorry | Worry | Toasted |
  Death Sentence | Fire in the Hole | Mr. Teeth | Bling | Quickdraw | Tombstone | Heart | Shattered | Bomb Doge
`);

const GRAFFITI_COLOURS = list(`
  Battle Green | Bazooka Pink | Blood Red | Brick Red | Cash Green | Desert Amber | Dust Brown | Frog Green |
  Jungle Green | Monarch Blue | Monster Purple | Princess Pink | SWAT Blue | Shark White | Tiger Orange |
  Tracer Yellow | Violent Violet | War Pig Pink | Wire Blue
`);

function simpleEntry(
  name: string,
  category: ItemCategory & Stratum,
  medianCents: number,
  spread: number,
  extra: { stattrak?: boolean; family?: string; premium?: Premium } = {},
): Entry {
  return entry({
    name,
    category,
    stratum: category,
    exterior: null,
    stattrak: extra.stattrak ?? false,
    souvenir: false,
    medianCents,
    family: extra.family ?? name,
    spread,
    premium: extra.premium ?? null,
  });
}

const MUSIC_KIT_STATTRAK: Premium = { min: 2, max: 3 };

function miscEntries(): Entry[] {
  const entries: Entry[] = [];
  for (const [name, cents] of CASES) entries.push(simpleEntry(name, 'case', cents, 0.15));
  for (const name of AGENTS) entries.push(simpleEntry(name, 'agent', 900, 0.9));
  for (const name of CHARMS) entries.push(simpleEntry(`Charm | ${name}`, 'charm', 150, 1));
  for (const kit of MUSIC_KITS) {
    const family = `Music Kit | ${kit}`;
    entries.push(simpleEntry(family, 'other', 400, 0.6));
    entries.push(
      simpleEntry(`StatTrak™ ${family}`, 'other', 400, 0.6, { stattrak: true, family, premium: MUSIC_KIT_STATTRAK }),
    );
  }
  for (const name of PATCHES) entries.push(simpleEntry(`Patch | ${name}`, 'other', 120, 0.8));
  for (const name of PINS) entries.push(simpleEntry(`${name} Pin`, 'other', 1_500, 0.7));
  for (const name of GRAFFITI) {
    for (const colour of GRAFFITI_COLOURS) {
      entries.push(
        simpleEntry(`Sealed Graffiti | ${name} (${colour})`, 'other', 8, 0.6, { family: `Sealed Graffiti | ${name}` }),
      );
    }
  }
  return entries;
}

// ---------------------------------------------------------------------------------------------
// Universe and strata
// ---------------------------------------------------------------------------------------------

/**
 * Strata in priority order: a catalogue smaller than the number of strata takes the first ones,
 * so even a 7-name catalogue has a Doppler knife, a sticker, a StatTrak™ skin and a glove.
 */
const STRATA: readonly (readonly [Stratum, ItemCategory])[] = [
  ['weapon', 'weapon'],
  ['knife-doppler', 'knife'],
  ['sticker', 'sticker'],
  ['weapon-stattrak', 'weapon'],
  ['gloves', 'gloves'],
  ['case', 'case'],
  ['knife-gamma', 'knife'],
  ['weapon-souvenir', 'weapon'],
  ['agent', 'agent'],
  ['knife', 'knife'],
  ['charm', 'charm'],
  ['other', 'other'],
];

/**
 * Names per category in a full catalogue. Weapons take the rest; a category's strata share its
 * target in proportion to their size.
 */
const CATEGORY_TARGETS: Readonly<Record<Exclude<ItemCategory, 'weapon'>, number>> = {
  knife: 3_300,
  gloves: 330,
  sticker: 7_500,
  case: 45,
  agent: 45,
  charm: 45,
  other: 500,
};

function categoryTarget(category: ItemCategory): number {
  if (category !== 'weapon') return CATEGORY_TARGETS[category];
  return FULL_CATALOGUE_SIZE - Object.values(CATEGORY_TARGETS).reduce((a, b) => a + b, 0);
}

interface StratumPlan {
  stratum: Stratum;
  /** Positions of the stratum's entries in `Universe.sorted`. */
  members: readonly number[];
  /** Share of a catalogue's names, as names in a full catalogue. */
  weight: number;
}

interface Universe {
  /** Every entry in output order (category, then name), so a catalogue never needs sorting. */
  sorted: readonly Entry[];
  plans: readonly StratumPlan[];
}

let universeCache: Universe | undefined;

/** The universe does not depend on the seed, so it is built once per process. */
function universe(): Universe {
  universeCache ??= buildUniverse();
  return universeCache;
}

function buildUniverse(): Universe {
  const paintIndexOf = paintIndexRegistry();
  // Build order fixes which invented paint indexes each finish gets.
  const sorted = [
    ...knifeEntries(paintIndexOf),
    ...gloveEntries(paintIndexOf),
    ...weaponEntries(paintIndexOf),
    ...stickerEntries(),
    ...miscEntries(),
  ].sort(compareEntries);
  assertUniqueNames(sorted);
  const members = new Map<Stratum, number[]>(STRATA.map(([s]) => [s, []]));
  sorted.forEach((e, i) => members.get(e.stratum)?.push(i));
  const categorySize = new Map<ItemCategory, number>();
  for (const [stratum, category] of STRATA) {
    categorySize.set(category, (categorySize.get(category) ?? 0) + (members.get(stratum)?.length ?? 0));
  }
  const plans = STRATA.map(([stratum, category]) => {
    const own = members.get(stratum) ?? [];
    return {
      stratum,
      members: own,
      weight: (categoryTarget(category) * own.length) / (categorySize.get(category) ?? 1),
    };
  });
  return { sorted, plans };
}

/** A duplicate would silently shrink the catalogue below its size; fail loudly instead. */
function assertUniqueNames(entries: readonly Entry[]): void {
  const seen = new Set<string>();
  for (const e of entries) {
    if (seen.has(e.name)) throw new Error(`catalogue: duplicate market_hash_name '${e.name}'`);
    seen.add(e.name);
  }
}

/**
 * Names per stratum for a catalogue of `size`: one each in priority order, then the rest in
 * proportion to the weights (largest remainder), capped at each stratum's size and
 * redistributed until everything is placed.
 */
function allocate(size: number, plans: readonly StratumPlan[]): number[] {
  const caps = plans.map((p) => p.members.length);
  const quotas = plans.map(() => 0);
  let left = size;
  for (let i = 0; i < plans.length && left > 0; i++) {
    if ((caps[i] ?? 0) > 0) {
      quotas[i] = 1;
      left--;
    }
  }
  while (left > 0) {
    const open = plans.map((_, i) => i).filter((i) => (quotas[i] ?? 0) < (caps[i] ?? 0));
    if (open.length === 0) throw new RangeError(`catalogue: no room for ${left} more names`);
    const totalWeight = open.reduce((sum, i) => sum + (plans[i]?.weight ?? 0), 0);
    const remainders: { i: number; fraction: number }[] = [];
    let given = 0;
    for (const i of open) {
      const exact = (left * (plans[i]?.weight ?? 0)) / totalWeight;
      const whole = Math.min(Math.floor(exact), (caps[i] ?? 0) - (quotas[i] ?? 0));
      quotas[i] = (quotas[i] ?? 0) + whole;
      given += whole;
      remainders.push({ i, fraction: exact - Math.floor(exact) });
    }
    left -= given;
    remainders.sort((a, b) => b.fraction - a.fraction || a.i - b.i);
    for (const { i } of remainders) {
      if (left === 0) break;
      if ((quotas[i] ?? 0) < (caps[i] ?? 0)) {
        quotas[i] = (quotas[i] ?? 0) + 1;
        left--;
      }
    }
  }
  return quotas;
}

/** Fisher–Yates over a copy. */
function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const out = items.slice();
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const a = out[i] as T;
    out[i] = out[j] as T;
    out[j] = a;
  }
  return out;
}

/**
 * `count` entries chosen uniformly (partial Fisher–Yates: only the first `count` swaps). With the
 * same stream a smaller count picks a prefix of a larger count's picks, so for one seed a smaller
 * catalogue is almost always a subset of a larger one (exactly when no stratum's quota shrinks).
 */
function sample<T>(items: readonly T[], count: number, random: () => number): T[] {
  if (count >= items.length) return items.slice();
  const out = items.slice();
  for (let i = 0; i < count; i++) {
    const j = i + Math.floor(random() * (out.length - i));
    const a = out[i] as T;
    out[i] = out[j] as T;
    out[j] = a;
  }
  out.length = count;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Rows and prices
// ---------------------------------------------------------------------------------------------

const CATEGORY_ORDER: Readonly<Record<ItemCategory, number>> = {
  weapon: 0,
  knife: 1,
  gloves: 2,
  sticker: 3,
  case: 4,
  agent: 5,
  charm: 6,
  other: 7,
};

function compareEntries(a: Entry, b: Entry): number {
  const byCategory = CATEGORY_ORDER[a.category] - CATEGORY_ORDER[b.category];
  if (byCategory !== 0) return byCategory;
  // Code-unit order, not localeCompare: the same on every machine and ICU version.
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

const MIN_PRICE_CENTS = 3;
/** Name-level noise on top of the family factor; small, so wear and phase ordering survive it. */
const ROW_JITTER = 0.08;
const ALL_PHASES: readonly PhaseOrNone[] = ['', ...DOPPLER_PHASES, ...GAMMA_DOPPLER_PHASES];
const PHASE_HASH: ReadonlyMap<PhaseOrNone, number> = new Map(ALL_PHASES.map((p) => [p, hashString(p)]));

function priceCents(e: Entry, phase: PhaseOrNone, seedSalt: number): number {
  const family = Math.exp(e.spread * normal(e.familyHash, SALT.family ^ seedSalt));
  const premium = e.premium
    ? e.premium.min + (e.premium.max - e.premium.min) * unit(e.familyHash, SALT.premium ^ seedSalt)
    : 1;
  const phaseFactor = phase === '' ? 1 : PHASE_PREMIUM[phase];
  const jitter = Math.exp(ROW_JITTER * normal(e.nameHash ^ (PHASE_HASH.get(phase) ?? 0), SALT.row ^ seedSalt));
  return Math.max(MIN_PRICE_CENTS, Math.round(e.medianCents * family * premium * phaseFactor * jitter));
}

function toRows(entries: readonly Entry[], seedSalt: number): CatalogueItem[] {
  const rows: CatalogueItem[] = [];
  for (const e of entries) {
    for (const phase of e.phases) {
      rows.push({
        index: rows.length,
        marketHashName: e.name,
        phase,
        exterior: e.exterior,
        stattrak: e.stattrak,
        souvenir: e.souvenir,
        category: e.category,
        basePriceCents: priceCents(e, phase, seedSalt),
        paintIndex: e.paintIndex,
        hasFloat: e.exterior !== null,
      });
    }
  }
  return rows;
}

/**
 * Generates the catalogue: `size` distinct market_hash_names (Doppler and Gamma Doppler names
 * expand to one row per phase), ordered by category then name, with seeded reference prices.
 *
 * @param options.seed any integer, used modulo 2^32. @default 1
 * @param options.size 1..FULL_CATALOGUE_SIZE. @default SMALL_CATALOGUE_SIZE
 * @throws RangeError for a non-integer seed or a size outside 1..FULL_CATALOGUE_SIZE.
 */
export function generateCatalogue(options: CatalogueOptions = {}): CatalogueItem[] {
  const seed = options.seed ?? 1;
  const size = options.size ?? SMALL_CATALOGUE_SIZE;
  if (!Number.isSafeInteger(seed)) throw new RangeError(`catalogue: seed must be an integer, got ${seed}`);
  if (!Number.isInteger(size) || size < 1 || size > FULL_CATALOGUE_SIZE) {
    throw new RangeError(`catalogue: size must be an integer in 1..${FULL_CATALOGUE_SIZE}, got ${size}`);
  }
  const seedSalt = mix32((seed >>> 0) + 0x9e3779b9);
  const { sorted, plans } = universe();
  const quotas = allocate(size, plans);
  const picked = new Uint8Array(sorted.length);
  plans.forEach((plan, i) => {
    // One stream per stratum, so one stratum's quota never changes what another one picks.
    const random = mulberry32(mix32(seedSalt ^ SALT.stratum ^ i));
    for (const position of sample(plan.members, quotas[i] ?? 0, random)) picked[position] = 1;
  });
  const chosen = sorted.filter((_, position) => picked[position] === 1);
  return toRows(chosen, seedSalt);
}

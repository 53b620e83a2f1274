/** The simulator's parts, for embedding (tests, benchmarks); main.ts wires them for a process. */
export { generateCatalogue, FULL_CATALOGUE_SIZE, SMALL_CATALOGUE_SIZE, type CatalogueItem } from './catalogue.js';
export { SimClock } from './clock.js';
export { Extras } from './extras.js';
export { FaultBoard, FAULT_KINDS, type FaultKind, type FaultSpec } from './faults.js';
export { MarketModel, formatMinor } from './model.js';
export { Simulator, type RunningSimulator } from './server.js';
export { truth, TRUTH_KINDS, type TruthKind } from './truth.js';
export { simulatorConfigSchema, type SimulatorConfig } from './config.js';

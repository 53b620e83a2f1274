export * from './errors.js';
export * from './markets.js';
export * from './kinds.js';
export * from './items.js';
export * from './decimal.js';
export * from './time.js';

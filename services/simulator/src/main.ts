/** Wires the simulator: catalogue → model → HTTP listeners. Nothing else happens here. */
import { createLogger, parseConfig, ShutdownManager } from '@skinprices/runtime';
import { generateCatalogue } from './catalogue.js';
import { SimClock } from './clock.js';
import { simulatorConfigSchema } from './config.js';
import { Extras } from './extras.js';
import { FaultBoard } from './faults.js';
import { MarketModel } from './model.js';
import { Simulator } from './server.js';

const config = parseConfig(simulatorConfigSchema, process.env);
const logger = createLogger('simulator', config.LOG_LEVEL);
const shutdown = new ShutdownManager(logger);

const catalogue = generateCatalogue({ seed: config.SIM_SEED, size: config.SIM_CATALOGUE_SIZE });
const model = new MarketModel(catalogue, config.SIM_SEED);
const clock = new SimClock(config.SIM_START ? Date.parse(config.SIM_START) : Date.now(), config.SIM_SPEED);
const simulator = new Simulator({ model, extras: new Extras(model), clock, faults: new FaultBoard(), logger });

const running = await simulator.start({
  host: config.SIM_HOST,
  controlPort: config.SIM_CONTROL_PORT,
  basePort: config.SIM_BASE_PORT,
  formats: config.SIM_FORMATS,
  dailyHistory: config.SIM_DAILY_HISTORY,
});
shutdown.register('simulator', () => running.stop());
shutdown.listen();
logger.info(
  { control: running.controlUrl, markets: running.marketUrls, rows: catalogue.length },
  'simulator listening',
);

/**
 * Starts the API: one process (serve.ts), or, with API_PROCESSES above 1, a node:cluster primary
 * (cluster.ts) whose workers each run serve.ts on the shared port.
 */
import cluster from 'node:cluster';
import { createLogger, parseConfig } from '@skinprices/runtime';
import { ApiPrimary, processCount } from './cluster.js';
import { apiConfigSchema } from './config.js';
import { serve } from './serve.js';

const config = parseConfig(apiConfigSchema, process.env);
const logger = createLogger('api', config.LOG_LEVEL);
const processes = processCount(config.API_PROCESSES);

if (processes > 1 && cluster.isPrimary)
  await new ApiPrimary({
    processes,
    logger,
    metrics: config.METRICS_PORT === undefined ? undefined : { host: config.METRICS_HOST, port: config.METRICS_PORT },
    sharedLimits: !config.REDIS_URL,
  }).start();
else await serve(config, logger, cluster.isWorker ? 'worker' : 'alone');

import pino, { type Logger } from 'pino';

export type { Logger };

/** JSON logs to stdout; `service` on every line so a supervisor's merged output stays readable. */
export function createLogger(service: string, level = 'info'): Logger {
  return pino({ name: service, level, base: { service, pid: process.pid } });
}

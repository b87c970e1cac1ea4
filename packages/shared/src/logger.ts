import { type Logger, type LoggerOptions, pino } from 'pino';
import { currentRequestContext } from './request-context.ts';

export type { Logger };

/** Paths that may carry secrets; pino replaces them before anything is written. */
const REDACT = [
  'password',
  'token',
  'key',
  'secret',
  '*.password',
  '*.token',
  '*.key',
  '*.secret',
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'req.headers["x-csrf-token"]',
  'res.headers["set-cookie"]',
];

export interface LoggerConfig {
  level: string;
  service: string;
}

/** JSON logs with the request id of the current request on every line. */
export function createLogger(config: LoggerConfig, destination?: pino.DestinationStream): Logger {
  const options: LoggerOptions = {
    level: config.level,
    base: { service: config.service },
    redact: { paths: REDACT, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    mixin() {
      const ctx = currentRequestContext();
      return ctx ? { reqId: ctx.requestId } : {};
    },
  };
  return destination ? pino(options, destination) : pino(options);
}

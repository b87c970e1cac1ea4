import { type Logger, type LoggerOptions, pino } from 'pino';
import { currentRequestContext } from './request-context.ts';
import { isTracingEnabled, traceLogFields } from './tracing.ts';

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

/**
 * JSON logs with the request id of the current request on every line, and, when tracing is on
 * (tracing.ts), the `trace_id` and `span_id` of the span the line is written in.
 */
export function createLogger(config: LoggerConfig, destination?: pino.DestinationStream): Logger {
  const options: LoggerOptions = {
    level: config.level,
    base: { service: config.service },
    redact: { paths: REDACT, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    mixin() {
      const ctx = currentRequestContext();
      if (!isTracingEnabled()) return ctx ? { reqId: ctx.requestId } : {};
      const traced = traceLogFields();
      if (!traced) return ctx ? { reqId: ctx.requestId } : {};
      return ctx ? { reqId: ctx.requestId, ...traced } : traced;
    },
  };
  return destination ? pino(options, destination) : pino(options);
}

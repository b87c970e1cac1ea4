import { createLogger, type Logger } from '@relayplane/shared/logger';

/** A logger for tests: silent unless TEST_LOG_LEVEL is set. */
export function testLogger(service = 'test'): Logger {
  return createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent', service });
}

import { createLogger, type Logger } from '@relayplane/shared/logger';
import { auditSink } from './audit.ts';

/**
 * A logger for tests: silent unless TEST_LOG_LEVEL is set. Under the secrets audit
 * (RELAYPLANE_TEST_AUDIT_DIR) it logs every level, trace included, into the audit directory
 * — the most a misconfigured production logger could print — and still prints only
 * TEST_LOG_LEVEL and above.
 */
export function testLogger(service = 'test'): Logger {
  const printLevel = process.env.TEST_LOG_LEVEL ?? 'silent';
  const sink = auditSink('logs', service);
  if (!sink) return createLogger({ level: printLevel, service });
  let printFrom = Number.POSITIVE_INFINITY;
  const logger = createLogger(
    { level: 'trace', service },
    {
      write(line: string) {
        sink.write(line);
        const level = Number(/"level":(\d+)/.exec(line)?.[1]);
        if (level >= printFrom) process.stdout.write(line);
      },
    },
  );
  printFrom = logger.levels.values[printLevel] ?? Number.POSITIVE_INFINITY;
  return logger;
}

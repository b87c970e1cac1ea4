/**
 * A configuration that cannot work, naming the variable (processes exit 78 with it). Its own
 * module so that the modules config.ts reads types from (db, redis) and the ones that check
 * their own settings (tracing, readiness, process) need not import config.ts: no import circle.
 * `@relayplane/shared/config` re-exports it.
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly variable: string;
  constructor(variable: string, problem: string) {
    super(`configuration error: ${variable} ${problem}`);
    this.variable = variable;
  }
}

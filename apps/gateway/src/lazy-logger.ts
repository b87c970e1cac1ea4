/**
 * Per-request loggers, made only when something is logged. Fastify gives every request a
 * child logger bound to its request id; building a pino child costs about a microsecond, which
 * the hot paths (credentials, JWKS) pay on every request while, at the usual levels, almost
 * none of them ever logs. This factory hands Fastify a stand-in that builds the child on the
 * first call of an enabled level and forwards to it from then on.
 */
import type { FastifyBaseLogger, LogLevel } from 'fastify';

type Bindings = Parameters<FastifyBaseLogger['child']>[0];
type ChildLoggerOptions = NonNullable<Parameters<FastifyBaseLogger['child']>[1]>;

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;
type Level = (typeof LEVELS)[number];

interface LevelAware extends FastifyBaseLogger {
  isLevelEnabled(level: string): boolean;
  levels: { values: Record<string, number> };
}

class LazyChild {
  readonly #parent: LevelAware;
  readonly #bindings: Bindings;
  readonly #options: ChildLoggerOptions;
  #child: FastifyBaseLogger | undefined;

  constructor(parent: LevelAware, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#options = options;
  }

  get level(): string {
    return this.#child?.level ?? (this.#options.level as string | undefined) ?? this.#parent.level;
  }

  set level(level: string) {
    this.#real().level = level as LogLevel;
  }

  #real(): FastifyBaseLogger {
    this.#child ??= this.#parent.child(this.#bindings, this.#options);
    return this.#child;
  }

  #enabled(level: Level): boolean {
    if (this.#child) return true;
    const own = this.#options.level as string | undefined;
    if (own === undefined) return this.#parent.isLevelEnabled(level);
    const values = this.#parent.levels.values;
    const threshold = own === 'silent' ? Number.POSITIVE_INFINITY : (values[own] ?? 0);
    return (values[level] ?? 0) >= threshold;
  }

  #log(level: Level, args: unknown[]): void {
    if (this.#enabled(level)) (this.#real()[level] as (...a: unknown[]) => void)(...args);
  }

  // Prototype methods, not per-instance closures: a request allocates one small object.
  fatal(...args: unknown[]): void {
    this.#log('fatal', args);
  }
  error(...args: unknown[]): void {
    this.#log('error', args);
  }
  warn(...args: unknown[]): void {
    this.#log('warn', args);
  }
  info(...args: unknown[]): void {
    this.#log('info', args);
  }
  debug(...args: unknown[]): void {
    this.#log('debug', args);
  }
  trace(...args: unknown[]): void {
    this.#log('trace', args);
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#real().child(bindings, options);
  }

  /** This logger with `extra` bindings, still unbuilt if this one is (a child otherwise). */
  withBindings(extra: Bindings): FastifyBaseLogger {
    if (this.#child) return this.#child.child(extra);
    return new LazyChild(
      this.#parent,
      { ...this.#bindings, ...extra },
      this.#options,
    ) as unknown as FastifyBaseLogger;
  }
}

/**
 * `logger` with `extra` bindings on every line: a request logger from the factory below stays
 * unbuilt until it logs; any other logger gets a child.
 */
export function withBindings(logger: FastifyBaseLogger, extra: Bindings): FastifyBaseLogger {
  return logger instanceof LazyChild ? logger.withBindings(extra) : logger.child(extra);
}

/** Fastify's `childLoggerFactory`: a request logger that costs nothing until it logs. */
export function lazyChildLoggerFactory(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger {
  return new LazyChild(logger as LevelAware, bindings, options) as unknown as FastifyBaseLogger;
}

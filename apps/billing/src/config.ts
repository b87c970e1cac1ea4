import { readFileSync } from 'node:fs';
import {
  ConfigError,
  EnvReader,
  LOG_LEVELS,
  type LogLevel,
  readMaxConnectionAgeMs,
  readMetricsAddress,
} from '@relayplane/shared/config';
import type { DatabaseConfig } from '@relayplane/shared/db';
import { parse as parseYaml } from 'yaml';
import { DEFAULT_PLANS, type Plan, type PlanId, resolvePlans } from './domain/plans.ts';

export interface BillingConfig {
  /** host:port the gRPC server binds (port 0: any free port). */
  listen: string;
  /** gRPC server max connection age (ms); 0: never. */
  maxConnectionAgeMs: number;
  database: DatabaseConfig;
  plans: Record<PlanId, Plan>;
  /** host:port of the Prometheus metrics listener (`BILLING_METRICS_ADDRESS`); undefined: none. */
  metricsAddress: string | undefined;
  logLevel: LogLevel;
}

/** Reads a YAML or JSON plans file (JSON is YAML). */
export function loadPlansFile(
  path: string | undefined,
  variable = 'RELAYPLANE_PLANS_FILE',
): Record<PlanId, Plan> {
  if (path === undefined) return structuredClone(DEFAULT_PLANS);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(
      variable,
      `names a file that cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'}: ${path})`,
    );
  }
  try {
    return resolvePlans(parseYaml(text));
  } catch (err) {
    throw new ConfigError(variable, `(${path}) is invalid: ${(err as Error).message}`);
  }
}

export function readBillingConfig(
  env: Readonly<Record<string, string | undefined>>,
  overrides: Partial<BillingConfig> = {},
): BillingConfig {
  const r = new EnvReader(env);
  return {
    listen: overrides.listen ?? r.address('BILLING_LISTEN_ADDRESS', '127.0.0.1:50053'),
    maxConnectionAgeMs:
      overrides.maxConnectionAgeMs ?? readMaxConnectionAgeMs(r, 'BILLING_GRPC_MAX_CONNECTION_AGE_MS'),
    database: overrides.database ?? {
      kind: 'postgres',
      url: r.url('BILLING_DATABASE_URL', ['postgres:', 'postgresql:'], r.optional('DATABASE_URL')),
      poolMax: r.int('BILLING_DATABASE_POOL_MAX', 10, { min: 1, max: 200 }),
    },
    plans: overrides.plans ?? loadPlansFile(r.optional('RELAYPLANE_PLANS_FILE')),
    metricsAddress:
      'metricsAddress' in overrides
        ? overrides.metricsAddress
        : readMetricsAddress(r, 'BILLING_METRICS_ADDRESS'),
    logLevel: overrides.logLevel ?? r.oneOf('LOG_LEVEL', LOG_LEVELS, 'info'),
  };
}

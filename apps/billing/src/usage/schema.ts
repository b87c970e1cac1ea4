import type { ColumnType } from 'kysely';

/**
 * One UTC day of usage per tenant and project (`project_id` '' is the tenant's total),
 * recomputed from the issuer and replaced as a whole day at a time.
 */
export interface UsageDailyTable {
  tenant_id: string;
  /** Empty: the whole tenant (its own peak, not the sum of its projects' peaks). */
  project_id: string;
  /** `date`; written as YYYY-MM-DD, read back with `to_char` (the pg driver would make a local-time Date). */
  day: ColumnType<Date | string, string, string>;
  /** int8: pg returns a string, PGlite may return a number or bigint. */
  credentials_issued: ColumnType<
    string | number | bigint,
    string | number | bigint,
    string | number | bigint
  >;
  peak_concurrent_connections: number;
  /** Taken before the issuer was asked: the rows cover at least everything up to it. */
  computed_at: Date;
}

/** The usage tables; merged into `BillingDatabase` (db/schema.ts) as `usage_daily: UsageDailyTable`. */
// A type alias, not an interface: `Kysely.withTables` needs the implicit index signature.
export type UsageDatabase = {
  usage_daily: UsageDailyTable;
};

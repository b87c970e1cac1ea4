import type { Migration } from 'kysely/migration';
import * as subscriptions from './20261122T1900-subscriptions.ts';

/** Every migration of the billing schema, by name (applied in name order). */
export const migrations: Record<string, Migration> = {
  '20261122T1900-subscriptions': subscriptions,
};

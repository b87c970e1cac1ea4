import { type RawBuilder, sql } from 'kysely';

/**
 * `'a', 'b', …` for a check constraint over values that contract.ts owns (roles, key modes, environments), so a
 * migration does not spell them a second time. A migration that changes such a set replaces
 * the constraint itself; a fresh database runs both and ends the same.
 */
export function literalList(values: readonly string[]): RawBuilder<unknown> {
  return sql.join(values.map((value) => sql.lit(value)));
}

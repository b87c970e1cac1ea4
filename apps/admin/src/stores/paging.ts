/**
 * Keyset paging for the admin lists (docs/iam.md, "Lists and paging").
 *
 * Every list is ordered by `created_at` and then a column unique within the list (an id, or an
 * allowlist entry's CIDR), ascending or descending. A page is the next `limit` rows after a
 * position — the sort key of the last row answered — read with `LIMIT limit + 1`: the extra row
 * only says whether another page follows. Nothing is read before the position, so a page costs
 * the same however deep it is, and rows inserted or deleted meanwhile neither repeat nor skip
 * the rows that stay.
 *
 * The position's time is PostgreSQL's own text of `created_at`, to the microsecond: a JavaScript
 * Date keeps milliseconds only, and a row stamped by `now()` in the same millisecond as the last
 * one answered would otherwise be skipped or answered twice.
 */
import { type RawBuilder, type SqlBool, sql } from 'kysely';

export type Order = 'asc' | 'desc';

/** Where a page starts: after the row with this sort key. */
export interface Position {
  /** `created_at` as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (UTC, microseconds). */
  at: string;
  /** The unique column that orders rows of the same `created_at`. */
  key: string;
}

export interface PageRequest {
  /** Rows to answer, at least 1. */
  limit: number;
  /** Undefined: the first page. */
  after: Position | undefined;
}

export interface Page<T> {
  items: T[];
  /** The last item's position when more rows follow; undefined on the last page. */
  next: Position | undefined;
}

/** `created_at` (the column named) as the microsecond text a Position keeps; select it `as('position_at')`. */
export function positionAt(createdAt: string): RawBuilder<string> {
  return sql<string>`to_char(${sql.ref(createdAt)} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
}

/** The rows after `position` in the order (`createdAt`, `key`) `order`. */
export function after(createdAt: string, key: string, order: Order, position: Position): RawBuilder<SqlBool> {
  const op = sql.raw(order === 'asc' ? '>' : '<');
  return sql<SqlBool>`(${sql.ref(createdAt)}, ${sql.ref(key)}) ${op} (${position.at}::timestamptz, ${position.key})`;
}

/**
 * The page of `rows` (read with `limit + 1`, in the list's order): the first `limit` as items,
 * and the position of the last of them when the extra row came back.
 */
export function toPage<R extends { position_at: string }, T>(
  rows: readonly R[],
  page: PageRequest,
  keyOf: (row: R) => string,
  toItem: (row: R) => T,
): Page<T> {
  const answered = rows.slice(0, page.limit);
  const last = answered.at(-1);
  return {
    items: answered.map(toItem),
    next: rows.length > page.limit && last ? { at: last.position_at, key: keyOf(last) } : undefined,
  };
}

/**
 * Paging of a list the gateway holds whole in memory (the plan catalogue): the same `limit`
 * and `cursor` rule as every paged list (schemas.ts `pageParams`), the cursor naming the last
 * item answered.
 */
import { AppError } from '@relayplane/contract/errors';
import { LIST_LIMIT, type PageQuery, pageParams } from '../schemas.ts';

/** What a cursor this API did not answer gets (as the issuer words it for its lists). */
export const CURSOR_MESSAGE = 'cursor is not one this API returned';

/** One page of `items` after `query.cursor` (empty or absent: the first page). */
export function pageInMemory<T>(
  items: readonly T[],
  idOf: (item: T) => string,
  query: PageQuery,
): { items: T[]; next_cursor: string | null } {
  const { limit: asked, cursor } = pageParams(query);
  const limit = asked || LIST_LIMIT.default;
  let start = 0;
  if (cursor !== '') {
    const after = afterId(cursor);
    const index = after === undefined ? -1 : items.findIndex((item) => idOf(item) === after);
    if (index < 0) throw new AppError('invalid_request', CURSOR_MESSAGE);
    start = index + 1;
  }
  const page = items.slice(start, start + limit);
  const last = page[page.length - 1];
  const more = start + limit < items.length;
  return {
    items: page,
    next_cursor:
      more && last !== undefined
        ? Buffer.from(JSON.stringify({ a: idOf(last) })).toString('base64url')
        : null,
  };
}

function afterId(cursor: string): string | undefined {
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined;
  try {
    const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { a?: unknown };
    return typeof parsed === 'object' && parsed !== null && typeof parsed.a === 'string'
      ? parsed.a
      : undefined;
  } catch {
    return undefined;
  }
}

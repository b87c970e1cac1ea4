/**
 * The API pages its lists (`limit`, `cursor`, `next_cursor`; docs/iam.md, "Lists and paging").
 * The CLI's list commands show a whole list, so they ask for the largest page and follow
 * `next_cursor` until the last one; with `--json` they print `{"<field>": [...every item]}`,
 * the shape the API answered before it paged.
 */
import { CliError, EXIT } from './errors.ts';
import type { ApiClient, Auth } from './http.ts';

/** The largest page the API answers. */
export const PAGE_LIMIT = 200;

type Paged<K extends string, T> = { [field in K]: T[] } & { next_cursor?: string | null };

/** Every item of the list at `path` (no query string of its own), in the API's order. */
export async function fetchAll<K extends string, T>(
  api: ApiClient,
  path: string,
  field: K,
  auth: Auth,
): Promise<{ [field in K]: T[] }> {
  const items: T[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  do {
    const query = new URLSearchParams({ limit: String(PAGE_LIMIT) });
    if (cursor !== undefined) query.set('cursor', cursor);
    const { body } = await api.request<Paged<K, T>>(
      'GET',
      `${path}${path.includes('?') ? '&' : '?'}${query}`,
      {
        auth,
      },
    );
    items.push(...(body[field] ?? []));
    cursor = body.next_cursor || undefined;
    // A server that answered one cursor twice would otherwise keep this loop going for ever.
    if (cursor !== undefined) {
      if (seen.has(cursor)) {
        throw new CliError(EXIT.api, `the API answered the same next_cursor twice while listing ${path}`);
      }
      seen.add(cursor);
    }
  } while (cursor !== undefined);
  return { [field]: items } as { [field in K]: T[] };
}

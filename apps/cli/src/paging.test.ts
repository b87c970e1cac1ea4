import { describe, expect, it } from 'vitest';
import { CliError } from './errors.ts';
import { ApiClient, type FetchLike } from './http.ts';
import { fetchAll, PAGE_LIMIT } from './paging.ts';

const AUTH = { kind: 'bearer', token: 'rpu_test', fromEnv: false } as const;

/** A list API over `items`, paged as the gateway pages, recording the URLs asked for. */
function pagedApi(items: string[], cursors: (n: number) => string = (n) => `c${n}`) {
  const asked: URL[] = [];
  const fetchImpl: FetchLike = async (input) => {
    const url = new URL(input);
    asked.push(url);
    const limit = Number(url.searchParams.get('limit') ?? 50);
    const start = url.searchParams.has('cursor') ? Number(url.searchParams.get('cursor')?.slice(1)) : 0;
    const end = start + limit;
    const body = { things: items.slice(start, end), next_cursor: end < items.length ? cursors(end) : null };
    return new Response(JSON.stringify(body), { headers: { 'content-type': 'application/json' } });
  };
  return { api: new ApiClient('http://api.test', fetchImpl), asked };
}

describe('fetchAll: a whole paged list', () => {
  it('asks for pages of the largest size and follows next_cursor to the last page', async () => {
    const items = Array.from({ length: 450 }, (_, i) => `item-${i}`);
    const { api, asked } = pagedApi(items);
    const body = await fetchAll<'things', string>(api, '/v1/things', 'things', AUTH);
    expect(body).toEqual({ things: items });
    expect(asked.map((u) => `${u.pathname}${u.search}`)).toEqual([
      `/v1/things?limit=${PAGE_LIMIT}`,
      `/v1/things?limit=${PAGE_LIMIT}&cursor=c200`,
      `/v1/things?limit=${PAGE_LIMIT}&cursor=c400`,
    ]);
  });

  it('makes one request for a list that fits in a page, and for an empty one', async () => {
    for (const items of [[], ['a', 'b']]) {
      const { api, asked } = pagedApi(items);
      expect(await fetchAll(api, '/v1/things', 'things', AUTH)).toEqual({ things: items });
      expect(asked).toHaveLength(1);
    }
  });

  it('stops with an error when the API answers a cursor it answered before', async () => {
    const items = Array.from({ length: 1000 }, (_, i) => `item-${i}`);
    const { api, asked } = pagedApi(items, () => 'c200');
    const err = await fetchAll(api, '/v1/things', 'things', AUTH).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CliError);
    expect((err as CliError).message).toBe(
      'the API answered the same next_cursor twice while listing /v1/things',
    );
    expect(asked).toHaveLength(2);
  });
});

/**
 * The builders routes declare their shapes with (`object`, `ref`, paging, error responses). The
 * schemas more than one operation uses are in components.ts, each registered with `$id`.
 *
 * The responses every route of a kind gives (authentication, body and query errors, 500/503)
 * are not declared by routes: openapi.ts adds them from each route's guard and schema.
 */
import { AUDIT_LIST_LIMIT } from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';

export const ref = (id: string) => ({ $ref: `${id}#` }) as const;

/**
 * A JSON object of exactly these properties (unknown ones are refused in a request and never
 * sent in a response), each required unless named in `optional`.
 */
export function object(properties: Record<string, object>, optional: readonly string[] = []) {
  const required = Object.keys(properties).filter((name) => !optional.includes(name));
  return {
    type: 'object',
    ...(required.length > 0 ? { required } : {}),
    additionalProperties: false,
    properties,
  } as const;
}

export const errorResponse = (description: string) => ({ description, ...ref('Error') });

/** A browser page's response (html.ts): its errors are pages too. */
export const htmlResponse = (description: string) => ({
  description,
  content: { 'text/html': { schema: { type: 'string' } } },
});

/** Every documented route can answer these, unless it opts out (`config.commonErrors: false`). */
export const COMMON_ERRORS = {
  500: errorResponse('Internal error. Retryable.'),
  503: errorResponse('A service behind the gateway is unavailable. Retry after `Retry-After` seconds.'),
} as const;

/** A route that takes a body. */
export const BODY_ERRORS = {
  400: errorResponse('Malformed JSON, a missing or wrongly typed field, or an unknown field.'),
  413: errorResponse('The request body is larger than the limit.'),
  415: errorResponse('The body is not `application/json`.'),
} as const;

/** A route that takes a query string. */
export const QUERY_ERRORS = { 400: errorResponse('A malformed query parameter.') } as const;

/** Path parameters, each an id of at most 64 characters. */
export function pathParams(...names: string[]) {
  return {
    type: 'object',
    required: names,
    properties: Object.fromEntries(names.map((name) => [name, { type: 'string', maxLength: 64 }])),
  } as const;
}

/** What list operations answer: `{"<field>": [...]}`. */
export function listOf(field: string, items: object) {
  return object({ [field]: { type: 'array', items } });
}

/**
 * Paged lists (docs/iam.md, "Lists and paging"): the page size's default and maximum, the same
 * as the audit trail's and the credentials listing's.
 */
export const LIST_LIMIT = AUDIT_LIST_LIMIT;

/** The query string of a paged list; `extra` are the route's own parameters. */
export function pageQuery(extra: Record<string, object> = {}) {
  return {
    type: 'object',
    additionalProperties: false,
    properties: {
      ...extra,
      limit: {
        type: 'string',
        pattern: '^[0-9]{1,6}$',
        description: `Items per page, 1..${LIST_LIMIT.max} (default ${LIST_LIMIT.default}).`,
      },
      cursor: {
        type: 'string',
        maxLength: 256,
        description: "The previous page's `next_cursor`; absent: the first page.",
      },
    },
  } as const;
}

export interface PageQuery {
  limit?: string;
  cursor?: string;
}

/** What a paged list answers: `{"<field>": [...], "next_cursor": "…" | null}`. */
export function pageOf(field: string, items: object) {
  return object({
    [field]: { type: 'array', items },
    next_cursor: {
      type: ['string', 'null'],
      description: 'Pass as `cursor` for the next page; null on the last page.',
    },
  });
}

/** For a paged list's description. */
export const PAGING =
  `Paged: \`limit\` 1..${LIST_LIMIT.max} (default ${LIST_LIMIT.default}); pass \`next_cursor\` as \`cursor\` ` +
  'for the next page (`null`: the last page). A client sending neither gets the first page.';

/** A paged list's 400. */
export const PAGE_BAD_REQUEST = errorResponse(
  `A malformed query parameter: \`limit\` not a whole number from 1 to ${LIST_LIMIT.max}, or a \`cursor\` this API ` +
    'did not return.',
);

/** The page a list request asks admin for: `limit` outside 1..max is 400 (`cursor` is checked by admin). */
export function pageParams(query: PageQuery): { limit: number; cursor: string } {
  const limit = query.limit === undefined ? 0 : Number(query.limit);
  if (query.limit !== undefined && (limit < 1 || limit > LIST_LIMIT.max)) {
    throw new AppError('invalid_request', `limit must be between 1 and ${LIST_LIMIT.max}`);
  }
  return { limit, cursor: query.cursor ?? '' };
}

/** Values as a prose list of code spans, for descriptions: `` `a`, `b` ``. */
export const codeList = (values: readonly string[]): string => values.map((v) => `\`${v}\``).join(', ');

/**
 * The builders routes declare their shapes with (`object`, `ref`, `oneOf`, `nullable`, paging, error
 * responses). The schemas more than one operation uses are in components.ts, each registered with `$id`.
 *
 * The responses every route of a kind gives (authentication, body and query errors, 500/503)
 * are not declared by routes: openapi.ts adds them from each route's guard and schema.
 */
import { AUDIT_LIST_LIMIT } from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import Type, {
  type Static,
  type TProperties,
  type TSchema,
  type TSchemaOptions,
  type TUnsafe,
} from 'typebox';

export type { Static };
/**
 * Shapes are TypeBox schemas: one declaration is the request's type (through Fastify's type
 * provider), its validation (Fastify's Ajv, as before) and the OpenAPI document. These builders
 * keep the JSON Schema the API has always published: strict objects, `type: [x, "null"]` for
 * nullable values and plain `enum`s (fast-json-stringify serialises them without `anyOf`).
 */
export { Type };

/** A JSON object of exactly these properties: unknown ones are refused in a request and never sent in a response. */
export const object = <P extends TProperties>(properties: P, options: TSchemaOptions = {}) =>
  Type.Object(properties, { additionalProperties: false, ...options });

/** A reference to a shared schema of components.ts (`{"$ref": "Name#"}`), typed as that schema. */
export function ref<S extends TSchema>(schema: S) {
  const id = (schema as { $id?: string }).$id;
  if (id === undefined) throw new Error('ref() of a schema without $id: declare it in components.ts');
  return Type.Unsafe<Static<S>>({ $ref: `${id}#` });
}

/** A string that is one of `values`. */
export const oneOf = <const V extends readonly string[]>(values: V, options: TSchemaOptions = {}) =>
  Type.Unsafe<V[number]>({ type: 'string', enum: values, ...options });

/** `schema` or null, as `{"type": [<type>, "null"]}`. */
export const nullable = <S extends TSchema & { type: string }>(schema: S) =>
  Type.Unsafe<Static<S> | null>({ ...schema, type: [schema.type, 'null'] });

export const dateTime = (options: TSchemaOptions = {}) => Type.String({ format: 'date-time', ...options });
export const nullableDateTime = (options: TSchemaOptions = {}) => nullable(dateTime(options));

/** An error answer: components.ts `Error`, `{"error": "..."}`. */
export const errorResponse = (description: string) =>
  Type.Unsafe<{ error: string }>({ description, $ref: 'Error#' }) as TUnsafe<{ error: string }> & {
    description: string;
  };

/** An answer without a body (204). */
export const noContent = (description: string) => Type.Unsafe<void>({ description, type: 'null' });

/** A browser page's response (html.ts): its errors are pages too. */
export const htmlResponse = (description: string) =>
  Type.Unsafe<string>({ description, content: { 'text/html': { schema: { type: 'string' } } } });

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
export function pathParams<const N extends readonly string[]>(...names: N) {
  return Type.Unsafe<{ [K in N[number]]: string }>({
    type: 'object',
    required: names,
    properties: Object.fromEntries(names.map((name) => [name, { type: 'string', maxLength: 64 }])),
  });
}

/** What list operations answer: `{"<field>": [...]}`. */
export function listOf<const F extends string, S extends TSchema>(field: F, items: S) {
  return Type.Unsafe<{ [K in F]: Static<S>[] }>(object({ [field]: Type.Array(items) }));
}

/**
 * Paged lists (docs/iam.md, "Lists and paging"): the page size's default and maximum, the same
 * as the audit trail's and the credentials listing's.
 */
export const LIST_LIMIT = AUDIT_LIST_LIMIT;

/** The query string of a paged list; `extra` are the route's own parameters. */
export function pageQuery<P extends TProperties = {}>(extra: P = {} as P) {
  return object({
    ...extra,
    limit: Type.Optional(
      Type.String({
        pattern: '^[0-9]{1,6}$',
        description: `Items per page, 1..${LIST_LIMIT.max} (default ${LIST_LIMIT.default}).`,
      }),
    ),
    cursor: Type.Optional(
      Type.String({
        maxLength: 256,
        description: "The previous page's `next_cursor`; absent: the first page.",
      }),
    ),
  });
}

export interface PageQuery {
  limit?: string | undefined;
  cursor?: string | undefined;
}

/** What a paged list answers: `{"<field>": [...], "next_cursor": "…" | null}`. */
export function pageOf<const F extends string, S extends TSchema>(field: F, items: S) {
  return Type.Unsafe<{ [K in F]: Static<S>[] } & { next_cursor: string | null }>(
    object({
      [field]: Type.Array(items),
      next_cursor: nullable(
        Type.String({ description: 'Pass as `cursor` for the next page; null on the last page.' }),
      ),
    }),
  );
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

/**
 * The console's API client: openapi-fetch over the types generated from the gateway's own
 * /openapi.json (src/gen/api.ts, `pnpm generate:api`), so a renamed field breaks the build.
 *
 * Authentication is the session cookie the login sets (HttpOnly, `__Host-` over HTTPS,
 * SameSite=Strict): the page never sees or stores the session token. The CSRF token the API
 * answers (login, GET /admin/v1/auth/session) lives in this module's memory only and goes out as
 * `X-CSRF-Token` on every state-changing request.
 */
import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from './gen/api.ts';

export type { components, paths } from './gen/api.ts';

let csrfToken: string | undefined;
let onUnauthenticated: (() => void) | undefined;

export function setCsrfToken(token: string | undefined): void {
  csrfToken = token;
}

/** Called when an authenticated call answers 401 (the session ended or expired). */
export function whenUnauthenticated(handler: () => void): void {
  onUnauthenticated = handler;
}

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);
/** The API's 401 text for a missing, unknown or expired session (contract INVALID_TOKEN_MESSAGE). */
const SESSION_ENDED = 'invalid or expired token';

const session: Middleware = {
  onRequest({ request }) {
    if (csrfToken !== undefined && !SAFE.has(request.method)) request.headers.set('x-csrf-token', csrfToken);
    return request;
  },
  async onResponse({ response }) {
    // Only a session the API no longer knows signs the page out: a wrong second-factor code or
    // password (a change of password, turning MFA off, approving a device) is a 401 too, with
    // another text, while the session goes on.
    if (response.status === 401) {
      const body = (await response
        .clone()
        .json()
        .catch(() => undefined)) as { error?: unknown } | undefined;
      if (body?.error === SESSION_ENDED) onUnauthenticated?.();
    }
    return response;
  },
};

export const api = createClient<paths>({
  baseUrl: globalThis.location?.origin ?? '',
  credentials: 'same-origin',
});
api.use(session);

/** A refusal from the API: its status and the `{"error"}` text, shown as it came. */
export class ApiError extends Error {
  readonly status: number;
  readonly retryAfter: string | null;
  constructor(status: number, message: string, retryAfter: string | null = null) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

interface Answer<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/** The answer's data, or an ApiError with the API's `{"error"}` text. */
export async function must<T>(call: Promise<Answer<T>>): Promise<T> {
  let answer: Answer<T>;
  try {
    answer = await call;
  } catch {
    throw new ApiError(0, 'The gateway could not be reached. Check the connection and try again.');
  }
  const { data, error, response } = answer;
  if (response.ok) return data as T;
  const text =
    typeof error === 'object' && error !== null && typeof (error as { error?: unknown }).error === 'string'
      ? (error as { error: string }).error
      : `${response.status} ${response.statusText || 'error'}`;
  throw new ApiError(response.status, text, response.headers.get('retry-after'));
}

export function errorText(error: unknown): string {
  if (error instanceof ApiError) return error.message;
  if (error instanceof Error) return error.message;
  return String(error);
}

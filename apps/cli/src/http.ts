/** The HTTP side of the CLI: one request function that turns every failure into a CliError. */
import { ApiError, CliError, EXIT } from './errors.ts';

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

export interface ApiResponse<T = unknown> {
  status: number;
  headers: Headers;
  /** Parsed JSON body; undefined for an empty or non-JSON body. */
  body: T;
}

export type Auth =
  | { kind: 'none' }
  | { kind: 'bearer'; token: string; fromEnv: boolean }
  | { kind: 'apiKey'; key: string };

export interface RequestOptions {
  auth?: Auth;
  /** A JSON body. */
  json?: unknown;
  /** An `application/x-www-form-urlencoded` body (OAuth endpoints). */
  form?: Record<string, string>;
  /** Statuses answered as data instead of thrown (device flow polling reads 400 bodies). */
  accept?: readonly number[];
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 30_000;

/** Joins path segments, each percent-encoded, so an id can never change the path it goes in. */
export function apiPath(template: TemplateStringsArray, ...ids: string[]): string {
  let out = template[0] ?? '';
  ids.forEach((id, i) => {
    out += encodeURIComponent(id) + (template[i + 1] ?? '');
  });
  return out;
}

export class ApiClient {
  readonly baseUrl: string;
  readonly #fetch: FetchLike;

  constructor(baseUrl: string, fetchImpl: FetchLike) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.#fetch = fetchImpl;
  }

  /** An absolute URL for a path, or a URL the server gave us (discovery documents). */
  url(pathOrUrl: string): string {
    return /^https?:\/\//i.test(pathOrUrl) ? pathOrUrl : this.baseUrl + pathOrUrl;
  }

  async request<T = unknown>(
    method: string,
    pathOrUrl: string,
    options: RequestOptions = {},
  ): Promise<ApiResponse<T>> {
    const url = this.url(pathOrUrl);
    const headers: Record<string, string> = { accept: 'application/json' };
    const auth = options.auth ?? { kind: 'none' };
    if (auth.kind === 'bearer') headers.authorization = `Bearer ${auth.token}`;
    if (auth.kind === 'apiKey') headers['x-api-key'] = auth.key;
    let body: string | undefined;
    if (options.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(options.json);
    } else if (options.form !== undefined) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = new URLSearchParams(options.form).toString();
    }

    let res: Response;
    let text: string;
    try {
      res = await this.#fetch(url, {
        method,
        headers,
        body,
        redirect: 'error',
        signal: AbortSignal.timeout(options.timeoutMs ?? DEFAULT_TIMEOUT_MS),
      });
      text = await res.text();
    } catch (err) {
      throw networkError(this.baseUrl, err);
    }

    let parsed: unknown;
    if (text !== '' && (res.headers.get('content-type') ?? '').includes('json')) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
    }
    if ((res.status >= 200 && res.status < 300) || options.accept?.includes(res.status)) {
      return { status: res.status, headers: res.headers, body: parsed as T };
    }
    throw apiError(res, parsed, auth);
  }
}

function apiError(res: Response, body: unknown, auth: Auth): ApiError {
  const fromBody =
    typeof body === 'object' && body !== null && typeof (body as { error?: unknown }).error === 'string'
      ? (body as { error: string }).error
      : undefined;
  const description =
    typeof body === 'object' && body !== null
      ? (body as { error_description?: unknown }).error_description
      : undefined;
  let message = fromBody ?? `HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ''}`;
  if (typeof description === 'string' && description !== '') message += `: ${description}`;
  return new ApiError(res.status, message, body, hintFor(res, auth));
}

function hintFor(res: Response, auth: Auth): string | undefined {
  switch (res.status) {
    case 401:
      if (auth.kind === 'bearer' && auth.fromEnv)
        return 'the token in RELAYPLANE_TOKEN was refused; unset it or set a valid one';
      if (auth.kind === 'apiKey') return 'check the API key (--api-key or RELAYPLANE_API_KEY)';
      return 'run `relayplane login`';
    case 403:
      return 'permission denied: your role (or token) does not allow this operation';
    case 402:
      return "the plan's limit is reached: upgrade the plan";
    case 429: {
      const retry = res.headers.get('retry-after');
      return retry ? `rate limited: retry after ${retry} s` : 'rate limited: retry later';
    }
    default:
      return undefined;
  }
}

function networkError(baseUrl: string, err: unknown): CliError {
  const name = (err as { name?: string } | undefined)?.name;
  if (name === 'TimeoutError') {
    return new CliError(EXIT.network, `no answer from ${baseUrl} in time`, 'check the server and --api-url');
  }
  const cause = (err as { cause?: { code?: string; message?: string } } | undefined)?.cause;
  const detail = cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err));
  return new CliError(
    EXIT.network,
    `cannot reach ${baseUrl} (${detail})`,
    'is the server running? set --api-url or RELAYPLANE_API_URL',
  );
}

/**
 * OAuth 2.0 Device Authorization Grant (RFC 8628) as the public client `relayplane-cli`,
 * with endpoints from the RFC 8414 metadata. Polling never goes faster than the server asks.
 */
import type { ResponseBody } from './api-types.ts';
import { ApiError, CliError, EXIT } from './errors.ts';
import type { ApiClient } from './http.ts';

export const CLIENT_ID = 'relayplane-cli';
export const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
/** RFC 8628 §3.2: the interval when the server names none. */
const DEFAULT_INTERVAL_S = 5;
/** RFC 8628 §3.5: slow_down adds 5 seconds to the interval, for this and every later request. */
const SLOW_DOWN_STEP_S = 5;
/** Network failures in a row while polling before giving up. */
const MAX_NETWORK_FAILURES = 3;

export interface Metadata {
  device_authorization_endpoint: string;
  token_endpoint: string;
}

export interface DeviceAuthorization {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete?: string;
  expires_in: number;
  interval?: number;
}

export interface TokenResponse {
  access_token: string;
  token_type: string;
  expires_in?: number;
}

/**
 * The gateway's answers fit the RFC shapes above (a field it renames or drops fails the
 * typecheck here). The CLI still checks every body at run time: the endpoints come from discovery.
 */
type Fits<T extends U, U> = [T, U];
type _GatewayFitsRfc = [
  Fits<ResponseBody<'/.well-known/oauth-authorization-server', 'get', 200>, Metadata>,
  Fits<ResponseBody<'/admin/v1/auth/device/code', 'post', 200>, DeviceAuthorization>,
  Fits<ResponseBody<'/admin/v1/auth/token', 'post', 200>, TokenResponse>,
];

export interface Clock {
  sleep(ms: number): Promise<void>;
  now(): number;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

export async function discover(api: ApiClient): Promise<Metadata> {
  let res: { body: unknown };
  try {
    res = await api.request('GET', '/.well-known/oauth-authorization-server');
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) {
      throw new CliError(
        EXIT.notFound,
        `${api.baseUrl} does not offer device login (no /.well-known/oauth-authorization-server)`,
        'check --api-url',
      );
    }
    throw err;
  }
  const body = res.body;
  if (
    !isObject(body) ||
    typeof body.device_authorization_endpoint !== 'string' ||
    typeof body.token_endpoint !== 'string'
  ) {
    throw new CliError(
      EXIT.api,
      'the authorization server metadata names no device_authorization_endpoint or token_endpoint',
    );
  }
  return {
    device_authorization_endpoint: body.device_authorization_endpoint,
    token_endpoint: body.token_endpoint,
  };
}

export async function requestDeviceCode(
  api: ApiClient,
  endpoint: string,
  scope?: string,
): Promise<DeviceAuthorization> {
  const form: Record<string, string> = { client_id: CLIENT_ID };
  if (scope) form.scope = scope;
  const { body } = await api.request('POST', endpoint, { form });
  if (
    !isObject(body) ||
    typeof body.device_code !== 'string' ||
    typeof body.user_code !== 'string' ||
    typeof body.verification_uri !== 'string' ||
    typeof body.expires_in !== 'number'
  ) {
    throw new CliError(EXIT.api, 'the device authorization response is missing required fields');
  }
  return body as unknown as DeviceAuthorization;
}

/** The server's interval in seconds, or the RFC's default when it names none (or nonsense). */
function initialInterval(auth: Pick<DeviceAuthorization, 'interval'>): number {
  const i = auth.interval;
  return typeof i === 'number' && Number.isFinite(i) && i > 0 ? i : DEFAULT_INTERVAL_S;
}

/**
 * Polls the token endpoint until the user approves, denies, or the code expires.
 * Waits the interval before every request, the first one included.
 */
export async function pollForToken(
  api: ApiClient,
  tokenEndpoint: string,
  auth: DeviceAuthorization,
  clock: Clock,
): Promise<TokenResponse> {
  let interval = initialInterval(auth);
  const deadline = clock.now() + auth.expires_in * 1000;
  let networkFailures = 0;
  for (;;) {
    if (clock.now() + interval * 1000 > deadline) {
      // The next poll would come after the codes expire: polling sooner is not allowed, later is useless.
      throw expired();
    }
    await clock.sleep(interval * 1000);
    let res: { status: number; body: unknown };
    try {
      res = await api.request('POST', tokenEndpoint, {
        form: { grant_type: DEVICE_CODE_GRANT, device_code: auth.device_code, client_id: CLIENT_ID },
        accept: [400, 401, 403, 429],
      });
      networkFailures = 0;
    } catch (err) {
      if (
        err instanceof CliError &&
        err.exitCode === EXIT.network &&
        ++networkFailures < MAX_NETWORK_FAILURES
      ) {
        // RFC 8628 §3.5: on connection trouble, poll less often.
        interval *= 2;
        continue;
      }
      throw err;
    }
    const body = isObject(res.body) ? res.body : {};
    if (res.status >= 200 && res.status < 300) {
      if (typeof body.access_token !== 'string' || body.access_token === '') {
        throw new CliError(EXIT.api, 'the token endpoint answered no access_token');
      }
      if (typeof body.token_type === 'string' && body.token_type.toLowerCase() !== 'bearer') {
        throw new CliError(EXIT.api, `unsupported token_type "${body.token_type}"`);
      }
      return body as unknown as TokenResponse;
    }
    const error = typeof body.error === 'string' ? body.error : undefined;
    switch (error) {
      case 'authorization_pending':
        continue;
      case 'slow_down':
        interval += SLOW_DOWN_STEP_S;
        continue;
      case 'access_denied':
        throw new CliError(
          EXIT.loginRefused,
          'login denied: the code was not approved',
          'run `relayplane login` to try again',
        );
      case 'expired_token':
        throw expired();
      default: {
        if (res.status === 429 && error === undefined) {
          interval += SLOW_DOWN_STEP_S;
          continue;
        }
        const description = typeof body.error_description === 'string' ? `: ${body.error_description}` : '';
        throw new CliError(EXIT.api, `login failed: ${error ?? `HTTP ${res.status}`}${description}`);
      }
    }
  }
}

function expired(): CliError {
  return new CliError(
    EXIT.loginRefused,
    'login expired: the code was not approved in time',
    'run `relayplane login` to get a new code',
  );
}

import { setTimeout as delay } from 'node:timers/promises';
import { decodeProtectedHeader, errors, jwtVerify } from 'jose';
import { backoffDelayMs } from './backoff.ts';
import { toVerifiedCredential, type VerifiedCredential } from './claims.ts';
import { VerificationError } from './errors.ts';
import { JwksCache } from './jwks-cache.ts';
import { RevocationFeed } from './revocation-feed.ts';

export interface VerifierOptions {
  /** Control-plane base URL; `/v1/credentials/jwks` and `/v1/credentials/revocations` derive from it. */
  baseUrl?: string;
  /** JWKS URL; overrides the one derived from `baseUrl`. */
  jwksUrl?: string;
  /** Revocation feed URL; overrides the one derived from `baseUrl`. */
  revocationsUrl?: string;
  /** Expected `iss`. Default `relayplane`. */
  issuer?: string;
  /** Expected `aud`. Default `relayplane-relay`. */
  audience?: string;
  /** Clock skew tolerated on `exp` and `nbf`, in seconds. Default 30. */
  leewaySeconds?: number;
  /** Relay node token for the revocation feed. Without it revocations are NOT followed. */
  relayToken?: string;
  /** Default `globalThis.fetch`. */
  fetch?: typeof globalThis.fetch;
  /** Milliseconds since the epoch. Default `Date.now`. */
  clock?: () => number;
  /** Minimum time between JWKS fetches caused by an unknown `kid`. Default 10 000. */
  refetchIntervalMs?: number;
  /** `wait` sent on each revocation feed long-poll (0..30). Default 25. */
  revocationWaitSeconds?: number;
  /** First retry delay after a failed feed poll or initial JWKS fetch; doubles per failure. Default 500. */
  backoffInitialMs?: number;
  /** Cap on that delay. Default 30 000. */
  backoffMaxMs?: number;
  /** Called with every JWKS refresh or feed poll failure (they are retried, never thrown). */
  onError?: (error: Error) => void;
}

export interface VerifyOptions {
  /** Scope(s) the credential must carry in its `scope` claim (docs/credentials.md lists them). */
  scope?: string | readonly string[];
}

export interface Verifier {
  /**
   * Resolves after the first successful JWKS fetch and, when `relayToken` is set, the first
   * successful revocation feed poll. Rejects only if the verifier is closed before that.
   */
  readonly ready: Promise<void>;
  /** Whether revocations are followed (a `relayToken` was given). */
  readonly followsRevocations: boolean;
  /** Resolves with the claims of a valid credential; rejects with a `VerificationError`. */
  verify(token: string, options?: VerifyOptions): Promise<VerifiedCredential>;
  /** Whether `jti` was revoked according to the feed so far. Always false without `relayToken`. */
  isRevoked(jti: string): boolean;
  /** Stops the feed loop and any fetch under way. Idempotent. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

const JWKS_TIMEOUT_MS = 5_000;
/** Compact Ed25519 credentials are well under 1 KiB; refuse to parse anything absurd. */
const MAX_TOKEN_LENGTH = 8_192;

export function createVerifier(options: VerifierOptions): Verifier {
  const base = options.baseUrl?.replace(/\/+$/, '');
  const jwksUrl = options.jwksUrl ?? (base === undefined ? undefined : `${base}/v1/credentials/jwks`);
  if (jwksUrl === undefined) throw new TypeError('createVerifier needs `jwksUrl` or `baseUrl`');
  const revocationsUrl =
    options.revocationsUrl ?? (base === undefined ? undefined : `${base}/v1/credentials/revocations`);
  const relayToken = options.relayToken;
  if (relayToken !== undefined && revocationsUrl === undefined) {
    throw new TypeError('createVerifier needs `baseUrl` or `revocationsUrl` to follow revocations');
  }
  const issuer = options.issuer ?? 'relayplane';
  const audience = options.audience ?? 'relayplane-relay';
  const leewaySeconds = nonNegative('leewaySeconds', options.leewaySeconds ?? 30);
  const refetchIntervalMs = nonNegative('refetchIntervalMs', options.refetchIntervalMs ?? 10_000);
  const waitSeconds = options.revocationWaitSeconds ?? 25;
  if (!Number.isInteger(waitSeconds) || waitSeconds < 0 || waitSeconds > 30) {
    throw new TypeError('revocationWaitSeconds must be an integer in 0..30');
  }
  const backoffInitialMs = nonNegative('backoffInitialMs', options.backoffInitialMs ?? 500);
  const backoffMaxMs = nonNegative('backoffMaxMs', options.backoffMaxMs ?? 30_000);
  const fetch = options.fetch ?? globalThis.fetch;
  const clock = options.clock ?? Date.now;
  const onError = options.onError ?? (() => {});

  const lifetime = new AbortController();
  const jwks = new JwksCache({
    url: jwksUrl,
    fetch,
    clock,
    refetchIntervalMs,
    timeoutMs: JWKS_TIMEOUT_MS,
    signal: lifetime.signal,
    onError,
  });
  const feed =
    relayToken !== undefined && revocationsUrl !== undefined
      ? new RevocationFeed({
          url: revocationsUrl,
          relayToken,
          waitSeconds,
          fetch,
          clock,
          retainAfterExpiryMs: leewaySeconds * 1000,
          backoffInitialMs,
          backoffMaxMs,
          signal: lifetime.signal,
          onError,
        })
      : undefined;
  if (feed === undefined) {
    process.emitWarning(
      'no relayToken: revoked credentials will be accepted until they expire',
      'RelayplaneVerifierWarning',
    );
  }

  // Fetch the key set up front, retrying with backoff until it loads or the verifier closes.
  const warmUp = (async () => {
    for (let attempt = 1; !lifetime.signal.aborted; attempt += 1) {
      try {
        await jwks.refresh();
        return;
      } catch {
        if (jwks.loaded) return; // a verify-triggered fetch got there first
        try {
          await delay(backoffDelayMs(attempt, backoffInitialMs, backoffMaxMs), undefined, {
            signal: lifetime.signal,
          });
        } catch {
          return;
        }
      }
    }
  })();
  feed?.start();

  let settled = false;
  const ready = new Promise<void>((resolve, reject) => {
    Promise.all([warmUp, feed?.ready]).then(() => {
      if (jwks.loaded) {
        settled = true;
        resolve();
      }
    });
    lifetime.signal.addEventListener('abort', () => {
      if (!settled) reject(new Error('the verifier was closed before it was ready'));
    });
  });
  // Callers who never await `ready` must not see an unhandled rejection on close.
  ready.catch(() => {});

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      lifetime.abort();
      await Promise.all([warmUp, feed?.stopped()]);
    })();
    return closing;
  };

  const verify = async (token: string, verifyOptions: VerifyOptions = {}): Promise<VerifiedCredential> => {
    if (lifetime.signal.aborted) throw new Error('the verifier is closed');
    const kid = checkHeader(token);
    let payload: Awaited<ReturnType<typeof jwtVerify>>['payload'];
    try {
      ({ payload } = await jwtVerify(token, () => jwks.getKey(kid), {
        algorithms: ['EdDSA'],
        typ: 'JWT',
        issuer,
        audience,
        clockTolerance: leewaySeconds,
        currentDate: new Date(clock()),
        requiredClaims: ['iss', 'aud', 'exp', 'nbf', 'iat'],
      }));
    } catch (error) {
      throw toVerificationError(error);
    }
    const credential = toVerifiedCredential(payload);
    const required = verifyOptions.scope === undefined ? [] : [verifyOptions.scope].flat();
    const missing = required.filter((scope) => !credential.scope.includes(scope));
    if (missing.length > 0) {
      throw new VerificationError('missing_scope', `the credential lacks the scope ${missing.join(', ')}`);
    }
    if (feed?.isRevoked(credential.jti)) {
      throw new VerificationError('revoked', 'the credential has been revoked');
    }
    if (feed?.isBeforeWatermark(credential.pid, credential.iat)) {
      throw new VerificationError(
        'revoked',
        "the credential was issued before its project's revocation watermark",
      );
    }
    return credential;
  };

  return {
    ready,
    followsRevocations: feed !== undefined,
    verify,
    isRevoked: (jti) => feed?.isRevoked(jti) ?? false,
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** Rule 1 of the contract, before any key lookup: EdDSA, JWT, a kid. Returns the kid. */
function checkHeader(token: unknown): string {
  if (typeof token !== 'string' || token.length > MAX_TOKEN_LENGTH || token.split('.').length !== 3) {
    throw new VerificationError('malformed', 'the token is not a compact JWS');
  }
  let header: ReturnType<typeof decodeProtectedHeader>;
  try {
    header = decodeProtectedHeader(token);
  } catch (cause) {
    throw new VerificationError('malformed', 'the token header cannot be decoded', { cause });
  }
  if (header.alg !== 'EdDSA') {
    throw new VerificationError('unsupported_alg', 'only the EdDSA algorithm is accepted');
  }
  if (typeof header.typ !== 'string' || header.typ.toUpperCase() !== 'JWT') {
    throw new VerificationError('malformed', 'the token header "typ" must be JWT');
  }
  if (typeof header.kid !== 'string' || header.kid === '') {
    throw new VerificationError('malformed', 'the token header has no "kid"');
  }
  return header.kid;
}

function toVerificationError(error: unknown): VerificationError {
  if (error instanceof VerificationError) return error;
  if (error instanceof errors.JWSSignatureVerificationFailed) {
    return new VerificationError('bad_signature', 'the signature does not verify', { cause: error });
  }
  if (error instanceof errors.JWTExpired) {
    return new VerificationError('expired', 'the credential has expired', { cause: error });
  }
  if (error instanceof errors.JOSEAlgNotAllowed) {
    return new VerificationError('unsupported_alg', 'only the EdDSA algorithm is accepted', { cause: error });
  }
  if (error instanceof errors.JWTClaimValidationFailed) {
    switch (error.claim) {
      case 'iss':
        return new VerificationError('bad_issuer', 'the credential was issued by someone else', {
          cause: error,
        });
      case 'aud':
        return new VerificationError('bad_audience', 'the credential is meant for another audience', {
          cause: error,
        });
      case 'nbf':
        if (error.reason === 'check_failed') {
          return new VerificationError('not_yet_valid', 'the credential is not valid yet', { cause: error });
        }
    }
  }
  return new VerificationError('malformed', 'the token is not a well-formed credential', { cause: error });
}

function nonNegative(name: string, value: number): number {
  if (!Number.isFinite(value) || value < 0) throw new TypeError(`${name} must be a non-negative number`);
  return value;
}

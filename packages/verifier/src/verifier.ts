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
  /**
   * Longest time, in milliseconds, since the revocation feed was last read successfully (or
   * since the verifier was created, before the first read) for which revocations are taken as
   * known. Past it, `onStaleFeed` decides. Must exceed `revocationWaitSeconds` (and 1 s);
   * `Infinity` disables the bound. Default 60 000. Only with `relayToken`.
   */
  maxFeedStaleness?: number;
  /**
   * What `verify` does while the feed is staler than `maxFeedStaleness`: `'closed'` (default)
   * refuses every credential with `feed_stale`; `'open'` accepts what passes every other check
   * (revocations learnt before the feed went stale still apply) and counts it in `metrics()`.
   */
  onStaleFeed?: 'closed' | 'open';
}

/** What `metrics()` answers: the verifier's state, for a relay's own metrics and logs. */
export interface VerifierMetrics {
  /** Whether revocations are followed (a `relayToken` was given). */
  followsRevocations: boolean;
  /** The configured bound, in ms (`Infinity`: none); null without `relayToken`. */
  maxFeedStalenessMs: number | null;
  /** What a stale feed does: `'closed'` refuses, `'open'` accepts; null without `relayToken`. */
  onStaleFeed: 'closed' | 'open' | null;
  /** `clock()` when the feed was last read successfully; null before the first success or without `relayToken`. */
  feedLastSuccessAt: number | null;
  /** Milliseconds since then (since creation before the first success); null without `relayToken`. */
  feedStalenessMs: number | null;
  /** Whether the feed is staler than `maxFeedStaleness` now. */
  feedStale: boolean;
  /** `feedStale` with `onStaleFeed: 'closed'`: every verification is refused (`feed_stale`). */
  failingClosed: boolean;
  /** `feedStale` with `onStaleFeed: 'open'`: credentials are accepted without current revocations. */
  failingOpen: boolean;
  /** Verifications refused with `feed_stale` so far. */
  staleRefusals: number;
  /** Verifications refused with `feed_not_ready` (failing closed before the first successful poll) so far. */
  notReadyRefusals: number;
  /** Credentials accepted while the feed was stale (`onStaleFeed: 'open'`) so far. */
  staleAcceptances: number;
  /** Revoked jtis remembered. */
  revokedCredentials: number;
  /** Signing keys the feed reported revoked. */
  revokedKeys: number;
  /** Keys in the cached JWKS. */
  jwksKeys: number;
  /** JWKS refetches caused by a revoked key. */
  jwksRevocationRefetches: number;
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
  /** Whether the feed reported the signing key `kid` revoked. Always false without `relayToken`. */
  isKeyRevoked(kid: string): boolean;
  /** The verifier's state now: feed staleness and which way it fails, revocations known. */
  metrics(): VerifierMetrics;
  /** Stops the feed loop and any fetch under way. Idempotent. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

const JWKS_TIMEOUT_MS = 5_000;
/** `maxFeedStaleness` by default: more than two held polls of the default 25 s wait. */
const DEFAULT_MAX_FEED_STALENESS_MS = 60_000;
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
  const maxFeedStaleness = options.maxFeedStaleness ?? DEFAULT_MAX_FEED_STALENESS_MS;
  if (Number.isNaN(maxFeedStaleness) || maxFeedStaleness <= Math.max(waitSeconds, 1) * 1000) {
    throw new TypeError(
      'maxFeedStaleness must be more milliseconds than revocationWaitSeconds (and 1 s): a held poll answers only after its wait',
    );
  }
  const onStaleFeed = options.onStaleFeed ?? 'closed';
  if (onStaleFeed !== 'closed' && onStaleFeed !== 'open') {
    throw new TypeError("onStaleFeed must be 'closed' or 'open'");
  }
  const createdAt = clock();
  let staleRefusals = 0;
  let notReadyRefusals = 0;
  let staleAcceptances = 0;

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
          onKeyRevoked: (kid) => jwks.revoke(kid),
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

  /** Milliseconds since the feed was last read successfully (since creation before that). */
  const feedStaleness = (): number | null =>
    feed === undefined ? null : clock() - (feed.lastSuccessAt ?? createdAt);
  const feedIsStale = (): boolean => {
    const staleness = feedStaleness();
    return staleness !== null && staleness > maxFeedStaleness;
  };

  const verify = async (token: string, verifyOptions: VerifyOptions = {}): Promise<VerifiedCredential> => {
    if (lifetime.signal.aborted) throw new Error('the verifier is closed');
    const kid = checkHeader(token);
    if (feed?.isKeyRevoked(kid)) {
      throw new VerificationError('revoked', 'the credential was signed by a revoked signing key');
    }
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
    // Last: a credential refused on what the feed did say keeps that reason.
    // Failing closed, nothing is known of revocations until the first successful poll (issue 31):
    // accepting meanwhile would honour a credential revoked a minute before the relay started.
    if (onStaleFeed === 'closed' && feed !== undefined && feed.lastSuccessAt === undefined) {
      notReadyRefusals += 1;
      throw new VerificationError(
        'feed_not_ready',
        "the revocation feed has not been read successfully yet (onStaleFeed: 'closed')",
      );
    }
    if (feedIsStale()) {
      if (onStaleFeed === 'closed') {
        staleRefusals += 1;
        throw new VerificationError(
          'feed_stale',
          `the revocation feed has not been read successfully for more than ${maxFeedStaleness} ms (onStaleFeed: 'closed')`,
        );
      }
      staleAcceptances += 1;
    }
    return credential;
  };

  const metrics = (): VerifierMetrics => {
    const stale = feedIsStale();
    return {
      followsRevocations: feed !== undefined,
      maxFeedStalenessMs: feed === undefined ? null : maxFeedStaleness,
      onStaleFeed: feed === undefined ? null : onStaleFeed,
      feedLastSuccessAt: feed?.lastSuccessAt ?? null,
      feedStalenessMs: feedStaleness(),
      feedStale: stale,
      failingClosed: stale && onStaleFeed === 'closed',
      failingOpen: stale && onStaleFeed === 'open',
      staleRefusals,
      notReadyRefusals,
      staleAcceptances,
      revokedCredentials: feed?.revokedCount ?? 0,
      revokedKeys: feed?.revokedKeyCount ?? 0,
      jwksKeys: jwks.size,
      jwksRevocationRefetches: jwks.revocationRefetches,
    };
  };

  return {
    ready,
    followsRevocations: feed !== undefined,
    verify,
    isRevoked: (jti) => feed?.isRevoked(jti) ?? false,
    isKeyRevoked: (kid) => feed?.isKeyRevoked(kid) ?? false,
    metrics,
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

/**
 * Every way `verify` can refuse a credential. The codes are stable: relays switch on them,
 * so adding one is a breaking change and renaming one is never done. `feed_stale` was added
 * with `maxFeedStaleness` (README, "Feed staleness"): a relay that treats unknown codes as a
 * refusal needs no change. `feed_not_ready` (issue 31): with `onStaleFeed: 'closed'`, the feed
 * has not been read successfully even once yet.
 */
export type VerificationErrorCode =
  | 'malformed'
  | 'unsupported_alg'
  | 'unknown_kid'
  | 'bad_signature'
  | 'expired'
  | 'not_yet_valid'
  | 'bad_issuer'
  | 'bad_audience'
  | 'missing_scope'
  | 'revoked'
  | 'jwks_unavailable'
  | 'feed_stale'
  | 'feed_not_ready';

/** The one error `verify` rejects with. `message` is safe to log; it never contains the token. */
export class VerificationError extends Error {
  readonly code: VerificationErrorCode;

  constructor(code: VerificationErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'VerificationError';
    this.code = code;
  }
}

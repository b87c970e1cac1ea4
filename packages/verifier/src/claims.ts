import { claimedPaths } from '@relayplane/contract/credential-paths';
import type { JWTPayload } from 'jose';
import { VerificationError } from './errors.ts';

export type CredentialMode = 'live' | 'test';

/** The claims of a credential that passed every check (docs/credentials.md, "Claims"). */
export interface VerifiedCredential {
  iss: string;
  aud: string;
  /** The project the credential speaks for (`prj_…`). */
  sub: string;
  /** Credential id (`crd_…`), the handle for revocation. */
  jti: string;
  /** Seconds since the epoch. */
  iat: number;
  nbf: number;
  exp: number;
  /** Tenant id (`ten_…`). */
  tid: string;
  /** Project id (`prj_…`), same as `sub`. */
  pid: string;
  /** The space-separated `scope` claim, split. */
  scope: string[];
  /** `test` credentials come from test API keys; production relays should refuse them. */
  mode: CredentialMode;
  /** The API key that requested the credential (`key_…`), for audit. */
  akid: string;
  /** Region hint, when the credential was issued for one. */
  rgn?: string;
  /**
   * What the credential may publish and subscribe to (docs/credentials.md, "Path-scoped
   * credentials"): moq's `root` (project id first) and each role's moq patterns relative to it,
   * from its `put`/`get` or `publish`/`subscribe` claims. A credential from before path scoping
   * grants its whole project to the roles its scopes allow. Authorize a session's path with
   * `authorizePath`.
   */
  paths: { root: string; publish: string[]; subscribe: string[] };
}

const STRING_CLAIMS = ['iss', 'aud', 'sub', 'jti', 'tid', 'pid', 'scope', 'mode', 'akid'] as const;
const NUMERIC_CLAIMS = ['iat', 'nbf', 'exp'] as const;

/** Shape-checks a payload whose signature, times, issuer and audience jose already verified. */
export function toVerifiedCredential(payload: JWTPayload): VerifiedCredential {
  const claims: Record<string, unknown> = payload;
  for (const name of STRING_CLAIMS) {
    if (typeof claims[name] !== 'string' || claims[name] === '') {
      throw new VerificationError('malformed', `the "${name}" claim is missing or not a string`);
    }
  }
  for (const name of NUMERIC_CLAIMS) {
    if (typeof claims[name] !== 'number' || !Number.isFinite(claims[name])) {
      throw new VerificationError('malformed', `the "${name}" claim is missing or not a number`);
    }
  }
  const mode = claims.mode;
  if (mode !== 'live' && mode !== 'test') {
    throw new VerificationError('malformed', 'the "mode" claim must be "live" or "test"');
  }
  if (claims.rgn !== undefined && typeof claims.rgn !== 'string') {
    throw new VerificationError('malformed', 'the "rgn" claim must be a string');
  }
  const credential: VerifiedCredential = {
    iss: claims.iss as string,
    aud: claims.aud as string,
    sub: claims.sub as string,
    jti: claims.jti as string,
    iat: claims.iat as number,
    nbf: claims.nbf as number,
    exp: claims.exp as number,
    tid: claims.tid as string,
    pid: claims.pid as string,
    scope: (claims.scope as string).split(' ').filter((s) => s !== ''),
    mode,
    akid: claims.akid as string,
    paths: pathsOf(claims),
  };
  if (typeof claims.rgn === 'string') credential.rgn = claims.rgn;
  return credential;
}

function pathsOf(claims: Record<string, unknown>): VerifiedCredential['paths'] {
  const claimed = claimedPaths({
    pid: claims.pid as string,
    scope: claims.scope as string,
    root: claims.root,
    put: claims.put,
    get: claims.get,
    publish: claims.publish,
    subscribe: claims.subscribe,
  });
  if (!claimed) {
    throw new VerificationError(
      'malformed',
      'the path claims (root, put/get or publish/subscribe) are malformed',
    );
  }
  return {
    root: claimed.root,
    publish: claimed.publish.map((p) => p.text),
    subscribe: claimed.subscribe.map((p) => p.text),
  };
}

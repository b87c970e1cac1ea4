/** Verification of a presented credential: introspection, and fresh relays for its holder. */
import type { KeyObject } from 'node:crypto';
import { AppError, INVALID_TOKEN_MESSAGE } from '@relayplane/contract/errors';
import type { Clock } from '@relayplane/shared/clock';
import type { CredentialsConfig } from '../config.ts';
import { type CredentialClaims, verifyCredential } from '../keys/jwt.ts';
import type { RelayView } from '../relays/relay-directory.ts';
import type { Revocations } from '../revocation/revocations.ts';
import { requestedRegion } from './credential-request.ts';

export interface IntrospectionDeps {
  config: CredentialsConfig;
  clock: Clock;
  keys: { verificationKey(kid: string): KeyObject | undefined };
  revocations: Pick<Revocations, 'isRevoked'>;
  relays: { assign(region?: string): { relays: RelayView[]; fallback: string[] } };
}

export class Introspection {
  readonly #d: IntrospectionDeps;

  constructor(deps: IntrospectionDeps) {
    this.#d = deps;
  }

  /** The claims of a valid, unexpired, unrevoked credential; undefined otherwise. */
  async verify(token: string): Promise<CredentialClaims | undefined> {
    return (await this.verifySigned(token))?.claims;
  }

  /** `verify`, with the kid of the key that signed it (a relay session re-checks that key). */
  async verifySigned(token: string): Promise<{ claims: CredentialClaims; kid: string } | undefined> {
    let kid = '';
    const claims = verifyCredential(token, {
      issuer: this.#d.config.issuer,
      audience: this.#d.config.audience,
      now: this.#d.clock.now().getTime() / 1000,
      keyFor: (k) => {
        kid = k;
        return this.#d.keys.verificationKey(k);
      },
    });
    if (!claims) return undefined;
    const revoked = await this.#d.revocations.isRevoked(claims.jti, {
      projectId: claims.pid,
      iat: claims.iat,
      kid,
    });
    return revoked ? undefined : { claims, kid };
  }

  /** Fresh relays for the holder of a valid credential (region: asked, else the credential's). */
  async assign(token: string, region: string): Promise<{ relays: RelayView[]; fallback: string[] }> {
    const claims = await this.verify(token);
    if (!claims) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
    return this.#d.relays.assign(requestedRegion(region) ?? claims.rgn);
  }
}

import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { IssuerDeps } from './deps.ts';

/** IntrospectCredential (RFC 7662 shape): inactive for anything not valid, unexpired and unrevoked. */
export function introspectCredential({
  introspection,
}: Pick<IssuerDeps, 'introspection'>): ServiceImpl<typeof IssuerService>['introspectCredential'] {
  return async (req) => {
    const claims = await introspection.verify(req.token);
    if (!claims) return { active: false };
    return {
      active: true,
      scopes: claims.scope.split(' ').filter(Boolean),
      clientId: claims.akid,
      sub: claims.sub,
      aud: claims.aud,
      iss: claims.iss,
      jti: claims.jti,
      exp: BigInt(claims.exp),
      iat: BigInt(claims.iat),
      nbf: BigInt(claims.nbf),
      tenantId: claims.tid,
      projectId: claims.pid,
      mode: claims.mode,
    };
  };
}

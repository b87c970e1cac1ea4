import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { IssuerDeps } from './deps.ts';

/** GetJwks: the published key set from memory, with its strong ETag. */
export function getJwks({ keys }: Pick<IssuerDeps, 'keys'>): ServiceImpl<typeof IssuerService>['getJwks'] {
  return async () => {
    const jwks = keys.jwks();
    return { keys: [...jwks.keys], etag: jwks.etag };
  };
}

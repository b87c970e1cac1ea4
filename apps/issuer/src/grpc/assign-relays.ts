import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { IssuerDeps } from './deps.ts';
import { relayMessage } from './messages.ts';

/** AssignRelays: fresh relays for the holder of a valid credential. */
export function assignRelays({
  introspection,
}: Pick<IssuerDeps, 'introspection'>): ServiceImpl<typeof IssuerService>['assignRelays'] {
  return async (req) => {
    const { relays, fallback } = await introspection.assign(req.token, req.region);
    return { relays: relays.map(relayMessage), fallback };
  };
}

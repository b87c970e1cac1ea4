import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { IssuerDeps } from './deps.ts';
import { relayMessage } from './messages.ts';

/** ListRelays: static relays, then registered ones (oldest first), each with its health now. */
export function listRelays({
  relays,
}: Pick<IssuerDeps, 'relays'>): ServiceImpl<typeof IssuerService>['listRelays'] {
  return async () => ({ relays: (await relays.list()).map(relayMessage) });
}

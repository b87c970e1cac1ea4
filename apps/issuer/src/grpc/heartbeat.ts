import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { IssuerDeps } from './deps.ts';
import { relayMessage } from './messages.ts';

/** Heartbeat: a registered relay's load (0..1), which keeps it healthy and orders assignment. */
export function heartbeat({
  relays,
}: Pick<IssuerDeps, 'relays'>): ServiceImpl<typeof IssuerService>['heartbeat'] {
  return async (req) => ({ relay: relayMessage(await relays.heartbeat(req.relayId, req.load)) });
}

import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { IssuerDeps } from './deps.ts';
import { relayMessage } from './messages.ts';

/** RegisterRelay: the relay node token (`rpr_…`) is answered here only. */
export function registerRelay({
  relays,
}: Pick<IssuerDeps, 'relays'>): ServiceImpl<typeof IssuerService>['registerRelay'] {
  return async (req) => {
    const { relay, token } = await relays.register({
      region: req.region,
      host: req.host,
      port: req.port,
      clientCertificateSha256: req.clientCertificateSha256,
    });
    return { relay: relayMessage(relay), token };
  };
}

import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { IssuerDeps } from './deps.ts';
import { relayMessage } from './messages.ts';

/** AuthenticateRelay: the live relay a relay node token (or a registered client certificate) belongs to. */
export function authenticateRelay({
  relays,
}: Pick<IssuerDeps, 'relays'>): ServiceImpl<typeof IssuerService>['authenticateRelay'] {
  return async (req) => ({
    relay: relayMessage(
      req.token === '' && req.clientCertificateSha256 !== ''
        ? await relays.authenticateCertificate(req.clientCertificateSha256)
        : await relays.authenticate(req.token),
    ),
  });
}

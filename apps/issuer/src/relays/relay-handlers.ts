import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { IssuerService, RelaySchema } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { RelayDirectory, RelayView } from './relay-directory.ts';

/** The `Relay` message for a relay (also used for the relays handed out with credentials). */
export function relayMessage(relay: RelayView): MessageInitShape<typeof RelaySchema> {
  return {
    id: relay.id,
    region: relay.region,
    host: relay.host,
    port: relay.port,
    url: relay.url,
    status: relay.status,
    load: relay.load,
    static: relay.static,
    lastHeartbeatAt: relay.lastHeartbeatAt ? timestampFromDate(relay.lastHeartbeatAt) : undefined,
    createdAt: relay.createdAt ? timestampFromDate(relay.createdAt) : undefined,
  };
}

/** The relay registry RPCs; AssignRelays needs credential verification and lives with it. */
export function relayHandlers(
  dir: RelayDirectory,
): Pick<
  ServiceImpl<typeof IssuerService>,
  'registerRelay' | 'listRelays' | 'deleteRelay' | 'authenticateRelay' | 'heartbeat'
> {
  return {
    async registerRelay(req) {
      const { relay, token } = await dir.register({ region: req.region, host: req.host, port: req.port });
      return { relay: relayMessage(relay), token };
    },
    async listRelays() {
      return { relays: (await dir.list()).map(relayMessage) };
    },
    async deleteRelay(req) {
      await dir.remove(req.relayId);
      return {};
    },
    async authenticateRelay(req) {
      return { relay: relayMessage(await dir.authenticate(req.token)) };
    },
    async heartbeat(req) {
      return { relay: relayMessage(await dir.heartbeat(req.relayId, req.load)) };
    },
  };
}

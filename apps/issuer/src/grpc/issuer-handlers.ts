import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { assignRelays } from './assign-relays.ts';
import { authenticateRelay } from './authenticate-relay.ts';
import { deleteRelay } from './delete-relay.ts';
import type { IssuerDeps } from './deps.ts';
import { getJwks } from './get-jwks.ts';
import { getTenantConnections } from './get-tenant-connections.ts';
import { heartbeat } from './heartbeat.ts';
import { introspectCredential } from './introspect-credential.ts';
import { issueCredential } from './issue-credential.ts';
import { issueCredentialBatches, issueCredentials } from './issue-credential-streams.ts';
import { listCredentials } from './list-credentials.ts';
import { listRelays } from './list-relays.ts';
import { listRevocations } from './list-revocations.ts';
import { listSigningKeys } from './list-signing-keys.ts';
import { registerRelay } from './register-relay.ts';
import { decideRelaySession, endRelaySession, listRelaySessions } from './relay-sessions.ts';
import { revokeCredential } from './revoke-credential.ts';
import { revokeCredentials } from './revoke-credentials.ts';
import { revokeSigningKey } from './revoke-signing-key.ts';
import { rotateSigningKeys } from './rotate-signing-keys.ts';
import { summarizeUsage } from './summarize-usage.ts';

export function issuerHandlers(deps: IssuerDeps): ServiceImpl<typeof IssuerService> {
  return {
    getJwks: getJwks(deps),
    listSigningKeys: listSigningKeys(deps),
    rotateSigningKeys: rotateSigningKeys(deps),
    revokeSigningKey: revokeSigningKey(deps),
    issueCredential: issueCredential(deps),
    issueCredentials: issueCredentials(deps),
    issueCredentialBatches: issueCredentialBatches(deps),
    revokeCredential: revokeCredential(deps),
    revokeCredentials: revokeCredentials(deps),
    listCredentials: listCredentials(deps),
    introspectCredential: introspectCredential(deps),
    listRevocations: listRevocations(deps),
    assignRelays: assignRelays(deps),
    registerRelay: registerRelay(deps),
    listRelays: listRelays(deps),
    deleteRelay: deleteRelay(deps),
    authenticateRelay: authenticateRelay(deps),
    heartbeat: heartbeat(deps),
    summarizeUsage: summarizeUsage(deps),
    decideRelaySession: decideRelaySession(deps),
    endRelaySession: endRelaySession(deps),
    listRelaySessions: listRelaySessions(deps),
    getTenantConnections: getTenantConnections(deps),
  };
}

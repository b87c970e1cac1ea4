/** The issuer's proto messages built from what its modules answer, and requests read into them. */
import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import {
  type IssueCredentialResponseSchema,
  KeyState,
  type ListSigningKeysResponseSchema,
  type RelaySchema,
  type SigningKeySchema,
} from '@relayplane/proto/issuer';
import type { IssuedCredential } from '../issuance/issuance.ts';
import { eligibleAt, keyState, type KeyState as LifecycleState } from '../keys/key-lifecycle.ts';
import type { StoredKey } from '../keys/signing-key-store.ts';
import type { SigningKeyListing } from '../keys/signing-keys.ts';
import type { RelayView } from '../relays/relay-directory.ts';

const timestamp = (d: Date | null | undefined) => (d ? timestampFromDate(d) : undefined);

const STATES: Record<LifecycleState, KeyState> = {
  next: KeyState.NEXT,
  active: KeyState.ACTIVE,
  previous: KeyState.PREVIOUS,
  removed: KeyState.REMOVED,
};

function signingKeyMessage(key: StoredKey): MessageInitShape<typeof SigningKeySchema> {
  const state = keyState(key);
  return {
    kid: key.kid,
    state: STATES[state],
    createdAt: timestampFromDate(key.createdAt),
    activatedAt: timestamp(key.activatedAt),
    deactivatedAt: timestamp(key.deactivatedAt),
    removeAfter: timestamp(key.removeAfter),
    eligibleAt: state === 'next' ? timestampFromDate(eligibleAt(key)) : undefined,
    removedAt: timestamp(key.removedAt),
  };
}

/** The key listing ListSigningKeys and RotateSigningKeys answer. */
export function signingKeysMessage(
  listing: SigningKeyListing,
): Pick<MessageInitShape<typeof ListSigningKeysResponseSchema>, 'keys' | 'rotationPendingSince'> {
  return {
    keys: listing.keys.map(signingKeyMessage),
    rotationPendingSince: timestamp(listing.rotationPendingSince),
  };
}

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
    lastHeartbeatAt: timestamp(relay.lastHeartbeatAt),
    createdAt: timestamp(relay.createdAt),
    clientCertificateSha256: relay.clientCertificateSha256 ?? '',
  };
}

export function issueResponse(
  issued: IssuedCredential,
): MessageInitShape<typeof IssueCredentialResponseSchema> {
  return {
    token: issued.token,
    jti: issued.jti,
    expiresAt: timestampFromDate(issued.expiresAt),
    relays: issued.relays.map(relayMessage),
    fallback: issued.fallback,
  };
}

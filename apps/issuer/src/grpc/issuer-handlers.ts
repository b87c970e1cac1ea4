import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { type IssuerService, KeyState, type SigningKeySchema } from '@relayplane/proto/issuer';
import { AppError } from '@relayplane/shared/errors';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { eligibleAt, keyState, type KeyState as LifecycleState } from '../domain/key-lifecycle.ts';
import type { MaintenanceResult } from '../keys/key-maintenance.ts';
import type { JwksDocument } from '../keys/key-ring.ts';
import type { StoredKey } from '../stores/signing-keys.ts';

export interface SigningKeyListing {
  keys: StoredKey[];
  rotationPendingSince: Date | null;
}

/** What the handlers need from the service. */
export interface IssuerKeys {
  jwks(): JwksDocument;
  listSigningKeys(): Promise<SigningKeyListing>;
  rotate(requestedBy: string): Promise<MaintenanceResult>;
}

const MAX_REQUESTED_BY = 200;

const STATES: Record<LifecycleState, KeyState> = {
  next: KeyState.NEXT,
  active: KeyState.ACTIVE,
  previous: KeyState.PREVIOUS,
  removed: KeyState.REMOVED,
};

const ts = (d: Date | null) => (d ? timestampFromDate(d) : undefined);

function signingKeyMessage(key: StoredKey): MessageInitShape<typeof SigningKeySchema> {
  const state = keyState(key);
  return {
    kid: key.kid,
    state: STATES[state],
    createdAt: timestampFromDate(key.createdAt),
    activatedAt: ts(key.activatedAt),
    deactivatedAt: ts(key.deactivatedAt),
    removeAfter: ts(key.removeAfter),
    eligibleAt: state === 'next' ? timestampFromDate(eligibleAt(key)) : undefined,
    removedAt: ts(key.removedAt),
  };
}

type KeyMethods = 'getJwks' | 'listSigningKeys' | 'rotateSigningKeys';

/** The whole IssuerService: the key RPCs here, credentials and relays from their own modules. */
export function issuerHandlers(
  keys: IssuerKeys,
  rest: Omit<ServiceImpl<typeof IssuerService>, KeyMethods>,
): ServiceImpl<typeof IssuerService> {
  return { ...keyHandlers(keys), ...rest };
}

function keyHandlers(keys: IssuerKeys): Pick<ServiceImpl<typeof IssuerService>, KeyMethods> {
  return {
    async getJwks() {
      const jwks = keys.jwks();
      return { keys: [...jwks.keys], etag: jwks.etag };
    },
    async listSigningKeys() {
      const listing = await keys.listSigningKeys();
      return {
        keys: listing.keys.map(signingKeyMessage),
        rotationPendingSince: ts(listing.rotationPendingSince),
      };
    },
    async rotateSigningKeys(req) {
      const requestedBy = req.requestedBy.trim();
      if (requestedBy.length > MAX_REQUESTED_BY) {
        throw new AppError('invalid_request', `requested_by must be at most ${MAX_REQUESTED_BY} characters`);
      }
      const result = await keys.rotate(requestedBy || 'unspecified');
      const listing = await keys.listSigningKeys();
      return {
        keys: listing.keys.map(signingKeyMessage),
        rotationPendingSince: ts(listing.rotationPendingSince),
        rotated: result.rotation !== null,
      };
    },
  };
}

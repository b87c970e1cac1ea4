/**
 * Revoking a compromised signing key (docs/credentials.md, "Revoking a signing key"): an
 * emergency, not a rotation. The record is the revocation feed's (`Credentials.revokeSigningKey`:
 * the key leaves the key set, the next key signs at once, the feed lists the kid, the event is
 * audited, replicas and gateways are told); this module then brings the key set back to shape
 * through the signing keys' own maintenance.
 */
import type { Credentials } from '../credentials/credentials.ts';
import { keyState } from '../domain/key-lifecycle.ts';
import type { KeyRevocation } from '../stores/signing-key-revocations.ts';
import type { StoredKey } from '../stores/signing-keys.ts';
import type { SigningKeys } from './signing-keys.ts';

export interface SigningKeyRevocationResult extends KeyRevocation {
  /** The revoked key as stored now (removed). */
  revoked: StoredKey;
  /** The key that signs now. */
  active: StoredKey | undefined;
}

/**
 * Revokes `kid` (see `Credentials.revokeSigningKey`), then reloads this replica's key ring and
 * runs one maintenance tick at once: with no next key left to promote it creates a key that
 * signs at once, and it publishes a new next key. A key created here signs without having been
 * published first (revocation cannot wait 300 s): verifiers learn it from their refetch on the
 * feed's `revoked_keys`, or on its unknown kid.
 */
export async function revokeSigningKey(
  deps: {
    keys: Pick<SigningKeys, 'reload' | 'tick' | 'list'>;
    credentials: Pick<Credentials, 'revokeSigningKey'>;
  },
  input: { kid: string; requestedBy: string },
): Promise<SigningKeyRevocationResult> {
  const revocation = await deps.credentials.revokeSigningKey(input.kid, input.requestedBy);
  if (revocation.newly) {
    await deps.keys.reload('tick');
    await deps.keys.tick();
  }
  const { keys } = await deps.keys.list();
  return {
    ...revocation,
    revoked: keys.find((k) => k.kid === input.kid) ?? revocation.key,
    active: keys.find((k) => keyState(k) === 'active'),
  };
}

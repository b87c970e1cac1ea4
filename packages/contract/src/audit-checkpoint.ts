/**
 * A signed audit checkpoint (docs/audit.md, "Signed checkpoints"): a compact JWS (`alg: EdDSA`,
 * `typ: relayplane-audit-checkpoint+jws`, `kid`) over the JSON `{tenant_id, seq, hash, at}` of a
 * chain head. Admin signs them; admin and the CLI (offline, with a saved key) open them here.
 */
import { type KeyObject, verify } from 'node:crypto';

export const CHECKPOINT_JWS_TYPE = 'relayplane-audit-checkpoint+jws';

export interface CheckpointPayload {
  /** The tenant's id; `null` for the platform chain. */
  tenant_id: string | null;
  seq: number;
  hash: string;
  /** When it was signed (RFC 3339). */
  at: string;
}

/** Verifies a checkpoint JWS with `publicKey` (whose kid is `kid`); its payload, or undefined. */
export function openCheckpoint(
  jws: string,
  publicKey: KeyObject,
  kid: string,
): CheckpointPayload | undefined {
  const [header, body, signature, extra] = jws.split('.');
  if (!header || !body || !signature || extra !== undefined) return undefined;
  try {
    const h = JSON.parse(Buffer.from(header, 'base64url').toString('utf8')) as Record<string, unknown>;
    if (h.alg !== 'EdDSA' || h.typ !== CHECKPOINT_JWS_TYPE || h.kid !== kid) return undefined;
    if (!verify(null, Buffer.from(`${header}.${body}`), publicKey, Buffer.from(signature, 'base64url'))) {
      return undefined;
    }
    return JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as CheckpointPayload;
  } catch {
    return undefined;
  }
}

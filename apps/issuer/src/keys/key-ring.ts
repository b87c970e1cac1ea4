import { createHash, createPublicKey, type KeyObject } from 'node:crypto';
import { encodedHeader } from './jwt.ts';
import { keyState, publishedKeys } from './key-lifecycle.ts';
import { openPrivateKey, type PublicJwk, publicJwk } from './key-material.ts';
import type { StoredKey } from './signing-key-store.ts';

export interface JwksDocument {
  /** Active key first, then the next key, then previous keys. */
  keys: readonly PublicJwk[];
  /** The exact response body `{"keys":[...]}`. */
  body: string;
  /** Strong entity tag of `body`, quoted: `"` + base64url(SHA-256(body)) + `"`. */
  etag: string;
}

export interface ActiveSigningKey {
  kid: string;
  /** Imported once per key-set change, never per request. */
  privateKey: KeyObject;
  /** base64url of the JWT header `{"alg":"EdDSA","typ":"JWT","kid"}`, computed once per key. */
  header: string;
}

function jwksDocument(keys: PublicJwk[]): JwksDocument {
  const body = JSON.stringify({ keys });
  return { keys, body, etag: `"${createHash('sha256').update(body).digest('base64url')}"` };
}

/**
 * The in-process view of the key set: what GetJwks serves and what a signer signs with.
 * Rebuilt from the database after every tick and on every key-change message on the bus.
 */
export class KeyRing {
  readonly #kek: Buffer;
  #jwks: JwksDocument = jwksDocument([]);
  #active: ActiveSigningKey | undefined;
  /** Public keys of every published key (active, next, previous), by kid. */
  #verification = new Map<string, KeyObject>();

  constructor(kek: Buffer) {
    this.#kek = kek;
  }

  /** Replaces the cache with `keys` (the live rows); true when the published set changed. */
  load(keys: readonly StoredKey[]): boolean {
    const published = publishedKeys(keys);
    const active = published.find((k) => keyState(k) === 'active');
    if (active && active.kid !== this.#active?.kid) {
      if (!active.sealed) throw new Error(`active signing key ${active.kid} has no private half`);
      this.#active = {
        kid: active.kid,
        privateKey: openPrivateKey(active.sealed, this.#kek, active.kid, active.x),
        header: encodedHeader(active.kid),
      };
    } else if (!active) {
      this.#active = undefined;
    }
    const next = jwksDocument(published.map((k) => publicJwk(k.kid, k.x)));
    const changed = next.etag !== this.#jwks.etag;
    if (changed) {
      this.#jwks = next;
      const verification = new Map<string, KeyObject>();
      for (const k of published) {
        verification.set(
          k.kid,
          this.#verification.get(k.kid) ??
            createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: k.x }, format: 'jwk' }),
        );
      }
      this.#verification = verification;
    }
    return changed;
  }

  jwks(): JwksDocument {
    return this.#jwks;
  }

  /** The public key of a published key (credential verification), or undefined. */
  verificationKey(kid: string): KeyObject | undefined {
    return this.#verification.get(kid);
  }

  /** The key that signs now, or undefined before the first load. */
  activeKey(): ActiveSigningKey | undefined {
    return this.#active;
  }
}

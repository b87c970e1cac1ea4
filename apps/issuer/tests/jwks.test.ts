import { createHash, createPublicKey, sign, verify } from 'node:crypto';
import { IssuerService, KeyState } from '@relayplane/proto/issuer';
import { ManualClock } from '@relayplane/shared/clock';
import { HealthService, ServingStatus } from '@relayplane/shared/health';
import { connect } from '@relayplane/shared/rpc';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JWKS_MAX_AGE_SECONDS } from '../src/keys/key-lifecycle.ts';
import { newKek, type RunningIssuer, rfc7638Thumbprint, seconds, startIssuer } from './support/harness.ts';

const JWK_FIELDS = ['alg', 'crv', 'kid', 'kty', 'use', 'x'];

describe('JWKS of a freshly started issuer (real gRPC, real PostgreSQL)', () => {
  let database: TestDatabase;
  let issuer: RunningIssuer;
  const clock = new ManualClock(Date.parse('2026-11-22T12:00:00Z'));

  beforeAll(async () => {
    database = await createTestDatabase('issuer_jwks');
    issuer = await startIssuer({ databaseUrl: database.url, clock, kek: newKek() });
  });

  afterAll(async () => {
    await issuer?.stop();
    await database?.drop();
  });

  it('publishes exactly two keys on first start, the active one first, then the next one', async () => {
    const { keys } = await issuer.client.getJwks({});
    expect(keys).toHaveLength(2);
    const listed = await issuer.client.listSigningKeys({});
    expect(listed.keys.map((k) => [k.kid, k.state])).toEqual([
      [keys[0]?.kid, KeyState.ACTIVE],
      [keys[1]?.kid, KeyState.NEXT],
    ]);
    expect(listed.rotationPendingSince).toBeUndefined();
    const next = listed.keys[1];
    expect(next?.eligibleAt?.seconds).toBe(BigInt(clock.now().getTime() / 1000 + JWKS_MAX_AGE_SECONDS));
  });

  it('serves every key with exactly the six JWK fields and their fixed values', async () => {
    const { keys } = await issuer.client.getJwks({});
    const body = JSON.parse(issuer.service.keys.jwks().body) as { keys: Record<string, unknown>[] };
    expect(Object.keys(body)).toEqual(['keys']);
    expect(body.keys).toHaveLength(keys.length);
    for (const [i, served] of body.keys.entries()) {
      expect(Object.keys(served).sort()).toEqual(JWK_FIELDS);
      expect(served).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' });
      expect(Buffer.from(served.x as string, 'base64url')).toHaveLength(32);
      const rpc = keys[i];
      expect({
        kty: rpc?.kty,
        crv: rpc?.crv,
        x: rpc?.x,
        kid: rpc?.kid,
        alg: rpc?.alg,
        use: rpc?.use,
      }).toEqual(served);
    }
  });

  it('uses the RFC 7638 thumbprint of each public key as its kid', async () => {
    const { keys } = await issuer.client.getJwks({});
    for (const key of keys) expect(key.kid).toBe(rfc7638Thumbprint(key.x));
    expect(new Set(keys.map((k) => k.kid)).size).toBe(keys.length);
  });

  it('answers a strong ETag: the quoted base64url SHA-256 of the exact body, stable across calls', async () => {
    const first = await issuer.client.getJwks({});
    const second = await issuer.client.getJwks({});
    const { body, etag } = issuer.service.keys.jwks();
    expect(first.etag).toBe(second.etag);
    expect(first.etag).toBe(etag);
    expect(etag).toBe(`"${createHash('sha256').update(body).digest('base64url')}"`);
    expect(body).toBe(
      JSON.stringify({
        keys: first.keys.map((k) => ({ kty: k.kty, crv: k.crv, x: k.x, kid: k.kid, alg: k.alg, use: k.use })),
      }),
    );
  });

  it('caches the active private key in process, ready to sign what the first JWKS key verifies', async () => {
    const { keys } = await issuer.client.getJwks({});
    const active = issuer.service.keys.activeSigningKey();
    expect(active.kid).toBe(keys[0]?.kid);
    expect(issuer.service.keys.activeSigningKey().privateKey).toBe(active.privateKey);
    const data = Buffer.from('header.payload');
    const signature = sign(null, data, active.privateKey);
    const jwk = keys[0];
    const publicKey = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: jwk?.x }, format: 'jwk' });
    expect(verify(null, data, publicKey, signature)).toBe(true);
  });

  it('reports SERVING on the standard health service while its database answers', async () => {
    const health = connect(HealthService, `127.0.0.1:${issuer.service.port}`);
    try {
      const res = await health.check({ service: IssuerService.typeName });
      expect(res.status).toBe(ServingStatus.SERVING);
    } finally {
      health.close();
    }
  });

  it('rejects an overlong requested_by with invalid_request and rotates nothing', async () => {
    const before = await issuer.client.getJwks({});
    await expect(issuer.client.rotateSigningKeys({ requestedBy: 'x'.repeat(201) })).rejects.toMatchObject({
      code: 'invalid_request',
    });
    expect((await issuer.client.listSigningKeys({})).rotationPendingSince).toBeUndefined();
    expect((await issuer.client.getJwks({})).etag).toBe(before.etag);
  });

  it('changes the ETag and puts the new active key first once a rotation takes effect', async () => {
    const before = await issuer.client.getJwks({});
    clock.advance(seconds(JWKS_MAX_AGE_SECONDS));
    const res = await issuer.client.rotateSigningKeys({ requestedBy: 'usr_test' });
    expect(res.rotated).toBe(true);
    const after = await issuer.client.getJwks({});
    expect(after.etag).not.toBe(before.etag);
    expect(after.keys[0]?.kid).toBe(before.keys[1]?.kid);
    expect(after.keys.map((k) => k.kid)).toContain(before.keys[0]?.kid);
    expect(issuer.service.keys.activeSigningKey().kid).toBe(before.keys[1]?.kid);
  });
});

import { createHmac, generateKeyPairSync, sign } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { authorizePath, VerificationError } from '../src/index.ts';
import { type Harness, refusal, startHarness } from './support/harness.ts';
import { b64url, craft, credentialClaims, generateSigningKey, mint } from './support/tokens.ts';

let h: Harness;
const nowS = () => Math.floor(h.clock.now / 1000);

beforeEach(async () => {
  h = await startHarness();
  await h.verifier.ready;
});
afterEach(async () => {
  await h.dispose();
});

describe('a valid credential', () => {
  it('is accepted and its claims come back typed, scope split into a list', async () => {
    const claims = credentialClaims(h.clock.now, { rgn: 'eu-west' });
    const credential = await h.verifier.verify(await mint(h.key, claims), { scope: 'relay:session' });
    const { root: _root, get: _get, ...rest } = claims;
    expect(credential).toEqual({
      ...rest,
      scope: ['relay:session', 'relay:subscribe'],
      paths: { root: 'prj_7hQ2', publish: [], subscribe: ['**'] },
    });
  });

  it("reads the path claims in both of upstream's encodings, and authorizes a dialed path with them", async () => {
    const legacy = await h.verifier.verify(
      await mint(
        h.key,
        credentialClaims(h.clock.now, {
          scope: 'relay:session',
          root: 'prj_7hQ2/room',
          put: ['alice'],
          get: [''],
        }),
      ),
    );
    expect(legacy.paths).toEqual({ root: 'prj_7hQ2/room', publish: ['alice/**'], subscribe: ['**'] });
    expect(authorizePath(legacy, 'prj_7hQ2/room/alice')).toEqual({
      ok: true,
      publish: ['**'],
      subscribe: ['**'],
    });
    expect(authorizePath(legacy, 'prj_7hQ2/room/bob')).toEqual({ ok: true, publish: [], subscribe: ['**'] });
    expect(authorizePath(legacy, 'prj_7hQ2/roomy')).toMatchObject({ ok: false, reason: /does not cover/ });
    const { get: _get, ...patterns } = credentialClaims(h.clock.now, {
      scope: 'relay:session',
      root: 'prj_7hQ2/room',
      publish: ['*/cam'],
    });
    const exact = await h.verifier.verify(await mint(h.key, patterns));
    expect(exact.paths).toEqual({ root: 'prj_7hQ2/room', publish: ['*/cam'], subscribe: [] });
    // From before path scoping: the whole project, to the scopes' roles.
    const { root: _r, get: _g, ...old } = credentialClaims(h.clock.now);
    expect((await h.verifier.verify(await mint(h.key, old))).paths).toEqual({
      root: 'prj_7hQ2',
      publish: [],
      subscribe: ['**'],
    });
  });

  it('refuses malformed path claims: another project, mixed encodings, a bad pattern', async () => {
    for (const over of [
      { root: 'prj_other/room' },
      { root: 'prj_7hQ2', publish: ['a'] },
      { root: 'prj_7hQ2', get: 5 },
      { root: 'prj_7hQ2', get: ['a/*'] },
    ]) {
      const token = await mint(h.key, credentialClaims(h.clock.now, over));
      expect(await refusal(h.verifier.verify(token)), JSON.stringify(over)).toBe('malformed');
    }
  });

  it('is accepted when every scope of a required list is present', async () => {
    const token = await mint(h.key, credentialClaims(h.clock.now));
    const credential = await h.verifier.verify(token, { scope: ['relay:session', 'relay:subscribe'] });
    expect(credential.scope).toEqual(['relay:session', 'relay:subscribe']);
  });

  it('is accepted under a configured issuer and audience', async () => {
    const custom = await startHarness({ issuer: 'https://cp.example', audience: 'edge-eu' });
    try {
      custom.plane.keys = [h.key];
      await custom.verifier.ready;
      const claims = credentialClaims(custom.clock.now, { iss: 'https://cp.example', aud: 'edge-eu' });
      expect((await custom.verifier.verify(await mint(h.key, claims))).iss).toBe('https://cp.example');
      const defaults = credentialClaims(custom.clock.now);
      expect(await refusal(custom.verifier.verify(await mint(h.key, defaults)))).toBe('bad_issuer');
    } finally {
      await custom.dispose();
    }
  });
});

describe('algorithms other than EdDSA', () => {
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const signers: [string, (kid: string, x: string) => (input: Buffer) => Buffer][] = [
    ['none', () => () => Buffer.alloc(0)],
    // The classic confusion attack: the public key's bytes used as an HMAC secret.
    [
      'HS256',
      (_kid, x) => (input) => createHmac('sha256', Buffer.from(x, 'base64url')).update(input).digest(),
    ],
    ['RS256', () => (input) => sign('sha256', input, rsa.privateKey)],
    ['PS256', () => (input) => sign('sha256', input, { key: rsa.privateKey, padding: 6, saltLength: 32 })],
    ['ES256', () => (input) => sign('sha256', input, { key: ec.privateKey, dsaEncoding: 'ieee-p1363' })],
  ];

  it.each(signers)(
    'a token with alg %s under a published kid is refused as unsupported_alg',
    async (alg, signer) => {
      const token = craft(
        { alg, typ: 'JWT', kid: h.key.kid },
        credentialClaims(h.clock.now),
        signer(h.key.kid, h.key.publicJwk.x),
      );
      expect(await refusal(h.verifier.verify(token))).toBe('unsupported_alg');
    },
  );
});

describe('malformed tokens', () => {
  it.each([
    ['an empty string', () => ''],
    ['two segments', () => `${b64url({ alg: 'EdDSA' })}.${b64url({})}`],
    ['a header that is not base64url JSON', () => 'not-json.e30.c2ln'],
    ['a five-segment JWE', () => 'a.b.c.d.e'],
    ['a header without kid', () => craft({ alg: 'EdDSA', typ: 'JWT' }, {}, () => Buffer.alloc(64))],
    [
      'a header whose typ is not JWT',
      () => craft({ alg: 'EdDSA', typ: 'at+jwt', kid: h.key.kid }, {}, () => Buffer.alloc(64)),
    ],
  ])('%s is refused as malformed', async (_name, token) => {
    expect(await refusal(h.verifier.verify(token()))).toBe('malformed');
  });

  it.each([
    ['tid missing', { tid: undefined }],
    ['mode neither live nor test', { mode: 'prod' }],
    ['scope not a string', { scope: ['relay:session'] }],
    ['exp not a number', { exp: 'tomorrow' }],
  ])('a correctly signed credential with %s is refused as malformed', async (_name, override) => {
    const claims = { ...credentialClaims(h.clock.now), ...override } as Record<string, unknown>;
    for (const name of Object.keys(claims)) if (claims[name] === undefined) delete claims[name];
    expect(await refusal(h.verifier.verify(await mint(h.key, claims)))).toBe('malformed');
  });
});

describe('keys and signatures', () => {
  it('a kid that matches no published key is refused as unknown_kid', async () => {
    const stranger = await generateSigningKey();
    expect(await refusal(h.verifier.verify(await mint(stranger, credentialClaims(h.clock.now))))).toBe(
      'unknown_kid',
    );
  });

  it('a signature made with another key under a published kid is refused as bad_signature', async () => {
    const forger = await generateSigningKey();
    const token = await mint(forger, credentialClaims(h.clock.now), { kid: h.key.kid });
    expect(await refusal(h.verifier.verify(token))).toBe('bad_signature');
  });

  it('a payload altered after signing is refused as bad_signature', async () => {
    const [header, , signature] = (await mint(h.key, credentialClaims(h.clock.now))).split('.');
    const widened = b64url(credentialClaims(h.clock.now, { scope: 'relay:session relay:publish' }));
    expect(await refusal(h.verifier.verify(`${header}.${widened}.${signature}`))).toBe('bad_signature');
  });

  it('every refusal is a VerificationError carrying a code', async () => {
    const error = await h.verifier.verify('garbage').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VerificationError);
    expect(error).toMatchObject({ name: 'VerificationError', code: 'malformed' });
  });
});

describe('time checks with the default 30 s leeway', () => {
  it('a credential expired 30 s or more ago is refused as expired', async () => {
    for (const ago of [30, 31, 3600]) {
      const token = await mint(h.key, credentialClaims(h.clock.now, { exp: nowS() - ago }));
      expect(await refusal(h.verifier.verify(token))).toBe('expired');
    }
  });

  it('a credential expired less than 30 s ago is still accepted (clock skew)', async () => {
    const token = await mint(h.key, credentialClaims(h.clock.now, { exp: nowS() - 29 }));
    expect((await h.verifier.verify(token)).exp).toBe(nowS() - 29);
  });

  it('a credential valid only from more than 30 s ahead is refused as not_yet_valid', async () => {
    const token = await mint(h.key, credentialClaims(h.clock.now, { nbf: nowS() + 31 }));
    expect(await refusal(h.verifier.verify(token))).toBe('not_yet_valid');
  });

  it('a credential valid from at most 30 s ahead is accepted (clock skew)', async () => {
    const token = await mint(h.key, credentialClaims(h.clock.now, { nbf: nowS() + 30 }));
    expect((await h.verifier.verify(token)).nbf).toBe(nowS() + 30);
  });

  it('the leeway is configurable: with 0 s one second either way is refused', async () => {
    const strict = await startHarness({ leewaySeconds: 0 });
    try {
      strict.plane.keys = [h.key];
      const now = Math.floor(strict.clock.now / 1000);
      const expired = await mint(h.key, credentialClaims(strict.clock.now, { exp: now - 1 }));
      const early = await mint(h.key, credentialClaims(strict.clock.now, { nbf: now + 1 }));
      expect(await refusal(strict.verifier.verify(expired))).toBe('expired');
      expect(await refusal(strict.verifier.verify(early))).toBe('not_yet_valid');
    } finally {
      await strict.dispose();
    }
  });
});

describe('issuer, audience and scope', () => {
  it('a credential from another issuer is refused as bad_issuer', async () => {
    const token = await mint(h.key, credentialClaims(h.clock.now, { iss: 'evil' }));
    expect(await refusal(h.verifier.verify(token))).toBe('bad_issuer');
  });

  it('a credential without iss is refused as bad_issuer', async () => {
    const claims = credentialClaims(h.clock.now);
    delete claims.iss;
    expect(await refusal(h.verifier.verify(await mint(h.key, claims)))).toBe('bad_issuer');
  });

  it('a credential for another audience is refused as bad_audience', async () => {
    const token = await mint(h.key, credentialClaims(h.clock.now, { aud: 'relayplane-gateway' }));
    expect(await refusal(h.verifier.verify(token))).toBe('bad_audience');
  });

  it('a credential lacking the required scope is refused as missing_scope', async () => {
    const token = await mint(
      h.key,
      credentialClaims(h.clock.now, { scope: 'relay:subscribe relay:sessions' }),
    );
    expect(await refusal(h.verifier.verify(token, { scope: 'relay:session' }))).toBe('missing_scope');
    expect(await refusal(h.verifier.verify(token, { scope: ['relay:subscribe', 'relay:publish'] }))).toBe(
      'missing_scope',
    );
    expect((await h.verifier.verify(token, { scope: 'relay:subscribe' })).jti).toMatch(/^crd_/);
  });
});

import type { SigningKey } from '@relayplane/proto/issuer';
import { SigningKey as SigningKeySchema } from '../components.ts';
import { principalOf } from '../plugins/auth.ts';
import { iso, oneOfValues, presentSigningKey, required } from '../present.ts';
import {
  dateTime,
  errorResponse,
  nullable,
  nullableDateTime,
  object,
  oneOf,
  PAGE_BAD_REQUEST,
  PAGING,
  pageParams,
  pageQuery,
  ref,
  type Static,
  Type,
} from '../schemas.ts';
import type { Api, RouteDeps } from './deps.ts';

const FORBIDDEN = errorResponse('Only platform administrators manage signing keys.');

/** `SigningKeyList` with the cursor of the next page. */
const SIGNING_KEY_PAGE = object({
  keys: Type.Array(ref(SigningKeySchema)),
  rotation_pending_since: nullableDateTime({
    description: 'Set while a requested rotation waits for the next key to become eligible.',
  }),
  next_cursor: nullable(
    Type.String({ description: 'Pass as `cursor` for the next page; null on the last page.' }),
  ),
});

const NOT_FOUND = errorResponse('No signing key has this kid.');

/** A key as listed, with when it was revoked. */
const REVOKED_KEY = object({
  kid: Type.String(),
  state: oneOf(['removed']),
  created_at: dateTime(),
  activated_at: Type.Optional(dateTime({ description: 'When the key started signing.' })),
  deactivated_at: Type.Optional(dateTime({ description: 'When the key stopped signing.' })),
  remove_after: Type.Optional(dateTime()),
  removed_at: dateTime({ description: 'When the key left the JWKS and its private half was destroyed.' }),
  revoked_at: dateTime({ description: 'When the key was revoked.' }),
});

const REVOCATION = object({
  revoked: REVOKED_KEY,
  active: Type.Union([ref(SigningKeySchema), Type.Null()], {
    description:
      'The key that signs now (null only if the issuer could not make one; issuance then answers 503 until it does).',
  }),
  already_revoked: Type.Boolean({
    description: 'True when the key had been revoked before this request: nothing changed.',
  }),
});

function presentRevokedKey(key: SigningKey | undefined): Static<typeof REVOKED_KEY> {
  const revoked = presentSigningKey(required(key, 'revokeSigningKey.revoked'));
  return {
    ...revoked,
    state: oneOfValues(['removed'], revoked.state, 'revoked signing_key.state'),
    removed_at: required(revoked.removed_at, 'revoked signing_key.removed_at'),
    revoked_at: required(iso(key?.revokedAt), 'signing_key.revoked_at'),
  };
}

export function registerSigningKeys(app: Api, { clients, guards, jwks }: RouteDeps): void {
  app.get(
    '/admin/v1/signing-keys',
    {
      onRequest: guards.platformAdmin,
      schema: {
        operationId: 'listSigningKeys',
        summary: 'Signing keys and their life-cycle state',
        description:
          'Platform administrators only. States: next → active → previous → removed. Active first, then next, ' +
          'then previous and removed keys, the latest change first. Removed keys stay listed (one more per ' +
          `rotation). ${PAGING} A key whose state changes while you page (a rotation, a removal) ` +
          'moves in the order: it may be listed twice or not at all.',
        tags: ['signing-keys'],
        querystring: pageQuery(),
        response: { 200: SIGNING_KEY_PAGE, 400: PAGE_BAD_REQUEST, 403: FORBIDDEN },
      },
    },
    async (request) => {
      const res = await clients.issuer.listSigningKeys(pageParams(request.query));
      return {
        keys: res.keys.map(presentSigningKey),
        rotation_pending_since: iso(res.rotationPendingSince) ?? null,
        next_cursor: res.nextCursor || null,
      };
    },
  );

  app.post(
    '/admin/v1/signing-keys/rotate',
    {
      onRequest: guards.platformAdmin,
      schema: {
        operationId: 'rotateSigningKeys',
        summary: 'Rotate the signing key',
        description:
          'The next key becomes active and the active key previous. A next key signs only after it has been in the ' +
          'JWKS for one cache lifetime (300 s): if it is younger, the rotation is recorded as pending (202) and ' +
          "completes by itself at the next key's `eligible_at`. Answers the listing's first page (as " +
          '`GET /admin/v1/signing-keys` without a cursor): `next_cursor` reads on.',
        tags: ['signing-keys'],
        response: {
          200: { description: 'Rotated now.', ...SIGNING_KEY_PAGE },
          202: { description: 'Rotation pending until the next key is eligible.', ...SIGNING_KEY_PAGE },
          403: FORBIDDEN,
        },
      },
    },
    async (request, reply) => {
      const res = await clients.issuer.rotateSigningKeys({ requestedBy: principalOf(request).userId });
      return reply.code(res.rotated ? 200 : 202).send({
        keys: res.keys.map(presentSigningKey),
        rotation_pending_since: iso(res.rotationPendingSince) ?? null,
        next_cursor: res.nextCursor || null,
      });
    },
  );

  app.post(
    '/admin/v1/signing-keys/:kid/revoke',
    {
      onRequest: guards.platformAdmin,
      schema: {
        operationId: 'revokeSigningKey',
        summary: 'Revoke a compromised signing key',
        description:
          'Platform administrators only; audited (`signing_key.revoke`). An emergency, not a rotation: the key leaves ' +
          'the JWKS at once (every gateway serves the set without it within a second) and its private half is ' +
          'destroyed; every credential it signed is refused at `POST /v1/relays/assignment` (401) and ' +
          'introspection (`active: false`), and the revocation feed lists its kid in `revoked_keys` so verifiers ' +
          'refuse its credentials and refetch the JWKS. When it was the active key, the next key (or a new key if ' +
          'there is none) signs at once, without waiting out its 300 s of publication. Revoking a revoked key ' +
          'answers 200 again with `already_revoked: true` and changes nothing. docs/credentials.md, ' +
          '"Revoking a signing key".',
        tags: ['signing-keys'],
        params: object({ kid: Type.String({ maxLength: 128 }) }),
        response: { 200: REVOCATION, 403: FORBIDDEN, 404: NOT_FOUND },
      },
    },
    async (request) => {
      const res = await clients.issuer.revokeSigningKey({
        kid: request.params.kid,
        requestedBy: principalOf(request).userId,
      });
      // This gateway drops the key at once, whether or not the issuer's announcement reaches it
      // (Redis down: the others drop it when their JWKS cache expires, GATEWAY_JWKS_CACHE_MS).
      jwks.revoke(request.params.kid);
      return {
        revoked: presentRevokedKey(res.revoked),
        active: res.active ? presentSigningKey(res.active) : null,
        already_revoked: res.alreadyRevoked,
      };
    },
  );
}

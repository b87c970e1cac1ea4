import type { FastifyInstance } from 'fastify';
import { principalOf } from '../plugins/auth.ts';
import { iso, presentSigningKey } from '../present.ts';
import {
  errorResponse,
  object,
  PAGE_BAD_REQUEST,
  PAGING,
  type PageQuery,
  pageParams,
  pageQuery,
  ref,
} from '../schemas.ts';
import type { RouteDeps } from './deps.ts';

const FORBIDDEN = errorResponse('Only platform administrators manage signing keys.');

/** `SigningKeyList` with the cursor of the next page. */
const SIGNING_KEY_PAGE = object({
  keys: { type: 'array', items: ref('SigningKey') },
  rotation_pending_since: {
    type: ['string', 'null'],
    format: 'date-time',
    description: 'Set while a requested rotation waits for the next key to become eligible.',
  },
  next_cursor: {
    type: ['string', 'null'],
    description: 'Pass as `cursor` for the next page; null on the last page.',
  },
});

export function registerSigningKeys(app: FastifyInstance, { clients, guards }: RouteDeps): void {
  app.get<{ Querystring: PageQuery }>(
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
}

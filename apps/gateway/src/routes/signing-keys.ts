import type { FastifyInstance } from 'fastify';
import { principalOf } from '../plugins/auth.ts';
import { iso, presentSigningKey } from '../present.ts';
import { errorResponse, ref } from '../schemas.ts';
import type { RouteDeps } from './deps.ts';

const FORBIDDEN = errorResponse('Only platform administrators manage signing keys.');

export function registerSigningKeys(app: FastifyInstance, { clients, guards }: RouteDeps): void {
  app.get(
    '/admin/v1/signing-keys',
    {
      onRequest: guards.platformAdmin,
      schema: {
        operationId: 'listSigningKeys',
        summary: 'Signing keys and their life-cycle state',
        description: 'Platform administrators only. States: next → active → previous → removed.',
        tags: ['signing-keys'],
        response: { 200: ref('SigningKeyList'), 403: FORBIDDEN },
      },
    },
    async () => {
      const res = await clients.issuer.listSigningKeys({});
      return {
        keys: res.keys.map(presentSigningKey),
        rotation_pending_since: iso(res.rotationPendingSince) ?? null,
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
          "completes by itself at the next key's `eligible_at`.",
        tags: ['signing-keys'],
        response: {
          200: { description: 'Rotated now.', ...ref('SigningKeyList') },
          202: { description: 'Rotation pending until the next key is eligible.', ...ref('SigningKeyList') },
          403: FORBIDDEN,
        },
      },
    },
    async (request, reply) => {
      const res = await clients.issuer.rotateSigningKeys({ requestedBy: principalOf(request).userId });
      return reply.code(res.rotated ? 200 : 202).send({
        keys: res.keys.map(presentSigningKey),
        rotation_pending_since: iso(res.rotationPendingSince) ?? null,
      });
    },
  );
}

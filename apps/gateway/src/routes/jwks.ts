import { AppError } from '@relayplane/contract/errors';
import type { FastifyReply } from 'fastify';
import { Jwk } from '../components.ts';
import type { JwksSnapshot } from '../jwks-cache.ts';
import { errorResponse, listOf, noContent, object, ref, Type } from '../schemas.ts';
import type { Api, RouteDeps } from './deps.ts';

const CACHE_CONTROL = 'public, max-age=300';

/** True when an If-None-Match header names `etag` (or is `*`); weak comparison per RFC 9110. */
function matches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  const bare = etag.replace(/^W\//, '');
  return ifNoneMatch.split(',').some((t) => {
    const tag = t.trim();
    return tag === '*' || tag.replace(/^W\//, '') === bare;
  });
}

export function registerJwks(app: Api, { jwks }: RouteDeps): void {
  app.get(
    '/v1/credentials/jwks',
    {
      schema: {
        operationId: 'getJwks',
        summary: 'Keys that verify relay credentials (JWKS)',
        description:
          'Public. The active key is first; a next key is listed at least 300 s before it signs; a previous key ' +
          'stays listed until every credential it signed has expired. `Cache-Control: public, max-age=300` and a ' +
          'strong `ETag`; `If-None-Match` gets 304.',
        tags: ['credentials'],
        response: {
          200: listOf('keys', ref(Jwk)),
          304: noContent('Not modified: the key set still has this ETag.'),
        },
      },
    },
    (request, reply) => {
      const answer = (snapshot: JwksSnapshot): void => {
        reply.header('cache-control', CACHE_CONTROL).header('etag', snapshot.etag);
        if (matches(request.headers['if-none-match'], snapshot.etag)) {
          reply.code(304).send();
          return;
        }
        // Pre-serialized once per key-set change (from the same schema's shape): sent as is, so
        // outside the type provider's typing of the body.
        (reply as FastifyReply).type('application/json; charset=utf-8').send(snapshot.body);
      };
      // The hot path is synchronous: the snapshot is in memory (only the first request waits).
      const snapshot = jwks.current();
      if (snapshot) answer(snapshot);
      else return jwks.get().then(answer);
    },
  );

  app.get(
    '/v1/credentials/jwks/:file',
    {
      schema: {
        operationId: 'getJwk',
        summary: 'One key that verifies relay credentials, as a JWK file (`{kid}.jwk`)',
        description:
          "Public. The key of the JWKS whose `kid` is named, as moq's libraries load a public key (moq-relay's " +
          '`--auth-key-dir <base URL>` fetches `<base>/{kid}.jwk`; `@moq/token` `loadPublic`): `alg: EdDSA` and ' +
          '`key_ops: ["verify"]`. A key out of the JWKS (removed, revoked, unknown): 404. `Cache-Control: public, ' +
          'max-age=300`.',
        tags: ['credentials'],
        params: object({
          file: Type.String({ pattern: '^[A-Za-z0-9_-]{1,128}\\.jwk$', description: '`{kid}.jwk`' }),
        }),
        response: {
          200: object({
            kty: Type.Literal('OKP'),
            crv: Type.Literal('Ed25519'),
            x: Type.String(),
            kid: Type.String(),
            alg: Type.Literal('EdDSA'),
            use: Type.Literal('sig'),
            key_ops: Type.Array(Type.Literal('verify')),
          }),
          404: errorResponse('No key of the JWKS has this kid.'),
        },
      },
    },
    async (request, reply) => {
      const snapshot = jwks.current() ?? (await jwks.get());
      const kid = request.params.file.slice(0, -'.jwk'.length);
      const key = snapshot.keys.find((k) => k.kid === kid);
      if (!key) throw new AppError('not_found', 'no key of the JWKS has this kid');
      reply.header('cache-control', CACHE_CONTROL);
      return {
        kty: 'OKP' as const,
        crv: 'Ed25519' as const,
        x: key.x,
        kid: key.kid,
        alg: 'EdDSA' as const,
        use: 'sig' as const,
        key_ops: ['verify' as const],
      };
    },
  );
}

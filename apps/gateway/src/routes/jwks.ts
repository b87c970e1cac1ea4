import type { FastifyReply } from 'fastify';
import { Jwk } from '../components.ts';
import type { JwksSnapshot } from '../jwks-cache.ts';
import { listOf, noContent, ref } from '../schemas.ts';
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
}

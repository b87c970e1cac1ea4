import {
  CREDENTIAL_SCOPES,
  CREDENTIAL_TTL_SECONDS,
  DEFAULT_CREDENTIAL_SCOPES,
} from '@relayplane/contract/contract';
import { decidePaths, rolesOfScopes } from '@relayplane/contract/credential-paths';
import { AppError } from '@relayplane/contract/errors';
import { decideIssuance } from '@relayplane/contract/issuance-policy';
import { PATH_ROOT, PATTERN_LIST, RelayCredential } from '../components.ts';
import { untilGone } from '../long-poll.ts';
import { principalOf } from '../plugins/auth.ts';
import {
  iso,
  isoSecond,
  presentIntrospection,
  presentRelay,
  presentRevocation,
  required,
} from '../present.ts';
import { codeList, dateTime, errorResponse, object, pathParams, ref, Type } from '../schemas.ts';
import type { Api, RouteDeps } from './deps.ts';

export function registerCredentials(
  app: Api,
  { clients, guards, entitlements, issuance, issuanceRate, shutdown }: RouteDeps,
): void {
  app.post(
    '/api/v1/credentials',
    {
      onRequest: guards.apiKey,
      schema: {
        operationId: 'issueCredential',
        summary: 'Issue a relay credential',
        description:
          'Mints a short-lived Ed25519 JWT for connecting to relays, plus the relays to use. `scopes` default to ' +
          `\`${JSON.stringify(DEFAULT_CREDENTIAL_SCOPES)}\` (known: ${codeList(CREDENTIAL_SCOPES)}); ` +
          'each must be granted to the API key (403). ' +
          `\`ttl_seconds\` defaults to ${CREDENTIAL_TTL_SECONDS.default}, ${CREDENTIAL_TTL_SECONDS.min}..${CREDENTIAL_TTL_SECONDS.max}, and at most the plan's maximum (400). ` +
          "`region` biases relay assignment. Each credential holds one of the tenant's concurrent-connection slots " +
          "until it expires or is revoked; at the plan's cap: 402. When the connection counters are unreachable: 503 " +
          'with `Retry-After` (never a credential). ' +
          "Each API key may make at most the plan's `max_issuance_per_second_per_key` requests per second, counted " +
          'over every gateway and refused requests included (a client that keeps sending over it stays refused until ' +
          'the second ends); over it: 429 with `Retry-After` (seconds until the count starts again) and an error ' +
          'naming the limit. Other keys of the tenant have counts of their own. ' +
          '`root`, `publish` and `subscribe` scope the credential to paths of the project (moq patterns relative to ' +
          "`root`; without patterns, `**` for each role the scopes allow): it carries them as moq-token's `root` " +
          '(`<project id>/<root>`) and `put`/`get` claims (`publish`/`subscribe` when a pattern is not a subtree), ' +
          'and relays grant no more. An API key with a `ceiling` issues the ceiling when no paths are asked and ' +
          'refuses a request beyond it (403). Patterns for a role the scopes do not allow: 400.',
        tags: ['credentials'],
        body: object({
          scopes: Type.Optional(
            Type.Array(Type.String({ maxLength: 64 }), { minItems: 1, maxItems: CREDENTIAL_SCOPES.length }),
          ),
          ttl_seconds: Type.Optional(
            Type.Integer({ minimum: CREDENTIAL_TTL_SECONDS.min, maximum: CREDENTIAL_TTL_SECONDS.max }),
          ),
          region: Type.Optional(Type.String({ pattern: '^[a-z0-9-]{1,32}$' })),
          root: Type.Optional(PATH_ROOT),
          publish: Type.Optional(PATTERN_LIST),
          subscribe: Type.Optional(PATTERN_LIST),
        }),
        response: {
          201: ref(RelayCredential),
          402: errorResponse("The plan's concurrent connection cap is reached: upgrade the plan."),
          429: errorResponse(
            "The API key is over the plan's max_issuance_per_second_per_key: retry after `Retry-After` seconds.",
          ),
          403: errorResponse(
            "A requested scope is not granted to the API key, the requested paths exceed the key's ceiling, or the " +
              "client IP is not in the project's allowlist.",
          ),
        },
      },
    },
    async (request, reply) => {
      const auth = request.apiKey;
      if (!auth) throw new AppError('unauthenticated', 'missing API key');
      const body = request.body ?? {};
      // Cached entitlements are taken without waiting (the hot path); a miss asks billing.
      const plan = entitlements.peek(auth.apiKey.tenantId) ?? (await entitlements.get(auth.apiKey.tenantId));
      // The per-key rate counts every request the key makes, the ones refused below included.
      // Decided from this gateway's lease without a round trip while the lease lasts.
      if (plan.issuanceRate) {
        let refusal = issuanceRate.admit(auth.apiKey.id, plan.issuanceRate.value);
        if (refusal instanceof Promise) refusal = await refusal;
        if (refusal) {
          throw plan.issuanceRate.exceeded({
            retryAfterSeconds: Math.max(1, Math.ceil(refusal.retryAfterMs / 1000)),
          });
        }
      }
      // Refused here early (400/403); the issuer decides again with the same policy, as the authority.
      const decision = decideIssuance(
        { scopes: body.scopes, ttlSeconds: body.ttl_seconds, grantedScopes: auth.apiKey.scopes },
        plan.policy,
      );
      if (!decision.ok) throw new AppError(decision.code, decision.message);
      const paths = decidePaths(body, rolesOfScopes(decision.grant.scopes), auth.apiKey.ceiling);
      if (!paths.ok) throw new AppError(paths.code, paths.message);
      const res = await issuance.issue({
        tenantId: auth.apiKey.tenantId,
        projectId: auth.apiKey.projectId,
        apiKeyId: auth.apiKey.id,
        mode: auth.apiKey.mode,
        scopes: decision.grant.scopes,
        ttlSeconds: decision.grant.ttlSeconds,
        region: body.region ?? '',
        policy: plan.policy,
        // For an issuer from before `policy` (a rolling upgrade); the issuer reads it only without one.
        maxConcurrentConnections: decision.grant.cap,
        paths: paths.paths,
      });
      return reply.code(201).send({
        token: res.token,
        expires_at: required(isoSecond(res.expiresAt), 'issueCredential.expires_at'),
        jti: res.jti,
        relays: res.relays.map(presentRelay),
        fallback: res.fallback,
      });
    },
  );

  app.post(
    '/admin/v1/credentials/:jti/revoke',
    {
      onRequest: guards.allow('credentials:revoke'),
      schema: {
        operationId: 'revokeCredential',
        summary: 'Revoke a relay credential',
        description:
          'Idempotent: revoking again answers the first `revoked_at`. Frees its connection slot; relays learn of it ' +
          "through the revocation feed. Another tenant's (or an unknown) `jti`: 404.",
        tags: ['credentials'],
        params: pathParams('jti'),
        response: {
          200: object({ jti: Type.String(), revoked_at: dateTime() }),
          404: errorResponse('No such credential in the active tenant.'),
        },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      const res = await clients.issuer.revokeCredential({
        tenantId: principal.tenantId,
        jti: request.params.jti,
      });
      return { jti: res.jti, revoked_at: required(iso(res.revokedAt), 'revokeCredential.revoked_at') };
    },
  );

  app.get(
    '/v1/credentials/revocations',
    {
      onRequest: guards.relayNode,
      schema: {
        operationId: 'listRevocations',
        summary: 'Revocation feed for relays',
        description:
          'Revocations after `cursor` (start at 0), oldest first. With `wait` (seconds, 0..30) the request is held ' +
          'until one exists or the wait ends (long-poll), so a relay looping on it learns of a revocation within ' +
          'a round trip. Pass `next_cursor` as the next `cursor`. Entries may be forgotten after their `expires_at`. ' +
          '`watermarks` lists every project watermark in force (set by a bulk revocation with `issued_before`, ' +
          'docs/credentials.md "Containment"): refuse that project\'s credentials whose `iat` is before ' +
          '`issued_before`, whether or not their `jti` is listed. Each answer carries the full list; raising a ' +
          'watermark moves `next_cursor` and wakes a held poll like a revocation. Older clients may ignore it. ' +
          '`revoked_keys` lists every signing key revocation in force (docs/credentials.md "Revoking a signing ' +
          'key"): refuse every credential whose JWT header `kid` is listed, drop that key and refetch the JWKS ' +
          'now rather than at its max-age. Each answer carries the full list; a revocation moves `next_cursor` ' +
          'and wakes a held poll. Older clients may ignore it.',
        tags: ['relays'],
        querystring: object({
          cursor: Type.Optional(Type.String({ pattern: '^[0-9]{1,15}$' })),
          wait: Type.Optional(Type.String({ pattern: '^([0-9]|[12][0-9]|30)$' })),
          limit: Type.Optional(Type.String({ pattern: '^([1-9][0-9]{0,2}|1000)$' })),
        }),
        response: {
          200: object({
            revocations: Type.Array(
              object({
                sequence: Type.Integer(),
                jti: Type.String(),
                revoked_at: dateTime(),
                expires_at: dateTime(),
              }),
            ),
            next_cursor: Type.Integer(),
            watermarks: Type.Array(
              object({
                project_id: Type.String(),
                issued_before: dateTime({
                  description: "Refuse this project's credentials with `iat` (as an instant) before it.",
                }),
              }),
            ),
            revoked_keys: Type.Array(
              object({
                kid: Type.String({ description: 'Refuse every credential signed by this key.' }),
                revoked_at: dateTime(),
              }),
            ),
          }),
        },
      },
    },
    async (request, reply) => {
      const waitMs = Number(request.query.wait ?? 0) * 1000;
      const cursor = BigInt(request.query.cursor ?? 0);
      const res = await untilGone(reply, shutdown, (signal) =>
        clients.issuer.listRevocations(
          { cursor, limit: Number(request.query.limit ?? 100), waitMs },
          { deadline: new Date(Date.now() + waitMs + 5_000), signal },
        ),
      );
      // A poll cut short by its client or by shutdown: nothing new.
      if (!res) return { revocations: [], next_cursor: Number(cursor), watermarks: [], revoked_keys: [] };
      return {
        revocations: res.revocations.map(presentRevocation),
        next_cursor: Number(res.nextCursor),
        watermarks: res.watermarks.map((w) => ({
          project_id: w.projectId,
          issued_before: required(iso(w.issuedBefore), 'watermark.issued_before'),
        })),
        revoked_keys: res.revokedKeys.map((k) => ({
          kid: k.kid,
          revoked_at: required(iso(k.revokedAt), 'revoked_key.revoked_at'),
        })),
      };
    },
  );
}

/** RFC 7662 introspection: registered in the scope that parses form bodies (app.ts). */
export function registerIntrospection(forms: Api, { clients, guards }: RouteDeps): void {
  forms.post(
    '/v1/credentials/introspect',
    {
      onRequest: guards.relayNode,
      schema: {
        operationId: 'introspectCredential',
        summary: 'Introspect a relay credential (RFC 7662)',
        description:
          'Body `token=<credential>` as `application/x-www-form-urlencoded` (RFC 7662) or JSON `{"token": …}`. ' +
          'Answers the claims with `active: true` for a valid credential, and exactly `{"active": false}` for an ' +
          'expired, revoked, forged or malformed one.',
        tags: ['relays'],
        body: object({
          token: Type.String({ maxLength: 8192 }),
          token_type_hint: Type.Optional(Type.String()),
        }),
        response: {
          200: object({
            active: Type.Boolean(),
            scope: Type.Optional(Type.String()),
            client_id: Type.Optional(Type.String()),
            token_type: Type.Optional(Type.String()),
            sub: Type.Optional(Type.String()),
            aud: Type.Optional(Type.String()),
            iss: Type.Optional(Type.String()),
            jti: Type.Optional(Type.String()),
            exp: Type.Optional(Type.Integer()),
            iat: Type.Optional(Type.Integer()),
            nbf: Type.Optional(Type.Integer()),
            tid: Type.Optional(Type.String()),
            pid: Type.Optional(Type.String()),
            mode: Type.Optional(Type.String()),
          }),
        },
      },
    },
    async (request) =>
      presentIntrospection(await clients.issuer.introspectCredential({ token: request.body.token })),
  );
}

import { AppError } from '@relayplane/contract/errors';
import {
  credentialOf,
  RELAY_SESSION_EVENTS,
  RELAY_SESSION_ROLES,
  type RelayGrant,
  relayTransport,
} from '@relayplane/contract/relay-auth';
import type { RelaySession, RelaySessionGrant } from '@relayplane/proto/issuer';
import { principalOf } from '../plugins/auth.ts';
import { iso, required } from '../present.ts';
import {
  dateTime,
  errorResponse,
  noContent,
  nullable,
  nullableDateTime,
  object,
  oneOf,
  PAGE_BAD_REQUEST,
  PAGING,
  pageOf,
  pageParams,
  pageQuery,
  pathParams,
  type Static,
  Type,
} from '../schemas.ts';
import { listProjectRelaySessions } from '../workflows/credentials.ts';
import type { Api, RouteDeps } from './deps.ts';

/**
 * One session event, exactly as moq-relay sends it (upstream's `moq-auth` request). Fields this
 * API does not know are accepted and ignored, as upstream's own parsers do: a newer relay still
 * gets an answer.
 */
const SESSION_EVENT = Type.Object(
  {
    id: Type.String({ pattern: '^[0-9a-f]{1,64}$', description: 'The session id, 128-bit hex.' }),
    event: oneOf(RELAY_SESSION_EVENTS),
    node: Type.String({ minLength: 1, maxLength: 256, description: "The relay's registered id (`rly_…`)." }),
    transport: Type.String({ maxLength: 64, description: 'Unknown transports are read as `unknown`.' }),
    remote: Type.Optional(Type.String({ maxLength: 256 })),
    local: Type.Optional(Type.String({ maxLength: 256 })),
    server_name: Type.Optional(Type.String({ maxLength: 256 })),
    alpn: Type.Optional(Type.String({ maxLength: 256 })),
    path: Type.String({ maxLength: 4096 }),
    query: Type.Optional(
      Type.String({
        maxLength: 16_384,
        description: 'The raw query: the credential is `jwt=<relay credential>` (the last non-empty one).',
      }),
    ),
    token: Type.Optional(
      Type.Object(
        {
          kind: Type.Integer({ minimum: 0 }),
          value: Type.String({ maxLength: 16_384, description: 'base64url, unpadded.' }),
        },
        {
          description:
            'A SETUP token: kind 0 carries the relay credential (the same as `jwt=` if both come).',
        },
      ),
    ),
    role: Type.Optional(oneOf(RELAY_SESSION_ROLES, { description: 'Absent: both.' })),
    tls: Type.Optional(Type.Object({}, { description: "The client's certificate; not used to admit." })),
    reason: Type.Optional(Type.String({ maxLength: 256, description: '`end` only.' })),
    duration: Type.Optional(Type.Number({ minimum: 0, description: '`end` only: seconds admitted.' })),
    bytes: Type.Optional(
      Type.Object({ sent: Type.Integer({ minimum: 0 }), received: Type.Integer({ minimum: 0 }) }),
    ),
  },
  { additionalProperties: true },
);

/** The grant: what the relay obeys (upstream's `moq-auth` grant). */
const GRANT = object({
  publish: Type.Optional(Type.Array(Type.String(), { description: 'Patterns relative to `root`.' })),
  subscribe: Type.Optional(Type.Array(Type.String())),
  root: Type.String({
    description: "`<project id>/<dialed path>`: a session reaches its project's broadcasts only.",
  }),
  expires: Type.Integer({ description: 'Unix seconds; renewed by every revalidation.' }),
  revalidate: Type.Integer({ minimum: 1, description: 'Seconds until the relay asks again.' }),
  tier: Type.String({ description: "The tenant's plan." }),
});

const SESSION = object({
  id: Type.String(),
  relay_id: Type.String(),
  transport: Type.String(),
  remote: nullable(Type.String()),
  role: nullable(Type.String({ description: '`publisher`, `subscriber`, or null (both).' })),
  jti: Type.String({ description: 'The credential it connected with.' }),
  started_at: dateTime(),
  last_seen_at: dateTime({ description: 'The last connect or revalidation.' }),
  ended_at: nullableDateTime(),
  reason: nullable(
    Type.String({ description: "Why it ended (the relay's reason, `revoked`, `ended_by_admin`)." }),
  ),
  duration_seconds: nullable(Type.Number()),
  bytes: object({ sent: Type.Integer(), received: Type.Integer() }),
});

function presentGrant(grant: RelaySessionGrant | undefined): Static<typeof GRANT> {
  const g = required(grant, 'decideRelaySession.grant');
  const out: RelayGrant & { root: string; expires: number; revalidate: number; tier: string } = {
    root: g.root,
    expires: Number(g.expires),
    revalidate: g.revalidateSeconds,
    tier: g.tier,
  };
  if (g.publish.length > 0) out.publish = g.publish;
  if (g.subscribe.length > 0) out.subscribe = g.subscribe;
  return out;
}

function presentSession(s: RelaySession): Static<typeof SESSION> {
  return {
    id: s.id,
    relay_id: s.relayId,
    transport: s.transport,
    remote: s.remote || null,
    role: s.role || null,
    jti: s.jti,
    started_at: required(iso(s.startedAt), 'relay_session.started_at'),
    last_seen_at: required(iso(s.lastSeenAt), 'relay_session.last_seen_at'),
    ended_at: iso(s.endedAt) ?? null,
    reason: s.reason || null,
    duration_seconds: s.endedAt ? s.durationSeconds : null,
    bytes: { sent: Number(s.bytesSent), received: Number(s.bytesReceived) },
  };
}

/**
 * The tenant a credential names, read without verifying it: only to look up the plan the issuer
 * decides the connect with. The issuer verifies the credential and refuses when it is not that
 * tenant's.
 */
function claimedTenant(token: string): string | undefined {
  const payload = token.split('.')[1];
  if (!payload || payload.length > 8192) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { tid?: unknown };
    return typeof claims.tid === 'string' && claims.tid.length <= 64 ? claims.tid : undefined;
  } catch {
    return undefined;
  }
}

export function registerRelaySessions(app: Api, { clients, guards, entitlements }: RouteDeps): void {
  app.post(
    '/v1/relays/auth',
    {
      onRequest: guards.relaySession,
      // Upstream's session events may gain fields, which its own parsers ignore: so does this route.
      config: { openBody: true },
      schema: {
        operationId: 'relayAuth',
        summary: "A relay's session event: connect, revalidate or end (moq-relay's auth contract)",
        description:
          'The auth server moq-relay calls (`--auth-url https://<relay_id>:<node token>@<gateway>/v1/relays/auth`): ' +
          'HTTP Basic with the relay id and its node token, or the token as bearer; `node` must be the same relay id ' +
          "(another relay's: 403). The credential comes as `jwt=<relay credential>` in `query` (or a SETUP token of kind " +
          "0). `connect` verifies it fully, checks the relay is one it may use, admits the session under the plan's " +
          '`max_concurrent_connections` (live sessions plus credentials issued within the connect window that have ' +
          'not connected) and answers the grant; the same `id` again gets the same answer. `revalidate` answers the ' +
          'grant with a later `expires` until the session is ended or its credential revoked (by jti, API key, project ' +
          'watermark or signing key): then 403, and the relay closes the session. `end` records reason, duration and ' +
          'bytes and frees the slot (204). A refusal is 403 with the reason, which the relay may log; any other ' +
          'status is an outage to the relay (a `connect` is refused, a live session keeps its grant until ' +
          '`expires`). docs/credentials.md, "Sessions".',
        tags: ['relays'],
        body: SESSION_EVENT,
        response: {
          200: GRANT,
          204: noContent('`end` recorded.'),
          403: errorResponse(
            "Refused, with the reason: another relay's `node`, no or an invalid credential, over the cap, a relay the " +
              'credential may not use, an ended session or a revoked credential.',
          ),
          404: errorResponse('`end` or `revalidate` of a session never admitted here.'),
        },
      },
    },
    async (request, reply) => {
      const relay = required(request.relay ?? undefined, 'relay');
      const body = request.body;
      if (body.node !== relay.id) {
        throw new AppError('forbidden', `node ${body.node} is not this relay: its id is ${relay.id}`);
      }
      if (body.event === 'end' && (body.reason === undefined || body.duration === undefined || !body.bytes)) {
        throw new AppError('invalid_request', 'an end must carry reason, duration and bytes');
      }
      const credential = credentialOf(body.query, body.token);
      if (!credential.ok) throw new AppError('forbidden', credential.reason);
      let tenantId = '';
      let policy: Awaited<ReturnType<typeof entitlements.get>>['policy'] | undefined;
      if (body.event === 'connect' && credential.token) {
        tenantId = claimedTenant(credential.token) ?? '';
        if (!tenantId) throw new AppError('forbidden', 'invalid, expired or revoked credential');
        policy = (entitlements.peek(tenantId) ?? (await entitlements.get(tenantId))).policy;
      }
      const res = await clients.issuer.decideRelaySession({
        relayId: relay.id,
        id: body.id,
        event: body.event,
        node: body.node,
        transport: relayTransport(body.transport),
        remote: body.remote ?? '',
        path: body.path,
        token: credential.token ?? '',
        role: body.role ?? '',
        reason: body.reason ?? '',
        durationSeconds: body.duration ?? 0,
        bytesSent: BigInt(body.bytes?.sent ?? 0),
        bytesReceived: BigInt(body.bytes?.received ?? 0),
        policy,
        policyTenantId: tenantId,
      });
      if (body.event === 'end') return reply.code(204).send();
      return presentGrant(res.grant);
    },
  );

  app.post(
    '/admin/v1/sessions/:session_id/end',
    {
      onRequest: guards.allow('credentials:revoke'),
      schema: {
        operationId: 'endRelaySession',
        summary: 'End a live relay session',
        description:
          "The session's next revalidation is refused, so its relay closes it within one cadence " +
          '(`RELAYPLANE_RELAY_SESSION_REVALIDATE_SECONDS`, 15 s by default); its slot is freed at once. Audited ' +
          '(`relay_session.end`). Ending an ended session answers it again and changes nothing.',
        tags: ['relays'],
        params: pathParams('session_id'),
        response: {
          200: SESSION,
          404: errorResponse('No relay session has this id in the active tenant.'),
        },
      },
    },
    async (request) => {
      const res = await clients.issuer.endRelaySession({
        tenantId: principalOf(request).tenantId,
        sessionId: request.params.session_id,
      });
      return presentSession(required(res.session, 'endRelaySession.session'));
    },
  );

  app.get(
    '/admin/v1/projects/:project_id/sessions',
    {
      onRequest: guards.allow('api_keys:read'),
      schema: {
        operationId: 'listRelaySessions',
        summary: "The project's relay sessions",
        description: `Newest first; \`state\`: \`live\` (not ended) or \`ended\`; neither: both. No credential values. ${PAGING}`,
        tags: ['relays'],
        params: pathParams('project_id'),
        querystring: pageQuery({ state: Type.Optional(oneOf(['live', 'ended'])) }),
        response: {
          200: pageOf('sessions', SESSION),
          400: PAGE_BAD_REQUEST,
          404: errorResponse('No such project.'),
        },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      const res = await listProjectRelaySessions(clients, {
        principal,
        tenantId: principal.tenantId,
        projectId: request.params.project_id,
        state: request.query.state ?? '',
        ...pageParams(request.query),
      });
      return { sessions: res.sessions.map(presentSession), next_cursor: res.nextCursor || null };
    },
  );
}

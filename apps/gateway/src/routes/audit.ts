import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import {
  AUDIT_ACTOR_TYPES,
  AUDIT_LIST_LIMIT,
  AUDIT_OUTCOMES,
  DEFAULT_AUDIT_RETENTION_DAYS,
} from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import type { AuditCheckpoint, AuditEvent } from '@relayplane/proto/admin';
import { principalOf } from '../plugins/auth.ts';
import { iso, oneOfValues, parseRfc3339, required } from '../present.ts';
import { dateTime, errorResponse, nullable, object, oneOf, type Static, Type } from '../schemas.ts';
import type { Api, RouteDeps } from './deps.ts';

const nullableString = nullable(Type.String());

const AUDIT_EVENT = object({
  id: Type.String({ description: 'A UUIDv7 (time-ordered).' }),
  occurred_at: dateTime(),
  tenant_id: nullable(Type.String({ description: 'Null: an event tied to no tenant (platform chain).' })),
  actor: object({
    type: oneOf([...AUDIT_ACTOR_TYPES]),
    id: Type.String({
      description: 'A user, bot or identity token id; the job for `system`; empty for `anonymous`.',
    }),
  }),
  action: Type.String({ description: '`<resource>.<verb>`; docs/audit.md lists every action.' }),
  target: object({ type: Type.String(), id: Type.String() }),
  outcome: oneOf([...AUDIT_OUTCOMES]),
  ip: nullableString,
  user_agent: nullableString,
  request_id: nullableString,
  details: Type.Unsafe<Record<string, unknown>>({
    type: 'object',
    additionalProperties: true,
    description: 'What the action changed (docs/audit.md, per action). Never a secret.',
  }),
  seq: Type.Integer({ minimum: 1, description: "Its position in the tenant's chain." }),
  hash: Type.String({
    pattern: '^[0-9a-f]{64}$',
    description: 'SHA-256 of its canonical form (docs/audit.md).',
  }),
  prev_hash: Type.String({ pattern: '^[0-9a-f]{64}$', description: 'The `hash` of the event before it.' }),
});

const CHECKPOINT = object({
  tenant_id: nullable(Type.String({ description: 'Null: the platform chain.' })),
  seq: Type.Integer({ minimum: 1 }),
  hash: Type.String({ pattern: '^[0-9a-f]{64}$' }),
  at: dateTime({ description: 'When it was signed.' }),
  kid: Type.String({ description: 'The audit key that signed it (`GET /v1/audit/keys`).' }),
  jws: Type.String({
    description:
      'Compact JWS (`alg: EdDSA`, `typ: relayplane-audit-checkpoint+jws`) over the JSON `{"tenant_id", "seq", ' +
      '"hash", "at"}`: verify it with any JOSE library against `GET /v1/audit/keys`.',
  }),
});

/** A `since`/`until` query value: RFC 3339 with a zone and a real date, else 400 naming the parameter. */
function instant(name: string, value: string | undefined) {
  if (value === undefined) return undefined;
  const ms = parseRfc3339(value);
  if (ms === undefined) {
    throw new AppError('invalid_request', `${name} must be an RFC 3339 date-time, e.g. 2026-11-25T12:00:00Z`);
  }
  return timestampFromDate(new Date(ms));
}

function presentAuditEvent(e: AuditEvent): Static<typeof AUDIT_EVENT> {
  let details: unknown;
  try {
    details = JSON.parse(e.detailsJson || '{}');
  } catch {
    throw new AppError('internal', 'audit event details are not JSON');
  }
  if (typeof details !== 'object' || details === null || Array.isArray(details)) {
    throw new AppError('internal', 'audit event details are not a JSON object');
  }
  const actor = required(e.actor, 'audit event actor');
  const target = required(e.target, 'audit event target');
  return {
    id: e.id,
    occurred_at: required(iso(e.occurredAt), 'audit event occurred_at'),
    tenant_id: e.tenantId || null,
    actor: { type: oneOfValues(AUDIT_ACTOR_TYPES, actor.type, 'audit event actor.type'), id: actor.id },
    action: e.action,
    target: { type: target.type, id: target.id },
    outcome: oneOfValues(AUDIT_OUTCOMES, e.outcome, 'audit event outcome'),
    ip: e.ip || null,
    user_agent: e.userAgent || null,
    request_id: e.requestId || null,
    details: details as Record<string, unknown>,
    seq: Number(e.seq),
    hash: e.hash,
    prev_hash: e.prevHash,
  };
}

function presentCheckpoint(c: AuditCheckpoint): Static<typeof CHECKPOINT> {
  return {
    tenant_id: c.tenantId || null,
    seq: Number(c.seq),
    hash: c.hash,
    at: required(iso(c.at), 'checkpoint at'),
    kid: c.kid,
    jws: c.jws,
  };
}

/** The audit key as a JWKS. */
const AUDIT_KEYS = object({
  keys: Type.Array(
    object({
      kty: Type.Literal('OKP'),
      crv: Type.Literal('Ed25519'),
      x: Type.String(),
      kid: Type.String(),
      alg: Type.Literal('EdDSA'),
      use: Type.Literal('sig'),
    }),
  ),
});

const TENANT_ID = Type.String({
  maxLength: 64,
  description:
    'Platform administrators only: the tenant whose trail to read (`platform`: the events tied to no tenant, ' +
    'such as a failed login for an unknown email). Anyone else naming another tenant: 403.',
});

export function registerAudit(app: Api, { clients, guards }: RouteDeps): void {
  app.get(
    '/admin/v1/audit-events',
    {
      onRequest: guards.allow('audit:read'),
      schema: {
        operationId: 'listAuditEvents',
        summary: "List the tenant's audit events",
        description:
          'Every state change made through the API and every login, logout and session revocation leaves an event ' +
          '(docs/audit.md lists the actions, their targets and details). Newest first (by position in the ' +
          "tenant's chain). Filters: `action` (e.g. `api_key.revoke`), `actor_id`, `target_id` (exact), `since` " +
          '(inclusive) and `until` (exclusive), both RFC 3339. `limit` 1..' +
          `${AUDIT_LIST_LIMIT.max} (default ${AUDIT_LIST_LIMIT.default}); pass \`next_cursor\` as \`cursor\` for the ` +
          'next page (`null`: the last page). An event is listed as soon as its change commits (events of the issuer ' +
          'and billing: once delivered, within about a second). Events older than `RELAYPLANE_AUDIT_RETENTION_DAYS` ' +
          `(default ${DEFAULT_AUDIT_RETENTION_DAYS}) are pruned. Permission \`audit:read\` (owners and admins).`,
        tags: ['audit'],
        querystring: object({
          action: Type.Optional(Type.String({ maxLength: 81 })),
          actor_id: Type.Optional(Type.String({ maxLength: 128 })),
          target_id: Type.Optional(Type.String({ maxLength: 128 })),
          since: Type.Optional(Type.String({ maxLength: 64, description: 'RFC 3339.' })),
          until: Type.Optional(Type.String({ maxLength: 64, description: 'RFC 3339.' })),
          limit: Type.Optional(
            Type.String({ pattern: '^[0-9]{1,6}$', description: `1..${AUDIT_LIST_LIMIT.max}` }),
          ),
          cursor: Type.Optional(Type.String({ maxLength: 256 })),
          tenant_id: Type.Optional(TENANT_ID),
        }),
        response: {
          200: object({
            events: Type.Array(AUDIT_EVENT),
            next_cursor: nullable(Type.String({ description: 'Null on the last page.' })),
          }),
          400: errorResponse(
            `A malformed query parameter: \`limit\` outside 1..${AUDIT_LIST_LIMIT.max}, \`since\`/\`until\` not ` +
              'RFC 3339 (or an impossible date such as 2026-02-31) or `since` after `until`, or a `cursor` this API did not return.',
          ),
        },
      },
    },
    async (request) => {
      const q = request.query;
      const limit = q.limit === undefined ? 0 : Number(q.limit);
      if (q.limit !== undefined && (limit < 1 || limit > AUDIT_LIST_LIMIT.max)) {
        throw new AppError('invalid_request', `limit must be between 1 and ${AUDIT_LIST_LIMIT.max}`);
      }
      const since = instant('since', q.since);
      const until = instant('until', q.until);
      const res = await clients.admin.listAuditEvents({
        principal: principalOf(request),
        tenantId: q.tenant_id ?? '',
        action: q.action ?? '',
        actorId: q.actor_id ?? '',
        targetId: q.target_id ?? '',
        ...(since ? { since } : {}),
        ...(until ? { until } : {}),
        limit,
        cursor: q.cursor ?? '',
      });
      return { events: res.events.map(presentAuditEvent), next_cursor: res.nextCursor || null };
    },
  );

  app.get(
    '/admin/v1/audit-events/verify',
    {
      onRequest: guards.allow('audit:read'),
      schema: {
        operationId: 'verifyAuditEvents',
        summary: "Verify the tenant's audit chain",
        description:
          "Recomputes the SHA-256 of every stored event of the tenant's chain and checks that each names the " +
          'previous one (docs/audit.md, "The chain"), from the anchor pruning left; then checks the latest signed ' +
          'checkpoint (its signature by the audit key, and that the chain holds its hash at its `seq`: ' +
          '`checkpoint_seq`, `checkpoint_ok`) and the pruning anchor against the `audit.prune` event that moved it ' +
          '(`anchor_ok`). `ok: false` when any does not hold: `first_bad_id` is the first event that does not hold ' +
          '(when the newest events were removed, the last one remaining; null when none remains or only the ' +
          'checkpoint or anchor failed) and `first_bad_seq` the first position found bad. `events_checked` counts ' +
          'the events read up to and including that one. A chain rewritten with recomputed hashes passes the ' +
          'recomputation but not the checkpoint; verify against checkpoints you saved yourself with ' +
          '`relayplane audit verify --checkpoints <file>`. Permission `audit:read`.',
        tags: ['audit'],
        querystring: object({ tenant_id: Type.Optional(TENANT_ID) }),
        response: {
          200: object({
            ok: Type.Boolean(),
            events_checked: Type.Integer(),
            first_bad_id: nullableString,
            first_bad_seq: nullable(
              Type.Integer({ description: 'The first position found bad; null when ok.' }),
            ),
            checkpoint_seq: nullable(
              Type.Integer({ description: 'The latest checkpoint checked; null: none yet.' }),
            ),
            checkpoint_ok: Type.Boolean(),
            anchor_ok: Type.Boolean(),
          }),
        },
      },
    },
    async (request) => {
      const res = await clients.admin.verifyAuditEvents({
        principal: principalOf(request),
        tenantId: request.query.tenant_id ?? '',
      });
      return {
        ok: res.ok,
        events_checked: Number(res.eventsChecked),
        first_bad_id: res.firstBadId || null,
        first_bad_seq: res.firstBadSeq > 0n ? Number(res.firstBadSeq) : null,
        checkpoint_seq: res.checkpointSeq > 0n ? Number(res.checkpointSeq) : null,
        checkpoint_ok: res.checkpointOk,
        anchor_ok: res.anchorOk,
      };
    },
  );

  app.get(
    '/admin/v1/audit-events/checkpoints',
    {
      onRequest: guards.allow('audit:read'),
      schema: {
        operationId: 'listAuditCheckpoints',
        summary: "The tenant's signed audit checkpoints",
        description:
          "Signed checkpoints of the tenant's chain head `{tenant_id, seq, hash, at}`, newest first: one each time " +
          'the head moved, every `RELAYPLANE_AUDIT_CHECKPOINT_SECONDS` (default 300), and on demand (POST). Each is ' +
          'a JWS by the audit key, which is kept out of the database (`GET /v1/audit/keys`). Save them outside ' +
          'Relayplane (`relayplane audit checkpoints --json > file`) and check the live chain against them later ' +
          '(`relayplane audit verify --checkpoints file`). `limit` 1..' +
          `${AUDIT_LIST_LIMIT.max} (default ${AUDIT_LIST_LIMIT.default}); \`next_cursor\` pages. Permission \`audit:read\`.`,
        tags: ['audit'],
        querystring: object({
          limit: Type.Optional(
            Type.String({ pattern: '^[0-9]{1,6}$', description: `1..${AUDIT_LIST_LIMIT.max}` }),
          ),
          cursor: Type.Optional(Type.String({ maxLength: 256 })),
          tenant_id: Type.Optional(TENANT_ID),
        }),
        response: {
          200: object({
            checkpoints: Type.Array(CHECKPOINT),
            next_cursor: nullable(Type.String({ description: 'Null on the last page.' })),
          }),
          400: errorResponse(
            `\`limit\` outside 1..${AUDIT_LIST_LIMIT.max}, or a \`cursor\` this API did not return.`,
          ),
        },
      },
    },
    async (request) => {
      const q = request.query;
      const limit = q.limit === undefined ? 0 : Number(q.limit);
      if (q.limit !== undefined && (limit < 1 || limit > AUDIT_LIST_LIMIT.max)) {
        throw new AppError('invalid_request', `limit must be between 1 and ${AUDIT_LIST_LIMIT.max}`);
      }
      const res = await clients.admin.listAuditCheckpoints({
        principal: principalOf(request),
        tenantId: q.tenant_id ?? '',
        limit,
        cursor: q.cursor ?? '',
      });
      return { checkpoints: res.checkpoints.map(presentCheckpoint), next_cursor: res.nextCursor || null };
    },
  );

  app.post(
    '/admin/v1/audit-events/checkpoints',
    {
      onRequest: guards.allow('audit:read'),
      schema: {
        operationId: 'createAuditCheckpoint',
        summary: "Sign the tenant's audit chain head now",
        description:
          'A checkpoint of the head as it is now (or the latest one, when the head has not moved since): what a ' +
          'tenant about to save its checkpoints asks for first. `checkpoint` is null while the chain is empty. ' +
          'Permission `audit:read`.',
        tags: ['audit'],
        querystring: object({ tenant_id: Type.Optional(TENANT_ID) }),
        response: { 200: object({ checkpoint: Type.Union([CHECKPOINT, Type.Null()]) }) },
      },
    },
    async (request) => {
      const res = await clients.admin.createAuditCheckpoint({
        principal: principalOf(request),
        tenantId: request.query.tenant_id ?? '',
      });
      return { checkpoint: res.checkpoint ? presentCheckpoint(res.checkpoint) : null };
    },
  );

  app.get(
    '/v1/audit/keys',
    {
      schema: {
        operationId: 'getAuditKeys',
        summary: 'The public key of audit checkpoints (JWKS)',
        description:
          'The Ed25519 key audit checkpoints are signed with, as a JWKS (`kid`: RFC 7638 thumbprint). Public: a ' +
          'tenant, an auditor or a witness checks checkpoints with it, outside Relayplane. `Cache-Control: public, ' +
          'max-age=300`.',
        tags: ['audit'],
        security: [],
        response: {
          200: AUDIT_KEYS,
        },
      },
    },
    async (_request, reply) => {
      const res = await clients.admin.getAuditKeys({});
      reply.header('cache-control', 'public, max-age=300');
      // Admin's own JWKS document; the response schema sends exactly its declared fields.
      return JSON.parse(res.jwksJson) as Static<typeof AUDIT_KEYS>;
    },
  );
}

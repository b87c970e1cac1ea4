import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import {
  AUDIT_DELIVERY_MAX_SKEW_SECONDS,
  AUDIT_LIST_LIMIT,
  AUDIT_SOURCE_ACTIONS,
  AUDIT_SOURCES,
  type AuditSource,
  NOTICE_SOURCE_TYPES,
} from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import type { AdminService, AuditEventSchema, Principal } from '@relayplane/proto/admin';
import { currentRequestContext } from '@relayplane/shared/request-context';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { canonicalJson, chainKeyOf, PLATFORM_CHAIN } from '../audit/canonical.ts';
import type { StoredCheckpoint } from '../audit/checkpoints.ts';
import { deliveredEvent } from '../audit/delivered-event.ts';
import type { StoredAuditEvent } from '../audit/trail.ts';
import type { AuditDeliveryRefusal } from '../metrics.ts';
import type { AdminDeps } from './deps.ts';
import { requireActor } from './principal.ts';

type Impl = ServiceImpl<typeof AdminService>;

/** `tenant_id` a platform admin passes for the events tied to no tenant (the platform chain). */
export const PLATFORM_TENANT_FILTER = 'platform';
export const OTHER_TENANT_MESSAGE = 'only platform admins may read another tenant’s audit events';
const MAX_FILTER_LENGTH = 128;
/** At most this many events per RecordAuditEvents call. */
export const MAX_RECORD_BATCH = 500;

/** The chain a caller with `audit:read` reads: its own tenant's, or (platform admins) the one it names. */
async function requireChain(deps: AdminDeps, principal: Principal | undefined, tenantId: string) {
  const actor = await requireActor(deps, principal, 'audit:read');
  if (tenantId === '' || tenantId === actor.tenantId) return chainKeyOf(actor.tenantId);
  if (!actor.session?.user.platformAdmin) throw new AppError('forbidden', OTHER_TENANT_MESSAGE);
  return tenantId === PLATFORM_TENANT_FILTER ? PLATFORM_CHAIN : chainKeyOf(tenantId);
}

/** The opaque cursor: the position (seq) of the last event answered, base64url JSON. */
export function encodeCursor(seq: number): string {
  return Buffer.from(JSON.stringify({ s: seq })).toString('base64url');
}

function decodeCursor(cursor: string): number {
  try {
    const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { s?: unknown };
    if (typeof parsed.s === 'number' && Number.isSafeInteger(parsed.s) && parsed.s > 0) return parsed.s;
  } catch {
    // answered below
  }
  throw new AppError('invalid_request', 'cursor is not a cursor this endpoint answered');
}

function filter(name: string, value: string): string | undefined {
  if (value === '') return undefined;
  if (value.length > MAX_FILTER_LENGTH) {
    throw new AppError('invalid_request', `${name} must be at most ${MAX_FILTER_LENGTH} characters`);
  }
  return value;
}

export function auditEventMessage(event: StoredAuditEvent): MessageInitShape<typeof AuditEventSchema> {
  return {
    id: event.id,
    occurredAt: timestampFromDate(event.occurredAt),
    tenantId: event.tenantId ?? '',
    actor: event.actor,
    action: event.action,
    target: event.target,
    outcome: event.outcome,
    ip: event.ip ?? '',
    userAgent: event.userAgent ?? '',
    requestId: event.requestId ?? '',
    detailsJson: canonicalJson(event.details),
    seq: BigInt(event.seq),
    hash: event.hash,
    prevHash: event.prevHash,
  };
}

/** ListAuditEvents: newest first (by position in the chain), filtered, paged by an opaque cursor. */
export function listAuditEvents(deps: AdminDeps): Impl['listAuditEvents'] {
  return async (req) => {
    const chainKey = await requireChain(deps, req.principal, req.tenantId);
    const limit = req.limit === 0 ? AUDIT_LIST_LIMIT.default : req.limit;
    if (limit > AUDIT_LIST_LIMIT.max) {
      throw new AppError('invalid_request', `limit must be between 1 and ${AUDIT_LIST_LIMIT.max}`);
    }
    const since = req.since ? timestampDate(req.since) : undefined;
    const until = req.until ? timestampDate(req.until) : undefined;
    if (since && until && since.getTime() > until.getTime()) {
      throw new AppError('invalid_request', 'since must not be after until');
    }
    const events = await deps.audit.list({
      chainKey,
      action: filter('action', req.action),
      actorId: filter('actor_id', req.actorId),
      targetId: filter('target_id', req.targetId),
      since,
      until,
      limit: limit + 1,
      beforeSeq: req.cursor === '' ? undefined : decodeCursor(req.cursor),
    });
    const page = events.slice(0, limit);
    const last = page.at(-1);
    return {
      events: page.map(auditEventMessage),
      nextCursor: events.length > limit && last ? encodeCursor(last.seq) : '',
    };
  };
}

/**
 * VerifyAuditEvents: recomputes every hash and link of the chain, then checks the latest signed
 * checkpoint against it and the pruning anchor against its `audit.prune` event (docs/audit.md).
 */
export function verifyAuditEvents(deps: AdminDeps): Impl['verifyAuditEvents'] {
  return async (req) => {
    const chainKey = await requireChain(deps, req.principal, req.tenantId);
    const result = await deps.audit.verify(chainKey);
    const anchors = await deps.checkpoints.check(chainKey);
    const firstBadSeq = result.firstBadId
      ? Math.min(...[result.firstBadSeq ?? 0, anchors.firstBadSeq].filter((s) => s > 0))
      : anchors.firstBadSeq;
    return {
      ok: result.ok && anchors.checkpointOk && anchors.anchorOk,
      eventsChecked: BigInt(result.eventsChecked),
      firstBadId: result.firstBadId ?? '',
      checkpointSeq: BigInt(anchors.checkpointSeq),
      checkpointOk: anchors.checkpointOk,
      anchorOk: anchors.anchorOk,
      firstBadSeq: BigInt(Number.isFinite(firstBadSeq) ? firstBadSeq : 0),
    };
  };
}

function checkpointMessage(cp: StoredCheckpoint) {
  return {
    tenantId: cp.tenantId ?? '',
    seq: BigInt(cp.seq),
    hash: cp.hash,
    at: timestampFromDate(cp.at),
    kid: cp.kid,
    jws: cp.jws,
  };
}

/** ListAuditCheckpoints: the chain's signed checkpoints, newest first, cursor-paged. */
export function listAuditCheckpoints(deps: AdminDeps): Impl['listAuditCheckpoints'] {
  return async (req) => {
    const chainKey = await requireChain(deps, req.principal, req.tenantId);
    const limit = req.limit === 0 ? AUDIT_LIST_LIMIT.default : req.limit;
    if (limit > AUDIT_LIST_LIMIT.max) {
      throw new AppError('invalid_request', `limit must be between 1 and ${AUDIT_LIST_LIMIT.max}`);
    }
    const rows = await deps.checkpoints.list(
      chainKey,
      limit + 1,
      req.cursor === '' ? undefined : decodeCursor(req.cursor),
    );
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    return {
      checkpoints: page.map(checkpointMessage),
      nextCursor: rows.length > limit && last ? encodeCursor(last.seq) : '',
    };
  };
}

/** CreateAuditCheckpoint: signs the chain's head now (or answers the latest, when it has not moved). */
export function createAuditCheckpoint(deps: AdminDeps): Impl['createAuditCheckpoint'] {
  return async (req) => {
    const chainKey = await requireChain(deps, req.principal, req.tenantId);
    const cp = await deps.checkpoints.checkpoint(chainKey, deps.clock.now());
    return cp ? { checkpoint: checkpointMessage(cp) } : {};
  };
}

/** GetAuditKeys: the public half of the audit key, as a JWKS (no secret: anyone may read it). */
export function getAuditKeys(deps: AdminDeps): Impl['getAuditKeys'] {
  return async () => ({ jwksJson: JSON.stringify({ keys: [deps.checkpoints.key.jwk()] }) });
}

/**
 * RecordAuditEvents: issuer and billing deliver their outboxes' events, at least once. An id
 * already recorded is a duplicate (counted, not an error). Events are appended in the order
 * given, each in its own transaction: a failure leaves the earlier ones recorded, and the
 * sender's retry skips them as duplicates.
 *
 * Who delivers is the peer, not the request (issue 31): the SPIFFE app of its mutual-TLS
 * certificate, or the in-process caller the composition root named (request context
 * `peerApp`); a `source` in the request that differs is refused. Over plaintext there is no
 * peer identity and the declared source stands (docs/audit.md: plaintext links authenticate
 * nothing). Each source may record its own actions only (`AUDIT_SOURCE_ACTIONS`), with an
 * `occurred_at` within 5 minutes of admin's clock. A refusal refuses the whole call before any
 * event is appended (nothing reaches a chain), and is logged at warn and counted
 * (`relayplane_audit_delivery_refused_total`).
 */
export function recordAuditEvents(deps: AdminDeps): Impl['recordAuditEvents'] {
  return async (req) => {
    const peer = currentRequestContext()?.peerApp;
    const refuse = (reason: AuditDeliveryRefusal, message: string, extra: Record<string, unknown> = {}) => {
      deps.metrics?.auditRefused(peer ?? req.source, reason);
      deps.logger.warn(
        { peer: peer ?? 'unauthenticated', declaredSource: req.source, reason, ...extra },
        'audit delivery refused',
      );
      return new AppError(reason === 'unknown_peer' ? 'forbidden' : 'invalid_request', message);
    };
    let source: AuditSource;
    if (peer !== undefined) {
      if (!isAuditSource(peer)) throw refuse('unknown_peer', `${peer} does not deliver audit events`);
      if (req.source !== '' && req.source !== peer) {
        throw refuse('source_mismatch', `the caller is ${peer}, not ${req.source}`);
      }
      source = peer;
    } else {
      if (!isAuditSource(req.source)) {
        throw new AppError('invalid_request', `source must be one of ${AUDIT_SOURCES.join(', ')}`);
      }
      source = req.source;
    }
    if (req.events.length > MAX_RECORD_BATCH) {
      throw new AppError('invalid_request', `at most ${MAX_RECORD_BATCH} events per call`);
    }
    // Notices (issue 34) travel the same outbox: webhook facts, never appended to the trail.
    const notices: readonly string[] = NOTICE_SOURCE_TYPES[source];
    const allowed: readonly string[] = [...AUDIT_SOURCE_ACTIONS[source], ...notices];
    const now = deps.clock.now().getTime();
    for (const event of req.events) {
      if (!allowed.includes(event.action)) {
        throw refuse(
          'action_not_allowed',
          `${source} may not record ${event.action || 'an event without an action'}`,
          {
            eventId: event.id,
            action: event.action,
          },
        );
      }
      const at = event.occurredAt ? timestampDate(event.occurredAt).getTime() : Number.NaN;
      if (!(Math.abs(at - now) <= AUDIT_DELIVERY_MAX_SKEW_SECONDS * 1000)) {
        throw refuse(
          'stale',
          `occurred_at must be within ${AUDIT_DELIVERY_MAX_SKEW_SECONDS} seconds of now (event ${event.id})`,
          { eventId: event.id, action: event.action },
        );
      }
    }
    let recorded = 0;
    let duplicates = 0;
    for (const event of req.events) {
      const outcome = notices.includes(event.action)
        ? await deps.webhooks.recordNotice(deliveredEvent(event))
        : await deps.audit.recordDelivered(source, event);
      if (outcome === 'recorded') recorded += 1;
      else duplicates += 1;
    }
    return { recorded, duplicates };
  };
}

function isAuditSource(value: string): value is AuditSource {
  return (AUDIT_SOURCES as readonly string[]).includes(value);
}

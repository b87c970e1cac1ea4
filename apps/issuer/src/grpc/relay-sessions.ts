import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { AppError } from '@relayplane/contract/errors';
import { isId } from '@relayplane/contract/ids';
import type { IssuerService, RelaySessionSchema } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { decodeCursor, encodeCursor, instantOf, pageLimit } from '../common/list-paging.ts';
import type { RelaySessionRow } from '../sessions/session-store.ts';
import type { IssuerDeps } from './deps.ts';

type Impl = ServiceImpl<typeof IssuerService>;

/** DecideRelaySession: a relay's connect, revalidate or end (refusals are `forbidden`). */
export function decideRelaySession({ sessions }: Pick<IssuerDeps, 'sessions'>): Impl['decideRelaySession'] {
  return async (req) => {
    const grant = await sessions.decide({
      relayId: req.relayId,
      id: req.id,
      event: req.event,
      transport: req.transport,
      remote: req.remote,
      path: req.path,
      token: req.token,
      role: req.role,
      reason: req.reason,
      durationSeconds: req.durationSeconds,
      bytesSent: Number(req.bytesSent),
      bytesReceived: Number(req.bytesReceived),
      policy: req.policy,
      policyTenantId: req.policyTenantId,
    });
    if (!grant) return {};
    return {
      grant: {
        publish: grant.publish ?? [],
        subscribe: grant.subscribe ?? [],
        root: grant.root ?? '',
        expires: BigInt(grant.expires ?? 0),
        revalidateSeconds: grant.revalidate ?? 0,
        tier: grant.tier ?? '',
      },
    };
  };
}

/** EndRelaySession: the control plane ends a live session of the tenant. */
export function endRelaySession({ sessions }: Pick<IssuerDeps, 'sessions'>): Impl['endRelaySession'] {
  return async (req) => {
    if (!isId('tenant', req.tenantId)) throw new AppError('invalid_request', 'tenant_id must be a tenant id');
    return { session: sessionMessage(await sessions.endByAdmin(req.tenantId, req.sessionId)) };
  };
}

/** ListRelaySessions: a project's sessions, newest first, `limit` 1..200 (0: 50), opaque cursor. */
export function listRelaySessions({
  sessionStore,
}: Pick<IssuerDeps, 'sessionStore'>): Impl['listRelaySessions'] {
  return async (req) => {
    if (!isId('tenant', req.tenantId)) throw new AppError('invalid_request', 'tenant_id must be a tenant id');
    if (!['live', 'ended', ''].includes(req.state))
      throw new AppError('invalid_request', 'state must be live or ended');
    const limit = pageLimit(req.limit);
    const after = req.cursor
      ? decodeCursor(req.cursor, (v) => {
          if (!Array.isArray(v) || v.length !== 2 || typeof v[1] !== 'string') return undefined;
          const startedAt = instantOf(v[0]);
          return startedAt ? { startedAt, id: v[1] } : undefined;
        })
      : undefined;
    const rows = await sessionStore.list({
      tenantId: req.tenantId,
      projectId: req.projectId,
      state: req.state as 'live' | 'ended' | '',
      limit: limit + 1,
      ...(after ? { after } : {}),
    });
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    return {
      sessions: page.map(sessionMessage),
      nextCursor: rows.length > limit && last ? encodeCursor([last.started_at.getTime(), last.id]) : '',
    };
  };
}

function sessionMessage(row: RelaySessionRow): MessageInitShape<typeof RelaySessionSchema> {
  return {
    id: row.id,
    relayId: row.relay_id,
    tenantId: row.tenant_id,
    projectId: row.project_id,
    jti: row.jti,
    transport: row.transport,
    remote: row.remote,
    role: row.role,
    startedAt: timestampFromDate(row.started_at),
    ...(row.ended_at ? { endedAt: timestampFromDate(row.ended_at) } : {}),
    reason: row.end_reason ?? '',
    bytesSent: BigInt(row.bytes_sent),
    bytesReceived: BigInt(row.bytes_received),
    durationSeconds: row.duration_seconds ?? 0,
    lastSeenAt: timestampFromDate(row.last_seen_at),
  };
}

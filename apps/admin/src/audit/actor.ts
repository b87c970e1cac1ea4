import { PrincipalKind } from '@relayplane/proto/admin';
import type { Actor } from '../grpc/principal.ts';
import type { SessionRecord } from '../stores/records.ts';
import type { AuditActorRef } from './trail.ts';

/** The audit actor of a user session: `cli` for a CLI token (device flow), else `user`; the id is the user's. */
export function sessionActor(session: SessionRecord): AuditActorRef {
  return { type: session.kind === 'cli' ? 'cli' : 'user', id: session.user.id };
}

/** The audit actor of a principal admin re-read (principal.ts). */
export function auditActor(actor: Actor): AuditActorRef {
  if (actor.session) return sessionActor(actor.session);
  if (actor.kind === PrincipalKind.IDENTITY && actor.identityTokenId) {
    return { type: 'identity_token', id: actor.identityTokenId };
  }
  if (actor.botId) return { type: 'bot', id: actor.botId };
  return { type: 'anonymous', id: '' };
}

/** Scheduled work and start-up jobs: `system`, named by the job. */
export function systemActor(job: string): AuditActorRef {
  return { type: 'system', id: job };
}

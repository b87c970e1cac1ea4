/**
 * Relay sessions (docs/credentials.md, "Sessions"): the decisions behind `POST /v1/relays/auth`.
 *
 * - **connect**: the credential verified as for introspection (signature against the live keys,
 *   `exp`/`nbf`, revoked jti, project watermark, revoked signing key), the relay one the
 *   credential may use, a slot under the tenant's cap, then the session recorded and granted.
 *   The credential's own slot (held since issuance for the connect window) passes to the
 *   session, so a credential's first session costs nothing more, and a second parallel session
 *   of the same credential needs a slot of its own.
 * - **revalidate**: refused once the session was ended or its credential revoked (by jti, API
 *   key, project watermark or signing key), else the grant again with a later `expires` and the
 *   session's slot renewed, whatever the cap (a plan lowered below the live count refuses new
 *   connects, not live sessions).
 * - **end**: recorded with the relay's reason, duration and bytes; the slot is freed at once.
 *
 * A relay that dies sends no `end`: its sessions' slots lapse two cadences after their last
 * revalidation (the lease's lifetime), and the ledger no longer counts them either.
 */
import { authorizePath, claimedPaths } from '@relayplane/contract/credential-paths';
import { AppError } from '@relayplane/contract/errors';
import { grantProblem, grantRoot, type RelayGrant } from '@relayplane/contract/relay-auth';
import type { IssuancePolicy } from '@relayplane/proto/issuer';
import type { AuditRecorder } from '@relayplane/shared/audit-outbox';
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import type { RelaySessionsConfig } from '../config.ts';
import type { Introspection } from '../issuance/introspection.ts';
import type { SlotStore } from '../issuance/slot-store.ts';
import type { CredentialClaims } from '../keys/jwt.ts';
import type { RelayView } from '../relays/relay-directory.ts';
import type { Revocations } from '../revocation/revocations.ts';
import type { RefusalReason, RelaySessionMetrics } from './session-metrics.ts';
import { type CapNotices, type RefusalTally, sessionEnded, sessionStarted } from './session-notices.ts';
import { type RelaySessionRow, type RelaySessionStore, sessionLease } from './session-store.ts';

export interface SessionEventInput {
  relayId: string;
  id: string;
  event: string;
  transport: string;
  remote: string;
  path: string;
  token: string;
  role: string;
  reason: string;
  durationSeconds: number;
  bytesSent: number;
  bytesReceived: number;
  policy?: IssuancePolicy | undefined;
  policyTenantId: string;
}

export interface RelaySessionsDeps {
  config: RelaySessionsConfig;
  clock: Clock;
  logger: Logger;
  store: RelaySessionStore;
  introspection: Pick<Introspection, 'verifySigned'>;
  revocations: Pick<Revocations, 'isRevoked'>;
  relays: {
    find(id: string): Promise<RelayView | undefined>;
    assign(region?: string): { relays: RelayView[]; fallback: string[] };
  };
  slots: SlotStore;
  audit: AuditRecorder;
  /** Absent: nothing is counted. */
  metrics?: RelaySessionMetrics;
  /** Webhook notices beyond the ledger's own (refusals, the cap); absent: none. */
  notices?: { refusals: RefusalTally; cap: CapNotices };
}

/** A refusal the relay logs (403 at the gateway): the session is not admitted, or ends. */
export class SessionRefusal extends AppError {
  readonly reason: RefusalReason;
  constructor(reason: RefusalReason, message: string) {
    super('forbidden', message);
    this.reason = reason;
  }
}

export const refuse = (reason: RefusalReason, message: string): SessionRefusal =>
  new SessionRefusal(reason, message);

export const SESSION_ID_PATTERN = /^[0-9a-f]{1,64}$/;

export class RelaySessions {
  readonly #d: RelaySessionsDeps;

  constructor(deps: RelaySessionsDeps) {
    this.#d = deps;
  }

  /** connect and revalidate: the grant; end: undefined. Refusals throw `forbidden`. */
  async decide(input: SessionEventInput): Promise<RelayGrant | undefined> {
    const metrics = this.#d.metrics;
    if (!metrics) return this.#decide(input);
    const started = performance.now();
    try {
      const grant = await this.#decide(input);
      metrics.decided(input.event, 'granted', started);
      return grant;
    } catch (err) {
      metrics.decided(input.event, err instanceof SessionRefusal ? 'refused' : 'error', started);
      if (err instanceof SessionRefusal) metrics.refused(err.reason);
      throw err;
    }
  }

  async #decide(input: SessionEventInput): Promise<RelayGrant | undefined> {
    if (!SESSION_ID_PATTERN.test(input.id))
      throw new AppError('invalid_request', 'id must be the relay session id: hex, at most 64 characters');
    switch (input.event) {
      case 'connect':
        return this.#connect(input);
      case 'revalidate':
        return this.#revalidate(input);
      case 'end':
        await this.#end(input);
        return undefined;
      default:
        throw new AppError('invalid_request', 'event must be connect, revalidate or end');
    }
  }

  async #connect(input: SessionEventInput): Promise<RelayGrant> {
    const existing = await this.#d.store.get(input.id);
    // The same id again (a retry): the same answer, one session.
    if (existing) return this.#grantFor(this.#ownLiveSession(existing, input.relayId));
    if (!input.token)
      throw refuse('no_credential', 'no credential: the session must present jwt=<relay credential>');
    const verified = await this.#d.introspection.verifySigned(input.token);
    if (!verified) throw refuse('invalid_credential', 'invalid, expired or revoked credential');
    const { claims, kid } = verified;
    try {
      return await this.#admit(input, claims, kid);
    } catch (err) {
      // Refusals of a known credential are its project's to hear of (session.refused, counted).
      if (err instanceof SessionRefusal) this.#d.notices?.refusals.count(claims.tid, claims.pid, err.reason);
      throw err;
    }
  }

  /** The checks and the admission of a session whose credential verified. */
  async #admit(input: SessionEventInput, claims: CredentialClaims, kid: string): Promise<RelayGrant> {
    const policy = input.policy;
    if (!policy?.maxConcurrentConnections || input.policyTenantId !== claims.tid) {
      throw new AppError('invalid_request', "the plan of the credential's tenant must come with a connect");
    }
    const relay = await this.#d.relays.find(input.relayId);
    if (!relay) throw refuse('relay', 'the relay is not registered');
    if (!this.#mayUse(claims.rgn, relay))
      throw refuse(
        'relay',
        `a credential for region ${claims.rgn} may not connect to relay ${relay.id} in ${relay.region}`,
      );
    if (!claims.scope.split(' ').includes('relay:session'))
      throw refuse('scope', 'the credential lacks scope relay:session');
    // What the credential's paths (and the scopes' roles) allow at the dialed path, as moq-relay
    // would decide it offline (upstream's Claims::authorize); a role the session does not take is dropped.
    const claimed = claimedPaths(claims);
    if (!claimed) throw refuse('invalid_credential', "the credential's path claims are malformed");
    const root = grantRoot(claims.pid, input.path);
    const allowed = authorizePath(claimed, root);
    if (!allowed.ok) throw refuse('path', allowed.reason);
    const publish = input.role === 'subscriber' ? [] : allowed.publish;
    const subscribe = input.role === 'publisher' ? [] : allowed.subscribe;
    if (publish.length === 0 && subscribe.length === 0)
      throw refuse('scope', `the credential grants nothing to a ${input.role || 'session'} at ${root}`);

    const planCadence = policy.relaySessionRevalidateSeconds;
    if (!Number.isInteger(planCadence) || planCadence < 0 || planCadence > 3_600)
      throw new AppError(
        'invalid_request',
        'policy.relay_session_revalidate_seconds must be 0..3600 seconds',
      );
    const cap = policy.maxConcurrentConnections.value;
    const windowMs = this.#d.config.connectWindowSeconds * 1000;
    // The credential's slot while it holds one (idempotent), else a new one under the cap.
    const slot = await this.#d.slots.reserve(claims.tid, claims.jti, windowMs, cap);
    if (!slot.granted) {
      void this.#d.notices?.cap.reached(claims.tid, cap, 'connect');
      throw refuse(
        'cap',
        policy.maxConcurrentConnections.exceededMessage ||
          `the tenant's concurrent connections are at the plan's limit of ${cap} (max_concurrent_connections)`,
      );
    }
    const now = this.#d.clock.now();
    const lease = sessionLease(input.id);
    // The plan's cadence where its plans file sets one, else this issuer's.
    const cadence = planCadence || this.#d.config.revalidateSeconds;
    const leaseMs = this.#leaseMs(cadence);
    // The session takes the credential's slot over: added whatever the cap, then the credential's released.
    await this.#d.slots.renew(claims.tid, lease, leaseMs);
    let row: RelaySessionRow;
    try {
      row = await this.#d.store.insert(
        {
          id: input.id,
          relayId: relay.id,
          tenantId: claims.tid,
          projectId: claims.pid,
          apiKeyId: claims.akid,
          jti: claims.jti,
          kid,
          credentialIat: claims.iat,
          transport: input.transport,
          remote: input.remote,
          role: input.role,
          path: input.path,
          grantRoot: root,
          grantPublish: publish,
          grantSubscribe: subscribe,
          tier: policy.planId,
          revalidateSeconds: cadence,
          startedAt: now,
          grantExpiresAt: this.#expiresAt(now, cadence),
        },
        (trx, inserted) => this.#d.audit.notice(trx, sessionStarted(inserted)),
      );
    } catch (err) {
      await this.#d.slots.release(claims.tid, lease).catch(() => undefined);
      throw err;
    }
    await this.#d.slots.release(claims.tid, claims.jti);
    this.#d.logger.debug(
      { sessionId: input.id, relayId: relay.id, jti: claims.jti },
      'relay session admitted',
    );
    return this.#grantFor(this.#ownLiveSession(row, input.relayId));
  }

  async #revalidate(input: SessionEventInput): Promise<RelayGrant> {
    const now = this.#d.clock.now();
    // The hot path: one UPDATE … RETURNING renews a live session of this relay whose grant has
    // not lapsed; anything else is looked at again to say why.
    const row = await this.#d.store.renew(input.id, input.relayId, now, this.#d.config.expiresSeconds);
    if (!row) {
      const found = await this.#d.store.get(input.id);
      if (!found) throw refuse('unknown_session', 'unknown session: it was never admitted here');
      this.#ownLiveSession(found, input.relayId);
      throw refuse('expired', "the session's grant expired without a revalidation");
    }
    const revoked = await this.#d.revocations.isRevoked(row.jti, {
      projectId: row.project_id,
      iat: Number(row.credential_iat),
      kid: row.kid,
    });
    if (revoked) {
      await this.#d.store.endOnce(
        row.id,
        { at: now, reason: 'revoked', endedBy: 'revocation' },
        (trx, ended) => this.#d.audit.notice(trx, sessionEnded(ended)),
      );
      this.#d.audit.kick();
      await this.#d.slots.release(row.tenant_id, sessionLease(row.id));
      throw refuse('revoked', "the session's credential was revoked");
    }
    await this.#d.slots.renew(row.tenant_id, sessionLease(row.id), this.#leaseMs(row.revalidate_seconds));
    return this.#grantFor(row);
  }

  async #end(input: SessionEventInput): Promise<void> {
    const row = await this.#d.store.get(input.id);
    if (!row) throw new AppError('not_found', 'unknown session: it was never admitted here');
    if (row.relay_id !== input.relayId) throw refuse('other_relay', 'the session belongs to another relay');
    await this.#d.store.endOnce(
      row.id,
      {
        at: this.#d.clock.now(),
        reason: input.reason || 'ended',
        endedBy: 'relay',
        durationSeconds: Math.max(0, input.durationSeconds),
        bytesSent: input.bytesSent,
        bytesReceived: input.bytesReceived,
      },
      (trx, ended) => this.#d.audit.notice(trx, sessionEnded(ended)),
    );
    this.#d.audit.kick();
    await this.#d.slots.release(row.tenant_id, sessionLease(row.id));
  }

  /** The control plane ends a live session of the tenant: its next revalidation is refused. */
  async endByAdmin(tenantId: string, sessionId: string): Promise<RelaySessionRow> {
    const row = await this.#d.store.endInTenant(
      tenantId,
      sessionId,
      { at: this.#d.clock.now(), reason: 'ended_by_admin', endedBy: 'admin' },
      async (trx) => {
        await this.#d.audit.enqueue(trx, {
          action: 'relay_session.end',
          tenantId,
          target: { type: 'relay_session', id: sessionId },
        });
      },
      (trx, ended) => this.#d.audit.notice(trx, sessionEnded(ended)),
    );
    if (!row) throw new AppError('not_found', 'no relay session has this id in the tenant');
    this.#d.audit.kick();
    await this.#d.slots.release(tenantId, sessionLease(sessionId));
    return (await this.#d.store.get(sessionId)) ?? row;
  }

  /** The row, if it is this relay's and not ended; else the refusal. */
  #ownLiveSession(row: RelaySessionRow, relayId: string): RelaySessionRow {
    if (row.relay_id !== relayId) throw refuse('other_relay', 'the session belongs to another relay');
    if (row.ended_at !== null) throw refuse('ended', `the session was ended (${row.end_reason ?? 'ended'})`);
    return row;
  }

  /**
   * Which relays a credential may use: any, without a region hint; with one, its region's, and
   * any relay assignment would hand its holder as a fallback (docs/credentials.md, Sessions).
   */
  #mayUse(region: string | undefined, relay: RelayView): boolean {
    if (!region || relay.region === region) return true;
    const address = relay.url.replace(/^https:\/\//, '');
    const { relays, fallback } = this.#d.relays.assign(region);
    return relays.some((r) => r.id === relay.id) || fallback.includes(address);
  }

  #grantFor(row: RelaySessionRow): RelayGrant {
    if (row.grant_expires_at.getTime() <= this.#d.clock.now().getTime())
      throw refuse('expired', "the session's grant expired without a revalidation");
    const grant: RelayGrant = {
      ...(row.grant_publish_patterns.length > 0 ? { publish: row.grant_publish_patterns } : {}),
      ...(row.grant_subscribe_patterns.length > 0 ? { subscribe: row.grant_subscribe_patterns } : {}),
      root: row.grant_root,
      expires: Math.floor(row.grant_expires_at.getTime() / 1000),
      revalidate: row.revalidate_seconds,
      tier: row.tier,
    };
    const problem = grantProblem(grant, Math.floor(this.#d.clock.now().getTime() / 1000));
    if (problem)
      throw new AppError('internal', `relay session grant would be refused by the relay: ${problem}`);
    return grant;
  }

  /**
   * A grant lasts RELAYPLANE_RELAY_SESSION_EXPIRES_SECONDS, and at least two cadences (a plan's
   * slow cadence must not let the grant lapse before the relay revalidates it).
   */
  #expiresAt(now: Date, cadence: number): Date {
    return new Date(now.getTime() + Math.max(this.#d.config.expiresSeconds, 2 * cadence) * 1000);
  }

  /** A session's slot lasts two cadences past its last word (the bound for a relay that died). */
  #leaseMs(revalidateSeconds: number): number {
    return 2 * revalidateSeconds * 1000;
  }
}

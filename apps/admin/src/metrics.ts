/** The admin service's own metrics (docs/metrics.md); gRPC call metrics come from the shared RpcServer. */
import { type CounterChild, counter, gauge, type Registry } from '@relayplane/shared/metrics';

const LOGIN_RESULTS = ['success', 'failure', 'throttled'] as const;
export type LoginResult = (typeof LOGIN_RESULTS)[number];

const AUDIT_REFUSALS = ['unknown_peer', 'source_mismatch', 'action_not_allowed', 'stale'] as const;
export type AuditDeliveryRefusal = (typeof AUDIT_REFUSALS)[number];

export interface AdminMetrics {
  /** `relayplane_logins_total{result}`, pre-bound per result. */
  logins: Record<LoginResult, CounterChild>;
  /** `relayplane_audit_delivery_refused_total{source, reason}`: RecordAuditEvents calls refused (issue 31). */
  auditRefused(source: string, reason: AuditDeliveryRefusal): void;
  /** `relayplane_admin_totp_secrets_sealed_by_previous_kek`, set by each re-sealing pass. */
  totpSecretsNotUnderKek(count: number): void;
}

/** Creates (or finds) the admin metrics on `registry`. */
export function adminMetrics(registry: Registry): AdminMetrics {
  const logins = counter(registry, {
    name: 'relayplane_logins_total',
    help: 'Login attempts by result: success, failure (bad request or wrong email/password) or throttled.',
    labelNames: ['result'],
  });
  const refused = counter(registry, {
    name: 'relayplane_audit_delivery_refused_total',
    help:
      'Audit events delivered to admin (RecordAuditEvents) and refused: the peer is not a delivering service, ' +
      'claims another source, names an action outside its own, or an occurred_at more than 5 minutes from now.',
    labelNames: ['source', 'reason'],
  });
  for (const reason of AUDIT_REFUSALS) refused.labels('issuer', reason);
  const totpNotUnderKek = gauge(registry, {
    name: 'relayplane_admin_totp_secrets_sealed_by_previous_kek',
    help:
      "Confirmed second-factor secrets this admin's RELAYPLANE_KEK does not open after its last re-sealing pass " +
      '(sealed by a previous KEK not yet re-sealed, or by no configured KEK).',
  });
  return {
    logins: {
      success: logins.labels('success'),
      failure: logins.labels('failure'),
      throttled: logins.labels('throttled'),
    },
    // `source`: the peer's app, or `other`/`unknown`: bounded.
    auditRefused: (source, reason) =>
      refused.labels(source === 'issuer' || source === 'billing' ? source : 'other', reason).inc(),
    totpSecretsNotUnderKek: (count) => totpNotUnderKek.set(count),
  };
}

/** Per-service readiness and dependency reachability (the same in the issuer, admin and billing; docs/metrics.md). */

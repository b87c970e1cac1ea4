/** The issuer's own metrics (docs/metrics.md); gRPC call metrics come from the shared RpcServer. */
import type { ErrorCode } from '@relayplane/shared/errors';
import { type Counter, counter, type Gauge, gauge, type Registry } from '@relayplane/shared/metrics';

export class IssuerMetrics {
  /** `relayplane_credentials_issued_total`. */
  readonly issued: Counter;
  /** `relayplane_credentials_revoked_total` (first revocation of a credential only). */
  readonly revoked: Counter;
  /** `relayplane_issuance_streams`: IssueCredentials streams open now. */
  readonly streams: Gauge;
  readonly #failures: Counter<'code'>;

  constructor(registry: Registry) {
    this.issued = counter(registry, {
      name: 'relayplane_credentials_issued_total',
      help: 'Relay credentials issued (signed and recorded), over IssueCredential and IssueCredentials.',
    });
    this.#failures = counter(registry, {
      name: 'relayplane_credential_issuance_failures_total',
      help: 'Credential issuance requests refused or failed, by error code (payment_required, unavailable, …).',
      labelNames: ['code'],
    });
    this.revoked = counter(registry, {
      name: 'relayplane_credentials_revoked_total',
      help: 'Relay credentials revoked (a repeated revocation of the same credential is not counted).',
    });
    this.streams = gauge(registry, {
      name: 'relayplane_issuance_streams',
      help: 'IssueCredentials streams open on this issuer.',
    });
  }

  /** Counts one failed issuance; `code` is an AppError code (a bounded set). */
  failure(code: ErrorCode): void {
    // `labels` returns the child bound for this code the first time (shared/metrics.ts).
    this.#failures.labels(code).inc();
  }
}

/** The admin service's own metrics (docs/metrics.md); gRPC call metrics come from the shared RpcServer. */
import { type CounterChild, counter, type Registry } from '@relayplane/shared/metrics';

const LOGIN_RESULTS = ['success', 'failure', 'throttled'] as const;
export type LoginResult = (typeof LOGIN_RESULTS)[number];

export interface AdminMetrics {
  /** `relayplane_logins_total{result}`, pre-bound per result. */
  logins: Record<LoginResult, CounterChild>;
}

/** Creates (or finds) the admin metrics on `registry`. */
export function adminMetrics(registry: Registry): AdminMetrics {
  const logins = counter(registry, {
    name: 'relayplane_logins_total',
    help: 'Login attempts by result: success, failure (bad request or wrong email/password) or throttled.',
    labelNames: ['result'],
  });
  return {
    logins: {
      success: logins.labels('success'),
      failure: logins.labels('failure'),
      throttled: logins.labels('throttled'),
    },
  };
}

/** Per-service readiness and dependency reachability (the same in the issuer, admin and billing; docs/metrics.md). */

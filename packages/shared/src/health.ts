/** The standard gRPC health service (grpc.health.v1), with Watch. */

import { AppError } from '@relayplane/contract/errors';
import type { ServiceImpl } from '@relayplane/proto/grpc';
import {
  HealthCheckResponse_ServingStatus,
  Health as HealthService,
  type HealthCheckResponse_ServingStatus as ServingStatus,
} from '@relayplane/proto/grpc-health';

export { HealthCheckResponse_ServingStatus as ServingStatus, HealthService };

export interface HealthState {
  readonly impl: ServiceImpl<typeof HealthService>;
  /** Sets the status of `service` ('' is the whole server). */
  set(service: string, status: ServingStatus): void;
  get(service: string): ServingStatus | undefined;
  /** Every service NOT_SERVING from now on; used at shutdown. */
  shutdown(): void;
}

export function healthImpl(): HealthState {
  const statuses = new Map<string, ServingStatus>([['', HealthCheckResponse_ServingStatus.SERVING]]);
  const watchers = new Map<string, Set<(s: ServingStatus) => void>>();
  // Wakes every Watch stream, whatever service it watches, so it can notice the shutdown.
  const wakers = new Set<() => void>();
  let shuttingDown = false;

  const set = (service: string, status: ServingStatus) => {
    const effective = shuttingDown ? HealthCheckResponse_ServingStatus.NOT_SERVING : status;
    if (statuses.get(service) === effective) return;
    statuses.set(service, effective);
    for (const w of watchers.get(service) ?? []) w(effective);
  };

  return {
    set,
    get: (service) => statuses.get(service),
    shutdown() {
      for (const service of statuses.keys()) set(service, HealthCheckResponse_ServingStatus.NOT_SERVING);
      shuttingDown = true;
      for (const wake of wakers) wake();
    },
    impl: {
      async check(req) {
        const status = statuses.get(req.service);
        if (status === undefined) throw new AppError('not_found', `unknown service "${req.service}"`);
        return { status };
      },
      async *watch(req, call) {
        const queue: ServingStatus[] = [
          statuses.get(req.service) ?? HealthCheckResponse_ServingStatus.SERVICE_UNKNOWN,
        ];
        let wake: (() => void) | undefined;
        const waker = () => wake?.();
        const push = (s: ServingStatus) => {
          queue.push(s);
          wake?.();
        };
        const set = watchers.get(req.service) ?? new Set();
        watchers.set(req.service, set);
        set.add(push);
        wakers.add(waker);
        call.signal.addEventListener('abort', waker, { once: true });
        try {
          while (!call.signal.aborted) {
            const next = queue.shift();
            if (next !== undefined) {
              yield { status: next };
              continue;
            }
            // The last status (NOT_SERVING) is out: end the stream so a graceful server
            // shutdown does not wait out its grace period for clients that keep watching.
            if (shuttingDown) return;
            await new Promise<void>((resolve) => {
              wake = resolve;
            });
            wake = undefined;
          }
        } finally {
          set.delete(push);
          if (set.size === 0 && watchers.get(req.service) === set) watchers.delete(req.service);
          wakers.delete(waker);
          call.signal.removeEventListener('abort', waker);
        }
      },
    },
  };
}

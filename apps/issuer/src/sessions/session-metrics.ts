/** Relay-session metrics (docs/metrics.md): decisions by event and outcome, refusals by reason, live sessions. */
import {
  type Counter,
  counter,
  Gauge,
  type Histogram,
  histogram,
  type Registry,
} from '@relayplane/shared/metrics';

/** Why a session event was refused: a bounded set (the refusals metric's `reason` label). */
export type RefusalReason =
  | 'no_credential'
  | 'invalid_credential'
  | 'relay'
  | 'scope'
  | 'path'
  | 'cap'
  | 'unknown_session'
  | 'other_relay'
  | 'ended'
  | 'revoked'
  | 'expired';

export class RelaySessionMetrics {
  readonly #events: Counter<'event' | 'outcome'>;
  readonly #refusals: Counter<'reason'>;
  readonly #seconds: Histogram<'event'>;

  /** `live`: the sessions not ended and seen within two cadences (read at each scrape). */
  constructor(registry: Registry, live: () => Promise<number>) {
    this.#events = counter(registry, {
      name: 'relayplane_relay_session_events_total',
      help: 'Relay session events decided by this issuer, by event (connect, revalidate, end) and outcome (granted, refused, error).',
      labelNames: ['event', 'outcome'],
    });
    this.#refusals = counter(registry, {
      name: 'relayplane_relay_session_refusals_total',
      help: 'Relay session events refused, by reason (cap, invalid_credential, revoked, ended, relay, scope, …).',
      labelNames: ['reason'],
    });
    this.#seconds = histogram(registry, {
      name: 'relayplane_relay_session_decision_seconds',
      help: 'Time this issuer took to decide a relay session event, by event (the revalidate latency a relay waits for, less the gateway hop).',
      labelNames: ['event'],
    });
    new Gauge({
      name: 'relayplane_relay_sessions_live',
      help: 'Relay sessions not ended and seen within two cadences, over every relay (from PostgreSQL at each scrape).',
      registers: [registry],
      async collect() {
        this.set(await live());
      },
    });
  }

  decided(event: string, outcome: 'granted' | 'refused' | 'error', startedMs: number): void {
    const known = event === 'connect' || event === 'revalidate' || event === 'end' ? event : 'other';
    this.#events.labels(known, outcome).inc();
    this.#seconds.labels(known).observe((performance.now() - startedMs) / 1000);
  }

  refused(reason: RefusalReason): void {
    this.#refusals.labels(reason).inc();
  }
}

/** The issuer's own metrics (docs/metrics.md); gRPC call metrics come from the shared RpcServer. */
import type { ErrorCode } from '@relayplane/contract/errors';
import {
  type Counter,
  counter,
  Gauge,
  gauge,
  type Histogram,
  histogram,
  type Registry,
} from '@relayplane/shared/metrics';

/** Signing-key states listed in the JWKS (removed keys are not). */
const PUBLISHED_STATES = ['next', 'active', 'previous'] as const;
export type PublishedKeyState = (typeof PUBLISHED_STATES)[number];

/**
 * Buckets of the revocation feed delay, in seconds: a woken long-poll answers in milliseconds;
 * without the bus it re-reads every second; beyond a few seconds something is wrong.
 */
const FEED_DELAY_BUCKETS: readonly number[] = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
];

/** Tenants exposed per issuer in the per-tenant slot gauges (the bound on their label values). */
export const SLOT_TENANTS_EXPOSED = 10;
/** A tenant enters the per-tenant slot gauges once it holds this share of its cap. */
export const SLOT_TENANTS_MIN_RATIO = 0.5;
/** A tenant leaves them when no reservation of it was seen for this long. */
export const SLOT_TENANTS_TTL_MS = 5 * 60_000;
/** Tenants remembered between scrapes (the candidates for the exposed ones). */
const SLOT_TENANTS_TRACKED = 1_000;

interface SlotUsage {
  inUse: number;
  cap: number;
  ratio: number;
  seenAt: number;
}

/**
 * The tenants nearest their plan's connection cap, as this issuer's reservations saw them.
 * Label values are tenant ids, so the set is bounded: a tenant is remembered only from
 * `SLOT_TENANTS_MIN_RATIO` of its cap (then followed, also below it, until idle for
 * `SLOT_TENANTS_TTL_MS`), at most `SLOT_TENANTS_TRACKED` of them, and only the
 * `SLOT_TENANTS_EXPOSED` highest ratios are exposed at each scrape.
 */
export class TenantSlotUsage {
  readonly #tenants = new Map<string, SlotUsage>();
  readonly #now: () => number;

  constructor(registry: Registry, now: () => number = () => performance.now()) {
    this.#now = now;
    const usage = this;
    new Gauge({
      name: 'relayplane_tenant_slots_in_use',
      help: `Connection slots held by the tenant when this issuer last reserved for it; only the ${SLOT_TENANTS_EXPOSED} tenants nearest their cap that hold at least ${SLOT_TENANTS_MIN_RATIO * 100} % of it.`,
      labelNames: ['tenant'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [tenant, u] of usage.top()) this.labels(tenant).set(u.inUse);
      },
    });
    new Gauge({
      name: 'relayplane_tenant_slot_cap',
      help: "The tenant's concurrent connection cap (its plan's), for the tenants of relayplane_tenant_slots_in_use.",
      labelNames: ['tenant'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [tenant, u] of usage.top()) this.labels(tenant).set(u.cap);
      },
    });
  }

  /** One reservation's outcome: the tenant holds `inUse` of `cap` slots. Hot path: O(1). */
  record(tenantId: string, inUse: number, cap: number): void {
    if (!(cap > 0)) return;
    const ratio = inUse / cap;
    const known = this.#tenants.get(tenantId);
    if (known) {
      known.inUse = inUse;
      known.cap = cap;
      known.ratio = ratio;
      known.seenAt = this.#now();
      return;
    }
    if (ratio < SLOT_TENANTS_MIN_RATIO) return;
    if (this.#tenants.size >= SLOT_TENANTS_TRACKED && !this.#makeRoom(ratio)) return;
    this.#tenants.set(tenantId, { inUse, cap, ratio, seenAt: this.#now() });
  }

  /** The exposed tenants, highest ratio first (ties: more slots in use); forgets idle ones. */
  top(): [string, SlotUsage][] {
    this.#forgetIdle();
    return [...this.#tenants]
      .filter(([, u]) => u.ratio >= SLOT_TENANTS_MIN_RATIO)
      .sort(([, a], [, b]) => b.ratio - a.ratio || b.inUse - a.inUse)
      .slice(0, SLOT_TENANTS_EXPOSED);
  }

  #forgetIdle(): void {
    const oldest = this.#now() - SLOT_TENANTS_TTL_MS;
    for (const [tenant, u] of this.#tenants) if (u.seenAt < oldest) this.#tenants.delete(tenant);
  }

  /** Full: drops idle tenants, else the lowest ratio if below `ratio`. Rare (O(n)). */
  #makeRoom(ratio: number): boolean {
    this.#forgetIdle();
    if (this.#tenants.size < SLOT_TENANTS_TRACKED) return true;
    let lowest: [string, number] | undefined;
    for (const [tenant, u] of this.#tenants) if (!lowest || u.ratio < lowest[1]) lowest = [tenant, u.ratio];
    if (!lowest || lowest[1] >= ratio) return false;
    this.#tenants.delete(lowest[0]);
    return true;
  }
}

/** `relayplane_issuer_signing_keys{state}` and the active key's rotation due time, set at every key reload. */
export interface SigningKeyStateMetrics {
  keys: Gauge<'state'>;
  rotationDue: Gauge;
}

export function signingKeyStateMetrics(registry: Registry): SigningKeyStateMetrics {
  const keys = gauge(registry, {
    name: 'relayplane_issuer_signing_keys',
    help: 'Signing keys in the JWKS by state (next, active, previous), as the last key reload saw them.',
    labelNames: ['state'],
  });
  for (const state of PUBLISHED_STATES) keys.labels(state).set(0);
  const rotationDue = gauge(registry, {
    name: 'relayplane_issuer_signing_key_rotation_due_timestamp_seconds',
    help: 'Unix time at which the active signing key is due for its scheduled rotation (its activation + ISSUER_KEY_ROTATION_INTERVAL_SECONDS), as the last key reload saw it.',
  });
  return { keys, rotationDue };
}

export class IssuerMetrics {
  /** `relayplane_credentials_issued_total`. */
  readonly issued: Counter;
  /** `relayplane_credentials_revoked_total` (first revocation of a credential only). */
  readonly revoked: Counter;
  /** `relayplane_issuance_streams`: IssueCredentials streams open now. */
  readonly streams: Gauge;
  /** `relayplane_revocation_feed_delay_seconds`. */
  readonly feedDelay: Histogram;
  /** `relayplane_tenant_slots_in_use` / `relayplane_tenant_slot_cap` (top tenants only). */
  readonly slots: TenantSlotUsage;
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
    this.feedDelay = histogram(registry, {
      name: 'relayplane_revocation_feed_delay_seconds',
      help: 'Time from a revocation committing to a ListRevocations answer carrying it, for revocations committed while that long-poll was open (its reader was up to date).',
      buckets: FEED_DELAY_BUCKETS,
    });
    this.slots = new TenantSlotUsage(registry);
  }

  /** Counts one failed issuance; `code` is an AppError code (a bounded set). */
  failure(code: ErrorCode): void {
    // `labels` returns the child bound for this code the first time (shared/metrics.ts).
    this.#failures.labels(code).inc();
  }

  /**
   * Observes the feed delay of the revocations in one ListRevocations answer given at `nowMs`
   * to a long-poll opened at `openedAtMs`: only those revoked since it opened (a reader
   * catching up would measure its own backlog, not the feed).
   */
  feedDelivered(revokedAt: readonly Date[], openedAtMs: number, nowMs: number): void {
    for (const at of revokedAt) {
      const ms = at.getTime();
      if (ms >= openedAtMs) this.feedDelay.observe(Math.max(0, nowMs - ms) / 1000);
    }
  }
}

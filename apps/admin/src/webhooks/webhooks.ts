/**
 * Webhooks (issue 34, docs/webhooks.md): facts become deliveries in the transaction that
 * records them; a dispatcher hands the deliveries that may go now to the senders; a sender
 * makes one attempt and records it.
 *
 * - **Facts.** Admin's own audit events and the ones issuer and billing deliver reach
 *   `onAuditEvent` inside the trail's transaction; the issuer's notices (sessions, cap) reach
 *   `recordNotice`. Either writes messages and deliveries in that transaction, so a fact that
 *   was recorded is delivered, and one recorded twice (an outbox's repeat) is delivered once.
 * - **Dispatcher.** A pass (a kick after a fact or an attempt, else every `pollIntervalMs`)
 *   takes the ready deliveries under a transaction-scoped advisory lock (one pass at a time
 *   across replicas) and adds them to the queue. A job lost with Redis, or a sender that died,
 *   is queued again after `REQUEUE_AFTER_MS`.
 * - **Sender.** Claims the delivery (pending → delivering: one sender per attempt), checks the
 *   URL's addresses now (SSRF), signs with the endpoint's secrets, POSTs, and records the
 *   outcome with the endpoint's failure streak in one transaction; a streak of
 *   `disableAfterSeconds` disables the endpoint (audited).
 */

import { createHash } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { AppError } from '@relayplane/contract/errors';
import { systemActor } from '@relayplane/shared/audit-outbox';
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import { type Counter, counter, type Histogram, histogram, type Registry } from '@relayplane/shared/metrics';
import type { DeliveryQueue } from '@relayplane/shared/webhook-queue';
import { retryDelayMs } from '@relayplane/shared/webhook-retry';
import { sendWebhook, WEBHOOK_TIMEOUT_MS } from '@relayplane/shared/webhook-send';
import { newWebhookSecret, webhookHeaders } from '@relayplane/shared/webhook-signature';
import { checkTarget, type Resolve } from '@relayplane/shared/webhook-target';
import type { Kysely } from 'kysely';
import type { JsonValue, StoredAuditEvent } from '../audit/canonical.ts';
import type { AdminTransaction, AuditTrail } from '../audit/trail.ts';
import type { WebhookSettings } from '../config.ts';
import type { AdminDatabase } from '../db/schema.ts';
import type { SecretSealer } from '../mfa/sealing.ts';
import type { AttemptOutcome, ReadyDelivery, WebhookDeliveryStore } from './delivery-store.ts';
import type { WebhookEndpointRecord, WebhookEndpointStore } from './endpoint-store.ts';
import { type FactSource, factOfNotice, factsOfAuditEvent } from './facts.ts';
import { resealWebhookSecrets, type WebhookResealOutcome } from './reseal.ts';

/** A delivery handed to a sender and not recorded for this long is queued again. */
export const REQUEUE_AFTER_MS = 60_000;
/**
 * Attempts in flight per endpoint: half of this replica's senders while it answers (a busy
 * endpoint keeps up, and half stay for the others), one while it is failing (a dead endpoint
 * holds one slot).
 */
const perEndpoint = (concurrency: number) => Math.max(1, Math.floor(concurrency / 2));
const FAILING_PER_ENDPOINT = 1;
const DEFAULT_GRACE_SECONDS = 86_400;
/**
 * How often a dispatcher looks for due retries and what another replica's pass missed. New
 * deliveries of this replica and finished attempts kick a pass at once.
 */
const POLL_INTERVAL_MS = 500;
/** Dispatcher passes are at least this far apart (a pass is a transaction of several statements). */
const PASS_SPACING_MS = 25;
/** How long a sender uses the endpoint it read (URL, secrets, failure streak). */
const ENDPOINT_CACHE_MS = 1_000;
export const MAX_GRACE_SECONDS = 7 * 86_400;
const LOCK_KEY = createHash('sha256').update('relayplane:webhooks:dispatch').digest().readInt32BE(0);

export interface WebhooksOptions {
  db: Kysely<AdminDatabase>;
  endpoints: WebhookEndpointStore;
  deliveries: WebhookDeliveryStore;
  /** Seals signing secrets (its own HKDF label; the endpoint id as AAD). */
  sealer: SecretSealer;
  audit: AuditTrail;
  clock: Clock;
  logger: Logger;
  queue: DeliveryQueue;
  settings: WebhookSettings;
  metrics?: Registry;
  /** How host names resolve at send time (tests); default node:dns `lookup` with every address. */
  resolve?: Resolve;
  pollIntervalMs?: number;
  timeoutMs?: number;
}

export class Webhooks {
  readonly #o: WebhooksOptions;
  readonly #resolve: Resolve;
  readonly #attempts: Counter<'outcome'> | undefined;
  readonly #latency: Histogram<never> | undefined;
  readonly #lag: Histogram<never> | undefined;
  readonly #endpoints = new Map<string, { endpoint: WebhookEndpointRecord; until: number }>();
  #poll: NodeJS.Timeout | undefined;
  #soon: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #lastPass = 0;
  #again = false;
  #started = false;
  #stopped = false;

  constructor(options: WebhooksOptions) {
    this.#o = options;
    this.#resolve = options.resolve ?? ((host) => lookup(host, { all: true, verbatim: true }));
    if (options.metrics) {
      this.#attempts = counter(options.metrics, {
        name: 'relayplane_webhook_attempts_total',
        help: 'Webhook delivery attempts by outcome: delivered (2xx), failed (any other answer, a timeout, an unsafe address).',
        labelNames: ['outcome'],
      });
      this.#latency = histogram(options.metrics, {
        name: 'relayplane_webhook_attempt_seconds',
        help: 'Time from sending a webhook to its answer (or the timeout).',
      });
      this.#lag = histogram(options.metrics, {
        name: 'relayplane_webhook_first_attempt_lag_seconds',
        help: 'Time from a fact being recorded to the first attempt of its delivery.',
      });
    }
  }

  // --- facts -------------------------------------------------------------------------------

  /** The trail's hook: an appended audit event that is a webhook event becomes deliveries in `trx`. */
  async onAuditEvent(trx: AdminTransaction, event: StoredAuditEvent): Promise<void> {
    let added = 0;
    for (const fact of factsOfAuditEvent(event))
      added += await this.#o.deliveries.fanOut(trx, fact, event.id, this.#o.clock.now());
    if (added > 0) this.kickSoon();
  }

  /** A notice (issuer: sessions, cap) delivered through an outbox: deliveries in a transaction of their own. */
  async recordNotice(event: FactSource & { id: string }): Promise<'recorded' | 'duplicate'> {
    const fact = factOfNotice(event);
    if (!fact) throw new AppError('invalid_request', `${event.action} is not a notice this admin knows`);
    // Most projects subscribe to nothing: one read, no transaction. Otherwise one statement.
    const subscribed = await this.#o.deliveries.subscribers(this.#o.db, fact);
    if (subscribed.length === 0) return 'recorded';
    const added = await this.#o.deliveries.fanOut(
      this.#o.db,
      fact,
      event.id,
      this.#o.clock.now(),
      subscribed,
    );
    if (added > 0) this.kickSoon();
    return 'recorded';
  }

  // --- secrets -------------------------------------------------------------------------------

  /** A new signing secret for `endpointId`: the value (answered once) and its sealed form. */
  newSecret(endpointId: string): { secret: string; sealed: string } {
    const secret = newWebhookSecret();
    return { secret, sealed: this.#o.sealer.seal(Buffer.from(secret), endpointId) };
  }

  /** How long a rotation keeps the previous secret signing: 0 is the default (24 h). */
  graceUntil(graceSeconds: number, now: Date): Date {
    if (graceSeconds > MAX_GRACE_SECONDS)
      throw new AppError('invalid_request', `grace_seconds must be at most ${MAX_GRACE_SECONDS} (7 days)`);
    return new Date(now.getTime() + (graceSeconds || DEFAULT_GRACE_SECONDS) * 1000);
  }

  /** The secrets that sign now: the current one, and the previous one during its grace period. */
  #secrets(endpoint: WebhookEndpointRecord, now: Date): string[] | undefined {
    const open = (sealed: string) => this.#o.sealer.open(sealed, endpoint.id)?.toString();
    const current = open(endpoint.secretSealed);
    if (!current) return undefined;
    const previous =
      endpoint.previousSecretSealed &&
      endpoint.previousSecretExpiresAt &&
      endpoint.previousSecretExpiresAt.getTime() > now.getTime()
        ? open(endpoint.previousSecretSealed)
        : undefined;
    return previous ? [current, previous] : [current];
  }

  /** Re-seals signing secrets a previous KEK sealed under the current one (reseal.ts). */
  resealSecrets(): Promise<WebhookResealOutcome> {
    return resealWebhookSecrets(this.#o.db, this.#o.sealer, this.#o.logger);
  }

  // --- dispatcher ----------------------------------------------------------------------------

  start(): void {
    if (this.#started) return;
    this.#started = true;
    this.#o.queue.start((d) => this.#deliver(d));
    this.#poll = setInterval(() => this.kick(), this.#o.pollIntervalMs ?? POLL_INTERVAL_MS);
    this.#poll.unref();
    this.kick();
  }

  /**
   * A dispatcher pass soon: at once when none ran within the last PASS_SPACING_MS, else when
   * that much has passed (coalesced). Under load this is a pass every 25 ms, each taking up to
   * twice the senders' count, not one per attempt: a pass is several statements.
   */
  kick(): void {
    if (!this.#started || this.#stopped || this.#soon) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    const wait = this.#lastPass + PASS_SPACING_MS - Date.now();
    if (wait > 0) {
      this.#soon = setTimeout(() => {
        this.#soon = undefined;
        this.kick();
      }, wait);
      this.#soon.unref();
      return;
    }
    this.#lastPass = Date.now();
    this.#running = this.#pass()
      .catch((err: unknown) => this.#o.logger.warn({ err }, 'webhook dispatch pass failed'))
      .finally(() => {
        this.#running = undefined;
        if (this.#again) {
          this.#again = false;
          this.kick();
        }
      });
  }

  /** A pass after the caller's transaction commits: PASS_SPACING_MS from now, not at once. */
  kickSoon(): void {
    if (!this.#started || this.#stopped || this.#soon) return;
    this.#soon = setTimeout(() => {
      this.#soon = undefined;
      this.kick();
    }, PASS_SPACING_MS);
    this.#soon.unref();
  }

  async close(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#poll);
    clearTimeout(this.#soon);
    await this.#running;
    await this.#o.queue.close();
  }

  async #pass(): Promise<void> {
    const limit = this.#o.settings.concurrency * 2;
    for (;;) {
      const ready = await this.#o.deliveries.takeReady({
        lockKey: LOCK_KEY,
        now: this.#o.clock.now(),
        limit,
        requeueAfterMs: REQUEUE_AFTER_MS,
        perEndpoint: perEndpoint(this.#o.settings.concurrency),
        failingPerEndpoint: FAILING_PER_ENDPOINT,
      });
      if (!ready || ready.length === 0) return;
      await this.#o.queue.add(ready);
      if (ready.length < limit || this.#stopped) return;
    }
  }

  // --- sender --------------------------------------------------------------------------------

  async #deliver(ready: ReadyDelivery): Promise<void> {
    const { clock, deliveries, endpoints } = this.#o;
    const claimedAt = clock.now();
    const claimed = await deliveries.claim(ready.id, claimedAt);
    if (!claimed) return;
    if (claimed.attempts === 0)
      this.#lag?.observe(Math.max(0, claimedAt.getTime() - claimed.createdAt.getTime()) / 1000);
    const endpoint = await this.#endpoint(claimed.endpointId);
    if (!endpoint) return;
    const outcome = await this.#attempt(endpoint, claimed.messageId, claimed.body);
    this.#attempts?.labels(outcome.ok ? 'delivered' : 'failed').inc();
    if (outcome.latencyMs !== null) this.#latency?.observe(outcome.latencyMs / 1000);
    const done = clock.now();
    const delay = outcome.ok ? undefined : retryDelayMs(claimed.attempts + 1, this.#o.settings.retrySchedule);
    if (outcome.ok && !endpoint.failingSince) {
      // The common case: one statement, no failure streak to clear.
      await deliveries.record(this.#o.db, claimed.id, outcome, done, undefined);
      this.kick();
      return;
    }
    const disabled = await this.#o.db.transaction().execute(async (trx) => {
      await deliveries.record(
        trx,
        claimed.id,
        outcome,
        done,
        delay === undefined ? undefined : new Date(done.getTime() + delay),
      );
      return endpoints.recordOutcome(
        trx,
        endpoint.id,
        outcome.ok,
        done,
        this.#o.settings.disableAfterSeconds * 1000,
        (t, e) =>
          this.#o.audit.record(t, {
            action: 'webhook_endpoint.disable',
            tenantId: e.tenantId,
            actor: systemActor('webhooks'),
            target: { type: 'webhook_endpoint', id: e.id },
            details: { project_id: e.projectId, reason: e.disabledReason ?? '' } satisfies Record<
              string,
              JsonValue
            >,
          }),
      );
    });
    // The streak changed (started, cleared, or disabled the endpoint): read it again next time.
    this.#endpoints.delete(endpoint.id);
    if (disabled)
      this.#o.logger.warn(
        { endpointId: endpoint.id, projectId: endpoint.projectId },
        'webhook endpoint disabled: failing too long',
      );
    this.kick();
  }

  /**
   * The endpoint, read at most once a second per replica: an attempt made within a second of a
   * change may use the URL or secret from before it (a rotation's previous secret still signs);
   * a deleted or disabled endpoint's deliveries are gone or failed, so no claim succeeds.
   */
  async #endpoint(id: string): Promise<WebhookEndpointRecord | undefined> {
    const now = Date.now();
    const cached = this.#endpoints.get(id);
    if (cached && cached.until > now) return cached.endpoint;
    const endpoint = await this.#o.endpoints.byId(id);
    if (this.#endpoints.size > 10_000) this.#endpoints.clear();
    if (endpoint) this.#endpoints.set(id, { endpoint, until: now + ENDPOINT_CACHE_MS });
    else this.#endpoints.delete(id);
    return endpoint;
  }

  async #attempt(endpoint: WebhookEndpointRecord, messageId: string, body: string): Promise<AttemptOutcome> {
    const now = this.#o.clock.now();
    const secrets = this.#secrets(endpoint, now);
    if (!secrets)
      return failure(
        'the signing secret does not open under RELAYPLANE_KEK (rotated away without RELAYPLANE_KEK_PREVIOUS?)',
      );
    const target = await checkTarget(
      endpoint.url,
      { allowLoopback: this.#o.settings.allowHttpLoopback },
      this.#resolve,
    );
    if (!target.ok) return failure(`not sent: ${target.reason}`);
    const address = target.addresses[0] as string;
    const headers = webhookHeaders(secrets, messageId, Math.floor(now.getTime() / 1000), body);
    const attempt = await sendWebhook(target.url, address, headers, body, {
      timeoutMs: this.#o.timeoutMs ?? WEBHOOK_TIMEOUT_MS,
    });
    return {
      ok: attempt.delivered,
      status: attempt.status ?? null,
      latencyMs: attempt.latencyMs,
      body: attempt.body === '' ? null : attempt.body,
      error: attempt.error ?? (attempt.delivered ? null : `HTTP ${attempt.status ?? 'error'}`),
    };
  }
}

function failure(error: string): AttemptOutcome {
  return { ok: false, status: null, latencyMs: null, body: null, error };
}

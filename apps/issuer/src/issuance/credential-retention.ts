/**
 * Credential retention (docs/credentials.md, "Retention"): the rows of credentials that expired
 * more than `ISSUER_CREDENTIAL_RETENTION_DAYS` ago, and their revocation feed entries, are
 * deleted in batches, each its own short transaction, oldest expiry first.
 *
 * Batched deletes rather than daily partitions: measured, dropping a partition costs no WAL, but
 * `credentials.jti` could no longer be the primary key (a partitioned table's keys must hold the
 * partition column), and every lookup by jti — introspection, revocation, relay assignment —
 * would probe one index per partition. The deleted rows leave dead tuples that autovacuum
 * reclaims, and new rows reuse their space: the table stays at the size of its window.
 *
 * Runs on the issuers' maintenance queue: with bullmq one replica runs each occurrence. Two runs
 * at once would still be correct (the batches lock their rows `skip locked`).
 */
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import { type Counter, counter, type Registry } from '@relayplane/shared/metrics';
import type { Scheduler } from '@relayplane/shared/scheduler';
import type { CredentialStore } from './credential-store.ts';
import { retentionCutoff } from './retention-cutoff.ts';

/** Scheduler job id (bullmq job scheduler id on the issuers' maintenance queue). */
export const CREDENTIAL_RETENTION_JOB = 'issuer-credential-retention';
/** How often the job runs. */
export const CREDENTIAL_RETENTION_INTERVAL_MS = 60_000;
/** Credentials per delete statement (docs/credentials.md: measured cost per batch). */
const DEFAULT_BATCH_SIZE = 5_000;
/**
 * A run stops starting batches after this long, so it never holds the maintenance queue (key
 * maintenance shares it) for long; what is left goes on the next run. Measured at about 13,000
 * deletions/s while running (docs/credentials.md), that sustains about 6,500 a second: a day's
 * issuance at up to that average rate is removed as fast as it expires.
 */
const DEFAULT_BUDGET_MS = 30_000;

export interface RetentionRun {
  cutoff: Date;
  credentials: number;
  revocations: number;
  batches: number;
  /** False when the run stopped at its time budget with rows left before `cutoff`. */
  complete: boolean;
}

export class CredentialRetention {
  readonly #store: CredentialStore;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #retentionDays: number;
  readonly #batchSize: number;
  readonly #budgetMs: number;
  /** `relayplane_issuer_credentials_deleted_total`; undefined without a registry. */
  readonly #deleted: Counter | undefined;

  constructor(deps: {
    store: CredentialStore;
    clock: Clock;
    logger: Logger;
    retentionDays: number;
    batchSize?: number;
    budgetMs?: number;
    metrics?: Registry;
  }) {
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#logger = deps.logger;
    this.#retentionDays = deps.retentionDays;
    this.#batchSize = deps.batchSize ?? DEFAULT_BATCH_SIZE;
    this.#budgetMs = deps.budgetMs ?? DEFAULT_BUDGET_MS;
    this.#deleted = deps.metrics
      ? counter(deps.metrics, {
          name: 'relayplane_issuer_credentials_deleted_total',
          help: 'Credential rows this issuer deleted past ISSUER_CREDENTIAL_RETENTION_DAYS (with their revocation feed entries).',
        })
      : undefined;
  }

  /** One run: batches until none is left before the cutoff or the time budget is spent. */
  async run(): Promise<RetentionRun> {
    const cutoff = retentionCutoff(this.#clock.now(), this.#retentionDays);
    const deadline = performance.now() + this.#budgetMs;
    const run: RetentionRun = { cutoff, credentials: 0, revocations: 0, batches: 0, complete: false };
    for (;;) {
      const batch = await this.#store.pruneExpired(cutoff, this.#batchSize);
      run.batches++;
      run.credentials += batch.credentials;
      this.#deleted?.inc(batch.credentials);
      run.revocations += batch.revocations;
      if (batch.credentials < this.#batchSize) {
        run.complete = true;
        break;
      }
      if (performance.now() >= deadline) break;
    }
    if (run.credentials > 0 || !run.complete) {
      this.#logger.info(
        { cutoff, credentials: run.credentials, revocations: run.revocations, complete: run.complete },
        'expired credentials deleted',
      );
    }
    return run;
  }
}

/** Registers the retention run every `intervalMs` (once per occurrence across replicas with bullmq). */
export function scheduleCredentialRetention(
  scheduler: Scheduler,
  retention: CredentialRetention,
  intervalMs = CREDENTIAL_RETENTION_INTERVAL_MS,
): void {
  scheduler.every(CREDENTIAL_RETENTION_JOB, intervalMs, async () => {
    await retention.run();
  });
}

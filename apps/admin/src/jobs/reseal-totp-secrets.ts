/**
 * Re-seals second-factor secrets under the current KEK after a rotation (docs/ARCHITECTURE.md,
 * "The KEK and its rotation"): a secret only a `RELAYPLANE_KEK_PREVIOUS` key opens is sealed
 * again under `RELAYPLANE_KEK` and written with a compare-and-set on the old value, so replicas
 * racing each other write it once and a removal or re-enrolment in between wins. Until then it
 * still opens under the previous KEK; once this reports none left on every replica, the previous
 * KEK can go without locking anyone out of their second factor.
 *
 * Only confirmed enrolments: a pending one lives until its owner confirms or restarts it. A
 * verification that read the old value just before the swap refuses that one code (its step is
 * taken on the enrolment it checked), and the same code passes on the next try.
 */
import type { Logger } from '@relayplane/shared/logger';
import type { SecretSealer } from '../mfa/sealing.ts';
import type { SecondFactorStore } from '../stores/second-factors.ts';

export const TOTP_RESEAL_JOB = 'totp-reseal';
export const TOTP_RESEAL_INTERVAL_MS = 3_600_000;
const PAGE = 200;

export interface ResealDeps {
  store: SecondFactorStore;
  sealer: SecretSealer;
  logger: Logger;
  /** Secrets still not sealed under the current KEK after the pass (the gauge). */
  report?: (left: number) => void;
}

export interface ResealOutcome {
  /** Re-sealed under the current KEK by this pass. */
  resealed: number;
  /** Opened by no configured KEK: a wrong `RELAYPLANE_KEK`, or a previous one already removed. */
  unopened: number;
  /** Still sealed by a previous KEK (changed meanwhile: the next pass looks again). */
  previous: number;
}

/** After a lost compare-and-set: whether what is there now (if anything) opens under the current KEK. */
async function underCurrentKek(deps: ResealDeps, userId: string): Promise<boolean> {
  const now = await deps.store.find(userId);
  return now?.status !== 'confirmed' || deps.sealer.reseal(now.sealedSecret, userId).state === 'current';
}

export async function resealTotpSecrets(deps: ResealDeps): Promise<ResealOutcome> {
  const outcome: ResealOutcome = { resealed: 0, unopened: 0, previous: 0 };
  let after = '';
  for (;;) {
    const page = await deps.store.listConfirmedSealed(after, PAGE);
    for (const row of page) {
      const result = deps.sealer.reseal(row.sealedSecret, row.userId);
      if (result.state === 'unopened') outcome.unopened++;
      else if (result.state === 'resealed') {
        if (await deps.store.replaceSealed(row.userId, row.sealedSecret, result.sealed)) outcome.resealed++;
        else if (!(await underCurrentKek(deps, row.userId))) outcome.previous++;
      }
    }
    const last = page.at(-1);
    if (!last || page.length < PAGE) break;
    after = last.userId;
  }
  deps.report?.(outcome.unopened + outcome.previous);
  if (outcome.unopened > 0) {
    deps.logger.warn(
      { unopened: outcome.unopened },
      'second-factor secrets that no configured KEK opens: their users cannot use their authenticator app (recovery codes still work); check RELAYPLANE_KEK and RELAYPLANE_KEK_PREVIOUS',
    );
  }
  if (outcome.resealed > 0)
    deps.logger.info({ resealed: outcome.resealed }, 'second-factor secrets re-sealed under the current KEK');
  return outcome;
}

/** Runs the pass on this replica at start and then every TOTP_RESEAL_INTERVAL_MS (each replica reports its own gauge). */
export class TotpResealer {
  readonly #deps: ResealDeps;
  #timer: NodeJS.Timeout | undefined;
  #first: Promise<unknown> | undefined;

  constructor(deps: ResealDeps) {
    this.#deps = deps;
  }

  #running: Promise<ResealOutcome> | undefined;

  /** One pass now, or the one already running (passes never overlap: the gauge is the last one's). */
  run(): Promise<ResealOutcome> {
    this.#running ??= resealTotpSecrets(this.#deps).finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  start(): void {
    const logged = () =>
      this.run().catch((err: unknown) =>
        this.#deps.logger.warn({ err }, 'could not re-seal second-factor secrets'),
      );
    this.#first = logged();
    this.#timer = setInterval(() => void logged(), TOTP_RESEAL_INTERVAL_MS);
    this.#timer.unref();
  }

  /** Stops the timer and waits for the pass start() ran. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#first;
  }
}

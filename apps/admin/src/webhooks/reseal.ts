/**
 * Re-seals webhook signing secrets under the current KEK after a rotation (as
 * jobs/reseal-totp-secrets.ts does for second factors): a secret only a `RELAYPLANE_KEK_PREVIOUS`
 * key opens is sealed again under `RELAYPLANE_KEK` with a compare-and-set on the old value, so
 * racing replicas write it once and a rotation of the endpoint's secret in between wins. Until
 * then it still opens under the previous KEK; once no secret is left under it, the previous KEK
 * can go without any endpoint losing its signatures.
 */
import type { Logger } from '@relayplane/shared/logger';
import type { Kysely } from 'kysely';
import type { AdminDatabase } from '../db/schema.ts';
import type { SecretSealer } from '../mfa/sealing.ts';

export const WEBHOOK_RESEAL_JOB = 'webhook-secret-reseal';
const PAGE = 200;

export interface WebhookResealOutcome {
  resealed: number;
  /** Opened by no configured KEK: those endpoints' deliveries fail until their secret is rotated. */
  unopened: number;
}

export async function resealWebhookSecrets(
  db: Kysely<AdminDatabase>,
  sealer: SecretSealer,
  logger: Logger,
): Promise<WebhookResealOutcome> {
  const outcome: WebhookResealOutcome = { resealed: 0, unopened: 0 };
  let after = '';
  for (;;) {
    const page = await db
      .selectFrom('webhook_endpoints')
      .select(['id', 'secret_sealed', 'previous_secret_sealed'])
      .where('id', '>', after)
      .orderBy('id')
      .limit(PAGE)
      .execute();
    for (const row of page) {
      for (const column of ['secret_sealed', 'previous_secret_sealed'] as const) {
        const sealed = row[column];
        if (!sealed) continue;
        const result = sealer.reseal(sealed, row.id);
        if (result.state === 'unopened') outcome.unopened++;
        if (result.state !== 'resealed') continue;
        const swapped = await db
          .updateTable('webhook_endpoints')
          .set({ [column]: result.sealed })
          .where('id', '=', row.id)
          .where(column, '=', sealed)
          .executeTakeFirst();
        if (Number(swapped.numUpdatedRows) > 0) outcome.resealed++;
      }
    }
    const last = page.at(-1);
    if (!last || page.length < PAGE) break;
    after = last.id;
  }
  if (outcome.unopened > 0)
    logger.warn(
      { unopened: outcome.unopened },
      'webhook signing secrets that no configured KEK opens: their deliveries fail until the secret is rotated; check RELAYPLANE_KEK and RELAYPLANE_KEK_PREVIOUS',
    );
  if (outcome.resealed > 0)
    logger.info({ resealed: outcome.resealed }, 'webhook signing secrets re-sealed under the current KEK');
  return outcome;
}

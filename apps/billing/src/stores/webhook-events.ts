import type { Kysely } from 'kysely';
import type { BillingDatabase } from '../db/schema.ts';

/** Provider events already applied (replay protection). Works on a transaction too. */
export class WebhookEventStore {
  readonly #db: Kysely<BillingDatabase>;
  constructor(db: Kysely<BillingDatabase>) {
    this.#db = db;
  }

  /** Records the event; false when it was recorded before (a replay). */
  async record(provider: string, eventId: string, eventType: string, now: Date): Promise<boolean> {
    const row = await this.#db
      .insertInto('webhook_events')
      .values({ provider, event_id: eventId, event_type: eventType, received_at: now })
      .onConflict((oc) => oc.columns(['provider', 'event_id']).doNothing())
      .returning('event_id')
      .executeTakeFirst();
    return row !== undefined;
  }
}

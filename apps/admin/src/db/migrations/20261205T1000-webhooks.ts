import { type Kysely, sql } from 'kysely';

/**
 * Webhooks (issue 34, docs/webhooks.md): a project's endpoints, the messages events became, and
 * one delivery per message and endpoint.
 *
 * - `webhook_endpoints`: the signing secret sealed under the KEK (the endpoint id as associated
 *   data); during a rotation's grace period also the previous one and when it stops signing.
 * - `webhook_messages`: one per event and tenant (the envelope, ready to send); `source_id` is
 *   the event that caused it (an audit event's or notice's id), unique with its type and the tenant, so an
 *   event delivered twice by an outbox becomes one message.
 * - `webhook_deliveries`: `seq` orders a subject's deliveries per endpoint (the dispatcher sends
 *   the lowest unfinished one of each (endpoint, subject) only).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('webhook_endpoints')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id').onDelete('cascade'))
    .addColumn('project_id', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('events', sql`text[]`, (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('enabled', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('secret_sealed', 'text', (c) => c.notNull())
    .addColumn('previous_secret_sealed', 'text')
    .addColumn('previous_secret_expires_at', 'timestamptz')
    .addColumn('failing_since', 'timestamptz')
    .addColumn('disabled_at', 'timestamptz')
    .addColumn('disabled_reason', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addForeignKeyConstraint(
      'webhook_endpoints_project_fkey',
      ['project_id', 'tenant_id'],
      'projects',
      ['id', 'tenant_id'],
      (fk) => fk.onDelete('cascade'),
    )
    .execute();
  await db.schema
    .createIndex('webhook_endpoints_project_idx')
    .on('webhook_endpoints')
    .columns(['project_id', 'created_at', 'id'])
    .execute();
  await db.schema
    .createIndex('webhook_endpoints_tenant_idx')
    .on('webhook_endpoints')
    .columns(['tenant_id'])
    .execute();

  await db.schema
    .createTable('webhook_messages')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('source_id', 'text', (c) => c.notNull())
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id').onDelete('cascade'))
    .addColumn('project_id', 'text')
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    // The envelope as sent, byte for byte on every attempt (the signature covers it).
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('occurred_at', 'timestamptz', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('webhook_messages_source_key', ['source_id', 'type', 'tenant_id'])
    .execute();

  await db.schema
    .createTable('webhook_deliveries')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('seq', 'bigserial', (c) => c.notNull().unique())
    .addColumn('endpoint_id', 'text', (c) =>
      c.notNull().references('webhook_endpoints.id').onDelete('cascade'),
    )
    .addColumn('message_id', 'text', (c) => c.notNull().references('webhook_messages.id').onDelete('cascade'))
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) =>
      c.notNull().check(sql`status in ('pending', 'delivering', 'succeeded', 'failed')`),
    )
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'timestamptz', (c) => c.notNull())
    // Handed to the queue (a job exists) since; a job lost with Redis is queued again after a while.
    .addColumn('queued_at', 'timestamptz')
    .addColumn('last_attempt_at', 'timestamptz')
    .addColumn('response_status', 'integer')
    .addColumn('latency_ms', 'integer')
    .addColumn('response_body', 'text')
    .addColumn('error', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('completed_at', 'timestamptz')
    .execute();
  // The dispatcher: unfinished deliveries, by endpoint and subject in order.
  await db.schema
    .createIndex('webhook_deliveries_open_idx')
    .on('webhook_deliveries')
    .columns(['endpoint_id', 'subject', 'seq'])
    .where(sql.ref('status'), 'in', sql`('pending', 'delivering')`)
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_due_idx')
    .on('webhook_deliveries')
    .columns(['next_attempt_at'])
    .where(sql.ref('status'), 'in', sql`('pending', 'delivering')`)
    .execute();
  // The dispatcher: attempts in flight per endpoint (a handful of rows).
  await db.schema
    .createIndex('webhook_deliveries_in_flight_idx')
    .on('webhook_deliveries')
    .columns(['queued_at'])
    .where(sql.ref('queued_at'), 'is not', null)
    .execute();
  // The delivery log (newest first) and retention.
  await db.schema
    .createIndex('webhook_deliveries_log_idx')
    .on('webhook_deliveries')
    .columns(['endpoint_id', 'seq'])
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_completed_idx')
    .on('webhook_deliveries')
    .columns(['completed_at'])
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_message_idx')
    .on('webhook_deliveries')
    .columns(['message_id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('webhook_deliveries').execute();
  await db.schema.dropTable('webhook_messages').execute();
  await db.schema.dropTable('webhook_endpoints').execute();
}

/**
 * A real gRPC server implementing admin's `RecordAuditEvents` (and nothing else) for the tests
 * of the audit outboxes of issuer and billing, until those tests run against admin itself.
 * Events go to a PostgreSQL table with admin's rule: an id already recorded is a duplicate.
 * Every call is also kept in order (`calls`), so a test sees repeats the table deduplicated.
 */

import { timestampDate } from '@bufbuild/protobuf/wkt';
import { AppError } from '@relayplane/contract/errors';
import { AdminService, type AuditEvent } from '@relayplane/proto/admin';
import { RpcServer, type ServiceImpl } from '@relayplane/shared/rpc';
import pg from 'pg';
import { testLogger } from './logger.ts';

export interface RecordedEvent {
  id: string;
  source: string;
  occurredAt: Date;
  tenantId: string;
  actor: { type: string; id: string };
  action: string;
  target: { type: string; id: string };
  outcome: string;
  ip: string;
  userAgent: string;
  requestId: string;
  details: Record<string, unknown>;
}

export interface RecordingAdmin {
  readonly port: number;
  readonly address: string;
  /** Every RecordAuditEvents call's event ids, in arrival order (repeats included). */
  readonly calls: string[][];
  /**
   * Runs before each call is recorded: throw to fail it (e.g. an AppError('unavailable')), or
   * return 'record-then-fail' to record the events and still answer unavailable (a lost answer).
   */
  before:
    | ((events: AuditEvent[]) => Promise<undefined | 'record-then-fail'> | undefined | 'record-then-fail')
    | undefined;
  /** The recorded events, in the order they were first recorded. */
  events(): Promise<RecordedEvent[]>;
  close(): Promise<void>;
}

/**
 * Starts the server on `port` (0: any free one) and creates its table in `databaseUrl`
 * (schema `recorded_audit`, shared by every server started on that database).
 */
export async function startRecordingAdmin(databaseUrl: string, port = 0): Promise<RecordingAdmin> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 4 });
  await pool.query(`create schema if not exists recorded_audit`);
  await pool.query(`create table if not exists recorded_audit.events (
    seq bigserial, id text primary key, source text not null, event jsonb not null)`);
  const calls: string[][] = [];
  const rpc = new RpcServer(testLogger('recording-admin'));
  const admin: RecordingAdmin = {
    port: 0,
    address: '',
    calls,
    before: undefined,
    async events() {
      const { rows } = await pool.query<{
        source: string;
        event: Omit<RecordedEvent, 'source' | 'occurredAt'> & { occurredAt: string };
      }>('select source, event from recorded_audit.events order by seq');
      return rows.map((r) => ({ ...r.event, source: r.source, occurredAt: new Date(r.event.occurredAt) }));
    },
    async close() {
      await rpc.close(1_000);
      await pool.end();
    },
  };
  const impl = {
    async recordAuditEvents(req: { source: string; events: AuditEvent[] }) {
      calls.push(req.events.map((e) => e.id));
      const verdict = await admin.before?.(req.events);
      if (req.source !== 'issuer' && req.source !== 'billing') {
        throw new AppError('invalid_request', 'source must be issuer or billing');
      }
      let recorded = 0;
      for (const e of req.events) {
        const event = {
          id: e.id,
          occurredAt: e.occurredAt ? timestampDate(e.occurredAt).toISOString() : '',
          tenantId: e.tenantId,
          actor: { type: e.actor?.type ?? '', id: e.actor?.id ?? '' },
          action: e.action,
          target: { type: e.target?.type ?? '', id: e.target?.id ?? '' },
          outcome: e.outcome,
          ip: e.ip,
          userAgent: e.userAgent,
          requestId: e.requestId,
          details: JSON.parse(e.detailsJson || '{}'),
        };
        const result = await pool.query(
          'insert into recorded_audit.events (id, source, event) values ($1, $2, $3) on conflict (id) do nothing',
          [e.id, req.source, JSON.stringify(event)],
        );
        recorded += result.rowCount ?? 0;
      }
      if (verdict === 'record-then-fail') throw new AppError('unavailable', 'answer lost (test)');
      return { recorded, duplicates: req.events.length - recorded };
    },
  };
  // Only RecordAuditEvents is served; every other method answers not_found.
  const full = new Proxy(impl, {
    get(target, name) {
      if (name in target) return target[name as keyof typeof target];
      return async () => {
        throw new AppError('not_found', `${String(name)} is not served by the recording admin`);
      };
    },
  }) as unknown as ServiceImpl<typeof AdminService>;
  rpc.add(AdminService, full);
  const bound = await rpc.listen(`127.0.0.1:${port}`);
  return Object.assign(admin, { port: bound, address: `127.0.0.1:${bound}` });
}

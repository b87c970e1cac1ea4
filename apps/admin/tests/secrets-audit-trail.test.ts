import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newToken } from '@relayplane/contract/tokens';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAudit } from '../../../scripts/secrets-audit.ts';
import { type AdminRig, startAdminRig } from './support/harness.ts';

const PASSWORD = 'a long enough password';
const PARTIAL = ['--min-logs=0', '--min-processes=0', '--min-db=0', '--min-redis=0'];

/**
 * The secrets audit (scripts/secrets-audit.ts) over the audit trail: rows of admin.audit_events
 * as the test databases' dumps hold them (row_to_json from real PostgreSQL), in a directory of
 * its own so the forged rows never reach the run's real audit.
 */
describe('secrets audit of the audit trail', () => {
  let rig: AdminRig;
  const dirs: string[] = [];

  beforeAll(async () => {
    rig = await startAdminRig('secrets_trail');
  });
  afterAll(async () => {
    // The forged rows must not reach the run's own dump of this database.
    await sql`delete from admin.audit_events where source = 'forged'`.execute(rig.admin.database.db);
    await rig?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  /** Dumps admin.audit_events as @relayplane/testing's storage does, and runs the audit over it. */
  async function auditDump(args: string[] = PARTIAL): Promise<{ code: number; printed: string }> {
    const dir = mkdtempSync(join(tmpdir(), 'trail-audit-'));
    dirs.push(dir);
    mkdirSync(join(dir, 'db'));
    const { rows } = await sql<{
      row: string;
    }>`select row_to_json(t)::text as row from admin.audit_events t`.execute(rig.admin.database.db);
    writeFileSync(
      join(dir, 'db', 'trail-1-abcdef.jsonl'),
      rows.map((r) => `{"table":"admin.audit_events","row":${r.row}}\n`).join(''),
    );
    const lines: string[] = [];
    const log = console.log;
    console.log = (line: string) => lines.push(line);
    try {
      return { code: runAudit([dir, ...args]), printed: lines.join('\n') };
    } finally {
      console.log = log;
    }
  }

  async function forge(details: object) {
    const id = crypto.randomUUID();
    await sql`insert into admin.audit_events
      (id, chain_key, seq, occurred_at, tenant_id, actor_type, actor_id, action, target_type, target_id,
       outcome, details, prev_hash, hash, source)
      values (${id}, 'forged', ${Math.floor(Math.random() * 1e9)}, now(), null, 'system', 'test', 'project.create',
       'project', 'prj_x', 'success', ${JSON.stringify(details)}::jsonb, '', '', 'forged')`.execute(
      rig.admin.database.db,
    );
    return id;
  }

  it('passes the events real changes record, and counts them', async () => {
    await rig.client.signup({ email: 'trail@example.com', password: PASSWORD, tenantName: 'trail' });
    const { code, printed } = await auditDump();
    expect(printed).toMatch(/\b[1-9][0-9]* audit events\b/);
    expect(code).toBe(0);
  });

  it('fails on an event carrying a token value, and on a details field named like a secret', async () => {
    const withToken = await forge({ note: newToken('userSession') });
    let res = await auditDump();
    expect(res.code).toBe(1);
    expect(res.printed).toContain('db/trail-1-abcdef.jsonl');
    await sql`delete from admin.audit_events where id = ${withToken}`.execute(rig.admin.database.db);
    expect((await auditDump()).code).toBe(0);

    const named = await forge({ password: 'x' });
    res = await auditDump();
    expect(res.code).toBe(1);
    expect(res.printed).toContain(
      `audit event details field named like a secret: event ${named}: details.password`,
    );
    await sql`delete from admin.audit_events where id = ${named}`.execute(rig.admin.database.db);
  });

  it('fails a whole run whose dumps hold no audit event at all', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'trail-audit-empty-'));
    dirs.push(dir);
    mkdirSync(join(dir, 'db'));
    writeFileSync(
      join(dir, 'db', 'other-1-abcdef.jsonl'),
      '{"table":"admin.projects","row":{"id":"prj_x"}}\n',
    );
    const lines: string[] = [];
    const log = console.log;
    console.log = (line: string) => lines.push(line);
    try {
      expect(runAudit([dir, '--min-logs=0', '--min-processes=0', '--min-db=1', '--min-redis=0'])).toBe(1);
    } finally {
      console.log = log;
    }
    expect(lines.join('\n')).toContain('0 audit_events rows in the database dumps (at least 1 expected)');
  });
});

/**
 * Signed audit checkpoints through the gateway (issue 31), on real admin and PostgreSQL: the
 * checkpoints verify with a JOSE library against the published key; and the two ways someone with
 * write access to the database can rewrite history — rows rewritten with recomputed hashes and the
 * head moved, or the oldest rows dropped and the anchor moved — both pass the hash recomputation
 * and are caught against checkpoints saved before, by the server and by the CLI offline, naming the
 * first bad sequence number.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { InjectOptions } from 'fastify';
import { compactVerify, importJWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventHash, type JsonValue } from '../../admin/src/audit/canonical.ts';
import { EXIT } from '../../cli/src/errors.ts';
import { inProcessCli } from './support/cli.ts';
import { type Stack, startStack } from './support/stack.ts';
import { PASSWORD, tenant } from './support/tenant.ts';

describe('signed audit checkpoints', () => {
  let stack: Stack;
  let seq = 0;
  let dir: string;
  beforeAll(async () => {
    stack = await startStack('gw_audit_checkpoints');
    dir = mkdtempSync(join(tmpdir(), 'rp-checkpoints-'));
  });
  afterAll(async () => {
    await stack?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  const inject = (o: InjectOptions) => stack.app.inject(o);
  const cli = inProcessCli(() => stack.app, 'checkpoints');

  /** A tenant with a few projects, each change checkpointed: one checkpoint per position. */
  async function history(label: string) {
    const t = await tenant(stack, { email: `${label}-${++seq}@example.test`, name: `${label} ${seq}` });
    await inject({ method: 'POST', url: '/admin/v1/audit-events/checkpoints', headers: t.auth });
    for (let i = 0; i < 4; i++) {
      // Two projects (the free plan's most), then two logins: four more events.
      if (i < 2) await t.project(`${label}-${i}`);
      else
        await inject({
          method: 'POST',
          url: '/admin/v1/auth/login',
          payload: { email: t.email, password: PASSWORD },
        });
      const made = await inject({
        method: 'POST',
        url: '/admin/v1/audit-events/checkpoints',
        headers: t.auth,
      });
      expect(made.statusCode, made.body).toBe(200);
    }
    const saved = await cli(['audit', 'checkpoints', '--json'], t.token);
    expect(saved.code, saved.stderr).toBe(EXIT.ok);
    const file = join(dir, `${label}.json`);
    writeFileSync(file, saved.stdout);
    return {
      t,
      file,
      saved: JSON.parse(saved.stdout) as { checkpoints: { seq: number; hash: string; jws: string }[] },
    };
  }

  const db = () => stack.admin.database.db;

  /** The chain's rows, oldest first, as the hash covers them. */
  async function rows(tenantId: string) {
    const found = await db()
      .selectFrom('audit_events')
      .selectAll()
      .where('chain_key', '=', tenantId)
      .orderBy('seq')
      .execute();
    return found.map((r) => ({
      id: r.id,
      seq: Number(r.seq),
      occurredAt: r.occurred_at,
      tenantId: r.tenant_id,
      actor: { type: r.actor_type, id: r.actor_id },
      action: r.action,
      target: { type: r.target_type, id: r.target_id },
      outcome: r.outcome,
      ip: r.ip,
      userAgent: r.user_agent,
      requestId: r.request_id,
      details: (r.details ?? {}) as { [key: string]: JsonValue },
      prevHash: r.prev_hash,
      hash: r.hash,
    }));
  }

  it('publishes the key as a JWKS, and each checkpoint verifies with jose against it', async () => {
    const { t, saved } = await history('jose');
    const keys = await inject({ method: 'GET', url: '/v1/audit/keys' });
    expect(keys.statusCode).toBe(200);
    expect(keys.headers['cache-control']).toBe('public, max-age=300');
    const [jwk] = keys.json().keys;
    expect(jwk).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', kid: expect.any(String) });
    expect(JSON.stringify(jwk)).not.toContain('"d"');
    const key = await importJWK(jwk, 'EdDSA');
    expect(saved.checkpoints.length).toBeGreaterThanOrEqual(5);
    for (const cp of saved.checkpoints) {
      const { payload, protectedHeader } = await compactVerify(cp.jws, key);
      expect(protectedHeader).toMatchObject({
        alg: 'EdDSA',
        kid: jwk.kid,
        typ: 'relayplane-audit-checkpoint+jws',
      });
      expect(JSON.parse(new TextDecoder().decode(payload))).toEqual({
        tenant_id: t.tenantId,
        seq: cp.seq,
        hash: cp.hash,
        at: expect.any(String),
      });
    }
    const intact = await cli(['audit', 'verify', '--checkpoints', join(dir, 'jose.json')], t.token);
    expect(intact.code, intact.stdout + intact.stderr).toBe(EXIT.ok);
    const verify = await inject({ method: 'GET', url: '/admin/v1/audit-events/verify', headers: t.auth });
    expect(verify.json()).toMatchObject({ ok: true, checkpoint_ok: true, anchor_ok: true });
  });

  it('catches rows rewritten with recomputed hashes and the head moved, naming the first bad seq', async () => {
    const { t, file } = await history('rewrite');
    const chain = await rows(t.tenantId);
    // The attacker edits the third event and recomputes every hash after it, and the head.
    const target = chain[2];
    if (!target) throw new Error('too short a chain');
    let prev = chain[1]?.hash ?? '';
    for (const event of chain.slice(2)) {
      const edited = {
        ...event,
        details: event.seq === target.seq ? { ...event.details, name: 'forged' } : event.details,
        prevHash: prev,
      };
      const hash = eventHash(edited);
      await db()
        .updateTable('audit_events')
        .set({ details: JSON.stringify(edited.details), prev_hash: prev, hash })
        .where('id', '=', event.id)
        .execute();
      prev = hash;
    }
    await db()
      .updateTable('audit_chain_heads')
      .set({ hash: prev })
      .where('chain_key', '=', t.tenantId)
      .execute();

    const verify = await inject({ method: 'GET', url: '/admin/v1/audit-events/verify', headers: t.auth });
    const body = verify.json();
    // The recomputation alone passes; the latest checkpoint does not.
    expect(body).toMatchObject({ ok: false, first_bad_id: null, checkpoint_ok: false, anchor_ok: true });
    const offline = await cli(['audit', 'verify', '--checkpoints', file, '--json'], t.token);
    expect(offline.code).toBe(EXIT.api);
    expect(JSON.parse(offline.stdout)).toMatchObject({ ok: false, first_bad_seq: target.seq });
    const human = await cli(['audit', 'verify', '--checkpoints', file], t.token);
    expect(human.stdout).toMatch(new RegExp(`^First bad seq:\\s+${target.seq}$`, 'm'));
    expect(human.stderr).toBe(
      `relayplane: the audit trail disagrees with the saved checkpoints from seq ${target.seq}\n`,
    );
  });

  it('catches the oldest rows dropped and the anchor moved, naming the first bad seq', async () => {
    const { t, file, saved } = await history('drop');
    const oldest = Math.min(...saved.checkpoints.map((c) => c.seq));
    const chain = await rows(t.tenantId);
    const last = chain[2];
    if (!last) throw new Error('too short a chain');
    // Deleted as pruning would, but without the audit.prune event that records it.
    await db()
      .deleteFrom('audit_events')
      .where('chain_key', '=', t.tenantId)
      .where('seq', '<=', String(last.seq))
      .execute();
    await db()
      .updateTable('audit_chain_heads')
      .set({ anchor_seq: String(last.seq), anchor_hash: last.hash })
      .where('chain_key', '=', t.tenantId)
      .execute();

    const verify = await inject({ method: 'GET', url: '/admin/v1/audit-events/verify', headers: t.auth });
    expect(verify.json()).toMatchObject({ ok: false, anchor_ok: false, first_bad_seq: last.seq + 1 });
    const offline = await cli(['audit', 'verify', '--checkpoints', file, '--json'], t.token);
    expect(offline.code).toBe(EXIT.api);
    // The oldest checkpoint saved names a position that is gone, and no audit.prune event says why.
    expect(JSON.parse(offline.stdout)).toMatchObject({ ok: false, first_bad_seq: oldest });
  });

  it('refuses a checkpoints file signed by another key', async () => {
    const { t, file, saved } = await history('forged-file');
    const other = JSON.parse(JSON.stringify(saved));
    other.keys.keys[0].x = Buffer.alloc(32, 1).toString('base64url');
    writeFileSync(`${file}.forged`, JSON.stringify(other));
    const res = await cli(['audit', 'verify', '--checkpoints', `${file}.forged`, '--json'], t.token);
    expect(res.code).toBe(EXIT.api);
    expect(JSON.parse(res.stdout)).toMatchObject({
      ok: false,
      first_bad_seq: Math.min(...saved.checkpoints.map((c) => c.seq)),
    });
    const missing = await cli(['audit', 'verify', '--checkpoints', join(dir, 'nope.json')], t.token);
    expect(missing.code).toBe(EXIT.usage);
  });
});

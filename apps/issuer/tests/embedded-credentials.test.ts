import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AppError } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import { ManualClock } from '@relayplane/shared/clock';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemorySlotStore } from '../src/issuance/slot-store.ts';
import { DEMO_RELAYS } from '../src/relays/relay-config.ts';
import { newKek, type RunningIssuer, startIssuer } from './support/harness.ts';

/** Embedded mode: PGlite, no Redis (in-memory slot store, in-process bus), demo relays. */
describe('relay credentials in embedded mode (PGlite, no Redis)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'issuer-embedded-'));
  const clock = new ManualClock(Date.now());
  let issuer: RunningIssuer;
  const request = (tenantId: string) => ({
    tenantId,
    projectId: newId('project'),
    apiKeyId: newId('apiKey'),
    mode: 'live',
    ttlSeconds: 120,
    region: 'us-east',
    maxConcurrentConnections: 2,
  });

  beforeAll(async () => {
    issuer = await startIssuer({
      databaseUrl: 'postgres://unused.invalid/none',
      clock,
      kek: newKek(),
      config: { database: { kind: 'pglite', dataDir }, relays: DEMO_RELAYS },
    });
  });

  afterAll(async () => {
    await issuer?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('issues, caps, revokes, expires and feeds revocations without Redis', async () => {
    expect(issuer.service.slots).toBeInstanceOf(MemorySlotStore);
    const tenantId = newId('tenant');
    const first = await issuer.client.issueCredential(request(tenantId));
    expect(first.relays[0]?.region).toBe('us-east');
    expect(first.fallback).toContain('127.0.0.1:4443');
    await issuer.client.issueCredential(request(tenantId));
    const refused = await issuer.client.issueCredential(request(tenantId)).catch((e: AppError) => e);
    expect(refused).toBeInstanceOf(AppError);
    expect((refused as AppError).code).toBe('payment_required');

    const { nextCursor } = await issuer.client.listRevocations({ cursor: 0n });
    const poll = issuer.client.listRevocations({ cursor: nextCursor, waitMs: 10_000 });
    await issuer.client.revokeCredential({ tenantId, jti: first.jti });
    expect((await poll).revocations.map((r) => r.jti)).toEqual([first.jti]);
    expect((await issuer.client.introspectCredential({ token: first.token })).active).toBe(false);
    await issuer.client.issueCredential(request(tenantId));

    // Leases end with the credentials (the in-memory twin runs on the service clock).
    clock.advance(121_000);
    await issuer.client.issueCredential(request(tenantId));
    expect(await issuer.service.slots.leases(tenantId)).toHaveLength(1);
  });
});

import { newId } from '@relayplane/contract/ids';
import { ManualClock } from '@relayplane/shared/clock';
import { parseDay } from '@relayplane/shared/usage-day';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IssuerConfigOverrides } from '../src/config.ts';
import {
  type CredentialRowInit,
  insertCredentials,
  newKek,
  type RunningIssuer,
  rejection,
  startIssuer,
} from './support/harness.ts';

const RELAYS: IssuerConfigOverrides = {
  relays: {
    staticRelays: [{ id: 'rly_static_eu-west_1', region: 'eu-west', host: 'relay-eu.example', port: 4433 }],
    fallback: [],
  },
};

/** `hh:mm` on 2026-03-10 (the scripted day), or with a day offset. */
const at = (hhmm: string, dayOffset = 0) =>
  new Date(Date.parse(`2026-03-10T${hhmm}:00Z`) + dayOffset * 86_400_000).toISOString();

describe('SummarizeUsage (real gRPC, PostgreSQL)', () => {
  let database: TestDatabase;
  let issuer: RunningIssuer;
  const clock = new ManualClock(Date.parse('2026-04-02T08:00:00Z'));
  const t1 = newId('tenant');
  const t2 = newId('tenant');
  const t3 = newId('tenant');
  const p1 = newId('project');
  const p2 = newId('project');
  const p3 = newId('project');

  const insert = (rows: CredentialRowInit[]) => insertCredentials(issuer.service, rows);

  const summarize = async (day: string) =>
    (await issuer.client.summarizeUsage({ day })).summaries.map((s) => ({
      tenantId: s.tenantId,
      projectId: s.projectId,
      credentialsIssued: s.credentialsIssued,
      peakConcurrentConnections: s.peakConcurrentConnections,
    }));

  const row = (tenantId: string, projectId: string, credentialsIssued: number, peak: number) => ({
    tenantId,
    projectId,
    credentialsIssued: BigInt(credentialsIssued),
    peakConcurrentConnections: peak,
  });

  const byKey = (rows: ReturnType<typeof row>[]) =>
    [...rows].sort((a, b) =>
      a.tenantId === b.tenantId
        ? a.projectId.localeCompare(b.projectId)
        : a.tenantId.localeCompare(b.tenantId),
    );

  beforeAll(async () => {
    database = await createTestDatabase('issuer_usage');
    issuer = await startIssuer({ databaseUrl: database.url, clock, kek: newKek(), config: RELAYS });
    // The scripted day, 2026-03-10 (UTC).
    await insert([
      // Tenant 1, project 1.
      { tenant: t1, project: p1, issued: at('23:30', -1), expires: at('00:30') }, // spans midnight
      { tenant: t1, project: p1, issued: at('00:10'), expires: at('01:10') },
      { tenant: t1, project: p1, issued: at('00:20'), expires: at('02:00'), revoked: at('00:30') },
      { tenant: t1, project: p1, issued: at('10:00'), expires: at('11:00') },
      { tenant: t1, project: p1, issued: at('11:00'), expires: at('12:00') }, // starts as the previous ends
      { tenant: t1, project: p1, issued: at('23:50'), expires: at('00:50', 1) }, // into the next day
      { tenant: t1, project: p1, issued: at('05:00'), expires: at('06:00'), revoked: at('05:00') }, // never live
      { tenant: t1, project: p1, issued: at('00:10', 1), expires: at('01:00', 1) }, // the next day
      { tenant: t1, project: p1, issued: at('10:00', -1), expires: at('11:00', -1) }, // the day before
      // Tenant 1, project 2.
      { tenant: t1, project: p2, issued: at('00:25'), expires: at('03:00') }, // with three of p1: tenant peak 4
      { tenant: t1, project: p2, issued: at('10:30'), expires: at('10:45') },
      { tenant: t1, project: p2, issued: at('14:00'), expires: at('16:00') },
      { tenant: t1, project: p2, issued: at('15:00'), expires: at('17:00') },
      { tenant: t1, project: p2, issued: at('15:30'), expires: at('15:45') },
      // Tenant 2, project 3.
      { tenant: t2, project: p3, issued: at('20:00', -1), expires: at('20:00', 1) }, // live all day
      { tenant: t2, project: p3, issued: at('22:00', -1), expires: at('23:59', 1), revoked: at('23:00', -1) },
      { tenant: t2, project: p3, issued: at('12:00'), expires: at('13:00'), revoked: at('12:30') },
      { tenant: t2, project: p3, issued: at('12:30'), expires: at('13:30') }, // starts as the revoked one ends
      // Tenant 3: nothing issued that day, one credential live through it.
      { tenant: t3, project: p3, issued: at('12:00', -1), expires: at('01:00', 1) },
    ]);
  });

  afterAll(async () => {
    await issuer?.stop();
    await database?.drop();
  });

  it('counts a scripted day exactly: issuance per project and tenant, peaks of live credentials', async () => {
    expect(byKey(await summarize('2026-03-10'))).toEqual(
      byKey([
        // Tenant 1: 6 + 5 issued; its own peak (4 at 00:25–00:30) is not the sum of 3 and 3.
        row(t1, '', 11, 4),
        row(t1, p1, 6, 3),
        row(t1, p2, 5, 3),
        // Tenant 2: an end and a start at 12:30 do not overlap, so 2, not 3.
        row(t2, '', 2, 2),
        row(t2, p3, 2, 2),
        // Tenant 3: nothing issued, but one credential live.
        row(t3, '', 0, 1),
        row(t3, p3, 0, 1),
      ]),
    );
  });

  it('answers in tenant then project order, the tenant total first', async () => {
    const rows = await summarize('2026-03-10');
    const keys = rows.map((r) => `${r.tenantId}/${r.projectId}`);
    expect(keys).toEqual([...keys].sort());
    for (const tenant of [t1, t2, t3]) {
      expect(rows.find((r) => r.tenantId === tenant)?.projectId).toBe('');
    }
  });

  it('counts the neighbouring days from the same rows', async () => {
    expect(byKey(await summarize('2026-03-11'))).toEqual(
      byKey([
        // The 23:50 credential runs to 00:50 and overlaps the one issued at 00:10.
        row(t1, '', 1, 2),
        row(t1, p1, 1, 2),
        row(t2, '', 0, 1),
        row(t2, p3, 0, 1),
        row(t3, '', 0, 1),
        row(t3, p3, 0, 1),
      ]),
    );
    expect(byKey(await summarize('2026-03-09'))).toEqual(
      byKey([
        // 10:00–11:00 and 23:30 on; 22:00–23:00 (revoked) and 20:00 on overlap; t3 from 12:00.
        row(t1, '', 2, 1),
        row(t1, p1, 2, 1),
        row(t2, '', 2, 2),
        row(t2, p3, 2, 2),
        row(t3, '', 1, 1),
        row(t3, p3, 1, 1),
      ]),
    );
    expect(await summarize('2026-01-01')).toEqual([]);
  });

  it('is a pure read: the same answer however many times it is asked', async () => {
    const first = await summarize('2026-03-10');
    const again = await Promise.all([1, 2, 3].map(() => summarize('2026-03-10')));
    for (const answer of again) expect(answer).toEqual(first);
  });

  it('counts credentials issued and revoked through the service', async () => {
    const tenantId = newId('tenant');
    const projectId = newId('project');
    const issue = () =>
      issuer.client.issueCredential({
        tenantId,
        projectId,
        apiKeyId: newId('apiKey'),
        mode: 'live',
        scopes: ['relay:session'],
        ttlSeconds: 600,
        region: '',
        maxConcurrentConnections: 10,
      });
    const a = await issue();
    await issue();
    clock.advance(60_000);
    await issuer.client.revokeCredential({ tenantId, jti: a.jti });
    await issue(); // 2 live after the revocation
    clock.advance(60_000);
    await issue(); // 3 live
    const mine = (await summarize('2026-04-02')).filter((r) => r.tenantId === tenantId);
    expect(mine).toEqual([row(tenantId, '', 4, 3), row(tenantId, projectId, 4, 3)]);
  });

  it('sums the relay sessions that ended in the day, whole on their end day, per project and tenant', async () => {
    const tenantId = newId('tenant');
    const pa = newId('project');
    const pb = newId('project');
    let n = 0;
    const session = (projectId: string, started: string, ended: string | null, extra = {}) => ({
      id: (++n).toString(16).padStart(32, 'a'),
      relay_id: 'rly_00000000000000000000',
      tenant_id: tenantId,
      project_id: projectId,
      api_key_id: newId('apiKey'),
      jti: newId('session').replace('ses_', 'crd_'),
      kid: 'k',
      credential_iat: 0,
      transport: 'quic',
      remote: '',
      role: '',
      path: '/',
      grant_root: projectId,
      grant_publish: true,
      grant_subscribe: true,
      tier: 'free',
      revalidate_seconds: 15,
      started_at: new Date(started),
      last_seen_at: new Date(ended ?? started),
      grant_expires_at: new Date(ended ?? started),
      ended_at: ended === null ? null : new Date(ended),
      ...extra,
    });
    await issuer.service.database.db
      .insertInto('relay_sessions')
      .values([
        // Reported by its relay: 90 s and its bytes.
        session(pa, at('10:00'), at('10:02'), { duration_seconds: 90, bytes_sent: 1000, bytes_received: 10 }),
        // Started the day before, ended in the day: counted whole, on its end day.
        session(pa, at('23:00', -1), at('01:00'), {
          duration_seconds: 7200,
          bytes_sent: 5,
          bytes_received: 6,
        }),
        // Ended by the control plane, never reported: its start to its end (600 s), no bytes.
        session(pb, at('12:00'), at('12:10')),
        // Still live, and one that ended the next day: not this day's.
        session(pb, at('13:00'), null),
        session(pb, at('23:00'), at('00:30', 1), { duration_seconds: 5400 }),
      ])
      .execute();
    const rows = (await issuer.client.summarizeUsage({ day: '2026-03-10' })).summaries.filter(
      (r) => r.tenantId === tenantId,
    );
    const facts = rows.map((r) => ({
      projectId: r.projectId,
      sessionsEnded: r.sessionsEnded,
      sessionSeconds: r.sessionSeconds,
      bytesSent: r.bytesSent,
      bytesReceived: r.bytesReceived,
      credentialsIssued: r.credentialsIssued,
    }));
    expect(facts).toEqual(
      [
        {
          projectId: '',
          sessionsEnded: 3n,
          sessionSeconds: 7890,
          bytesSent: 1005n,
          bytesReceived: 16n,
          credentialsIssued: 0n,
        },
        {
          projectId: pa,
          sessionsEnded: 2n,
          sessionSeconds: 7290,
          bytesSent: 1005n,
          bytesReceived: 16n,
          credentialsIssued: 0n,
        },
        {
          projectId: pb,
          sessionsEnded: 1n,
          sessionSeconds: 600,
          bytesSent: 0n,
          bytesReceived: 0n,
          credentialsIssued: 0n,
        },
      ].sort((a, b) => (a.projectId < b.projectId ? -1 : a.projectId > b.projectId ? 1 : 0)),
    );
    const next = (await issuer.client.summarizeUsage({ day: '2026-03-11' })).summaries.find(
      (r) => r.tenantId === tenantId && r.projectId === '',
    );
    expect(next?.sessionSeconds).toBe(5400);
  });

  it('refuses a day that is not a calendar day as YYYY-MM-DD', async () => {
    for (const day of [
      '',
      '2026-02-30',
      '2026-3-10',
      '2026-13-01',
      '10/03/2026',
      '2026-03-10T00:00:00Z',
      'x',
    ]) {
      expect((await rejection(issuer.client.summarizeUsage({ day }))).code).toBe('invalid_request');
    }
    expect(parseDay('2028-02-29')?.toISOString()).toBe('2028-02-29T00:00:00.000Z');
    expect(parseDay('2026-02-29')).toBeUndefined();
  });
});

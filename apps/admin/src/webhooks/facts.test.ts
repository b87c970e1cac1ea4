import { describe, expect, it } from 'vitest';
import { type FactSource, factOfAuditEvent, factOfNotice, factsOfAuditEvent } from './facts.ts';

const at = new Date('2026-11-29T08:00:00.000Z');
const event = (over: Partial<FactSource>): FactSource => ({
  action: 'api_key.create',
  tenantId: 'ten_aaaaaaaaaaaaaaaaaaaa',
  target: { type: 'api_key', id: 'key_aaaaaaaaaaaaaaaaaaaa' },
  outcome: 'success',
  details: {},
  occurredAt: at,
  ...over,
});

describe('which webhook event an audit event is', () => {
  it('maps API key creation with its public fields, ordered by the key', () => {
    const fact = factOfAuditEvent(
      event({
        details: {
          project_id: 'prj_aaaaaaaaaaaaaaaaaaaa',
          name: 'k',
          mode: 'live',
          scopes: ['relay:session'],
          display_prefix: 'rp_live_ab',
          last_four: 'wxyz',
        },
      }),
    );
    expect(fact).toEqual({
      type: 'api_key.created',
      projectId: 'prj_aaaaaaaaaaaaaaaaaaaa',
      tenantId: 'ten_aaaaaaaaaaaaaaaaaaaa',
      subject: 'api_key:key_aaaaaaaaaaaaaaaaaaaa',
      occurredAt: at,
      data: {
        api_key_id: 'key_aaaaaaaaaaaaaaaaaaaa',
        name: 'k',
        mode: 'live',
        scopes: ['relay:session'],
        display_prefix: 'rp_live_ab',
        last_four: 'wxyz',
      },
    });
  });

  it('skips failures, repeats that changed nothing and rotation ticks that rotated nothing', () => {
    expect(factOfAuditEvent(event({ outcome: 'failure', details: { project_id: 'prj_x' } }))).toBeUndefined();
    expect(
      factOfAuditEvent(
        event({ action: 'api_key.revoke', details: { project_id: 'prj_x', already_revoked: true } }),
      ),
    ).toBeUndefined();
    expect(
      factOfAuditEvent(
        event({ action: 'signing_key.rotate', tenantId: null, details: { rotated: false, to_kid: null } }),
      ),
    ).toBeUndefined();
    expect(factOfAuditEvent(event({ action: 'project.create' }))).toBeUndefined();
  });

  it('makes tenant-wide and platform-wide events with a null project (and a null tenant for keys)', () => {
    expect(
      factOfAuditEvent(
        event({
          action: 'plan.change',
          target: { type: 'tenant', id: 't' },
          details: { from: 'free', to: 'pro', cause: 'checkout' },
        }),
      ),
    ).toMatchObject({
      type: 'plan.changed',
      projectId: null,
      subject: 'tenant:ten_aaaaaaaaaaaaaaaaaaaa',
      data: { from: 'free', to: 'pro' },
    });
    expect(
      factOfAuditEvent(
        event({
          action: 'signing_key.rotate',
          tenantId: null,
          details: { rotated: true, to_kid: 'k2', from_kid: 'k1' },
        }),
      ),
    ).toMatchObject({
      type: 'signing_key.rotated',
      tenantId: null,
      projectId: null,
      subject: 'signing_key:k2',
      data: { kid: 'k2', previous_kid: 'k1' },
    });
  });

  it('dates a restamped event by when it happened', () => {
    const fact = factOfAuditEvent(
      event({
        action: 'credential.revoke',
        target: { type: 'credential', id: 'crd_x' },
        details: { project_id: 'prj_x', occurred_at_source: '2026-11-29T07:00:00.000Z' },
      }),
    );
    expect(fact?.occurredAt.toISOString()).toBe('2026-11-29T07:00:00.000Z');
    expect(fact?.data).toEqual({ credential_id: 'crd_x' });
  });
});

describe('notices', () => {
  it('take the type from the action, the project from the details, and drop the restamp', () => {
    const fact = factOfNotice(
      event({
        action: 'session.ended',
        target: { type: 'session', id: 'ses-1' },
        details: {
          project_id: 'prj_x',
          session_id: 'ses-1',
          reason: 'ended',
          occurred_at_source: '2026-11-29T07:59:00.000Z',
        },
      }),
    );
    expect(fact).toMatchObject({
      type: 'session.ended',
      projectId: 'prj_x',
      subject: 'session:ses-1',
      data: { session_id: 'ses-1', reason: 'ended' },
    });
    expect(fact?.data).not.toHaveProperty('occurred_at_source');
    expect(fact?.occurredAt.toISOString()).toBe('2026-11-29T07:59:00.000Z');
  });

  it('refuse what is no event type or has no tenant', () => {
    expect(factOfNotice(event({ action: 'session.exploded' }))).toBeUndefined();
    expect(factOfNotice(event({ action: 'session.started', tenantId: null }))).toBeUndefined();
  });
});

describe('a revocation of the active signing key', () => {
  it('is a revocation and a rotation to the promoted key', () => {
    const facts = factsOfAuditEvent(
      event({
        action: 'signing_key.revoke',
        tenantId: null,
        target: { type: 'signing_key', id: 'k1' },
        details: { state: 'active', promoted_kid: 'k2' },
      }),
    );
    expect(facts.map((f) => [f.type, f.subject, f.data])).toEqual([
      ['signing_key.revoked', 'signing_key:k1', { kid: 'k1', promoted_kid: 'k2' }],
      ['signing_key.rotated', 'signing_key:k2', { kid: 'k2', previous_kid: 'k1' }],
    ]);
    expect(
      factsOfAuditEvent(
        event({
          action: 'signing_key.revoke',
          tenantId: null,
          target: { type: 'signing_key', id: 'k0' },
          details: { promoted_kid: null },
        }),
      ).map((f) => f.type),
    ).toEqual(['signing_key.revoked']);
  });
});

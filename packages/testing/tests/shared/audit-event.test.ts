import { auditEventProblem, isAuditEventId, secretIn } from '@relayplane/contract/audit-event';
import { newAuditEventId } from '@relayplane/shared/audit-outbox';
import { describe, expect, it } from 'vitest';

const VALID = {
  action: 'credential.revoke',
  actor: { type: 'user', id: 'usr_0123456789abcdefghjk' },
  target: { type: 'credential', id: 'crd_0123456789abcdefghjk' },
  outcome: 'success',
  details: { display_prefix: 'svc_live_3f2a', last_four: '9c1d', nested: [{ n: 1 }] },
};

describe('audit event checks (shared by admin and the outboxes)', () => {
  it('accepts an event the trail records', () => {
    expect(auditEventProblem(VALID)).toBeUndefined();
    expect(
      auditEventProblem({ ...VALID, actor: { type: 'anonymous', id: '' }, outcome: 'denied' }),
    ).toBeUndefined();
  });

  it('names what is wrong: the action form, the actor type, the target type, the outcome, details', () => {
    expect(auditEventProblem({ ...VALID, action: 'credential' })).toBe('action must be <resource>.<verb>');
    expect(auditEventProblem({ ...VALID, action: 'Credential.Revoke' })).toBe(
      'action must be <resource>.<verb>',
    );
    expect(auditEventProblem({ ...VALID, actor: { type: 'root', id: 'x' } })).toBe(
      'actor.type is not an actor type',
    );
    expect(auditEventProblem({ ...VALID, target: { type: '', id: 'x' } })).toBe('target.type is required');
    expect(auditEventProblem({ ...VALID, outcome: 'ok' })).toBe('outcome must be success, failure or denied');
    for (const details of [null, [], 'text', 3]) {
      expect(auditEventProblem({ ...VALID, details })).toBe('details must be a JSON object');
    }
  });

  it('refuses a token or an API key anywhere in details, naming where but never repeating it', () => {
    const token = `rpu_${'ab'.repeat(36)}`;
    const key = `svc_test_${'0'.repeat(64)}`;
    expect(secretIn({ a: [{ b: `x ${token}` }] })).toBe('details.a[0].b');
    expect(secretIn({ k: key })).toBe('details.k');
    expect(secretIn({ [key]: 1 })).toBe('details');
    expect(secretIn({ display_prefix: 'svc_live_3f2a', last_four: '9c1d' })).toBeUndefined();
    const problem = auditEventProblem({ ...VALID, details: { a: [{ b: `x ${token}` }] } });
    expect(problem).toBe('details carry a secret at details.a[0].b');
    expect(problem).not.toContain(token);
  });

  it('takes the ids the outbox makes and refuses others', () => {
    expect(isAuditEventId(newAuditEventId())).toBe(true);
    expect(isAuditEventId(newAuditEventId().toUpperCase())).toBe(false);
    expect(isAuditEventId('not-a-uuid')).toBe(false);
  });
});

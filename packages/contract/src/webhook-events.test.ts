import { describe, expect, it } from 'vitest';
import { newId } from './ids.ts';
import {
  envelopeProblem,
  isWebhookEventType,
  subjectKey,
  WEBHOOK_EVENT_TYPES,
  WEBHOOK_SUBJECT_OF,
  type WebhookEnvelope,
} from './webhook-events.ts';

const envelope = (over: Partial<WebhookEnvelope> = {}): WebhookEnvelope => ({
  id: newId('webhookMessage'),
  type: 'session.ended',
  timestamp: '2026-11-29T05:00:00.000Z',
  data: {
    tenant_id: newId('tenant'),
    project_id: newId('project'),
    session_id: 'ab',
    bytes: { sent: 1, received: 2 },
  },
  ...over,
});

describe('webhook events', () => {
  it('names the issue’s eleven events, each ordered by a subject', () => {
    expect(WEBHOOK_EVENT_TYPES).toHaveLength(11);
    for (const type of WEBHOOK_EVENT_TYPES)
      expect(WEBHOOK_SUBJECT_OF[type], type).toEqual(expect.any(String));
    expect(WEBHOOK_SUBJECT_OF['session.started']).toBe(WEBHOOK_SUBJECT_OF['session.ended']);
    expect(isWebhookEventType('session.joined')).toBe(false);
    expect(subjectKey({ kind: 'session', id: 'ab' })).toBe('session:ab');
  });

  it('accepts a well-formed envelope and names what is wrong with another', () => {
    expect(envelopeProblem(envelope())).toBeUndefined();
    expect(envelopeProblem(envelope({ id: 'evt_1' }))).toMatch(/msg_/);
    expect(envelopeProblem(envelope({ type: 'x' as never }))).toMatch(/unknown event type/);
    expect(envelopeProblem(envelope({ timestamp: 'yesterday' }))).toMatch(/RFC 3339/);
  });

  it('refuses data that carries a secret, however deep', () => {
    const leaky = envelope();
    (leaky.data as Record<string, unknown>).credential = { jti: 'crd_1', token: 'eyJ…' };
    expect(envelopeProblem(leaky)).toBe('data.credential.token looks like a secret; events never carry one');
    const secret = envelope();
    (secret.data as Record<string, unknown>).signing_secret = 'whsec_…';
    expect(envelopeProblem(secret)).toMatch(/signing_secret/);
  });
});

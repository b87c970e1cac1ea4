import { timestampDate } from '@bufbuild/protobuf/wkt';
import { describe, expect, it } from 'vitest';
import { type AuditOutboxTable, deliveredMessage, RESTAMP_AFTER_MS } from './audit-outbox.ts';

const row = (occurredAt: Date): AuditOutboxTable => ({
  id: '0192f0a0-0000-7000-8000-000000000001',
  occurred_at: occurredAt,
  tenant_id: 'ten_1',
  actor_type: 'user',
  actor_id: 'usr_1',
  action: 'credential.revoke',
  target_type: 'credential',
  target_id: 'jti-1',
  outcome: 'success',
  ip: '',
  user_agent: '',
  request_id: '',
  details: { reason: 'leak' },
  attempts: 0,
  last_error: null,
  failed_at: null,
});

describe('delivering an outbox row (admin refuses an occurred_at 5 minutes off)', () => {
  const now = new Date('2026-11-28T12:00:00Z');

  it('keeps the time of an event delivered within the margin', () => {
    const at = new Date(now.getTime() - RESTAMP_AFTER_MS);
    const message = deliveredMessage(row(at), now);
    expect(message.occurredAt && timestampDate(message.occurredAt as never).getTime()).toBe(at.getTime());
    expect(JSON.parse(message.detailsJson ?? '')).toEqual({ reason: 'leak' });
  });

  it('stamps a late event with its delivery time and keeps its own as details.occurred_at_source', () => {
    const at = new Date(now.getTime() - RESTAMP_AFTER_MS - 1);
    const message = deliveredMessage(row(at), now);
    expect(message.occurredAt && timestampDate(message.occurredAt as never).getTime()).toBe(now.getTime());
    expect(JSON.parse(message.detailsJson ?? '')).toEqual({
      reason: 'leak',
      occurred_at_source: at.toISOString(),
    });
    // Within admin's bound, with a minute to spare for clocks that disagree.
    expect(RESTAMP_AFTER_MS).toBe(240_000);
  });
});

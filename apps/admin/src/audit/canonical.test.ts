import { isAuditEventId } from '@relayplane/contract/audit-event';
import { describe, expect, it } from 'vitest';
import { canonicalForm, eventHash, newEventId } from './canonical.ts';

/** The example of docs/audit.md ("The chain"): recomputed there with Python's json and hashlib. */
const EXAMPLE = {
  id: '019ab6b2-5f3c-7a01-8b2c-3d4e5f607182',
  seq: 2,
  occurredAt: new Date('2026-11-25T21:30:00.123Z'),
  tenantId: 'ten_0123456789abcdefghjk',
  actor: { type: 'user', id: 'usr_0123456789abcdefghjk' },
  action: 'project.create',
  target: { type: 'project', id: 'prj_0123456789abcdefghjk' },
  outcome: 'success',
  ip: '203.0.113.7',
  userAgent: 'curl/8.5.0',
  requestId: '3f1c2b9e-5d4a-4c3b-9a8f-7e6d5c4b3a29',
  details: { name: 'web', environment: 'production' },
  prevHash: '9b0f4c1d2e3a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9012345678',
};

describe('the canonical form of an audit event', () => {
  it('is the documented sorted-key JSON, and its SHA-256 the documented hash', () => {
    expect(canonicalForm(EXAMPLE)).toBe(
      '{"action":"project.create","actor":{"id":"usr_0123456789abcdefghjk","type":"user"},' +
        '"details":{"environment":"production","name":"web"},"id":"019ab6b2-5f3c-7a01-8b2c-3d4e5f607182",' +
        '"ip":"203.0.113.7","occurred_at":"2026-11-25T21:30:00.123Z","outcome":"success",' +
        '"prev_hash":"9b0f4c1d2e3a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9012345678",' +
        '"request_id":"3f1c2b9e-5d4a-4c3b-9a8f-7e6d5c4b3a29","seq":2,' +
        '"target":{"id":"prj_0123456789abcdefghjk","type":"project"},"tenant_id":"ten_0123456789abcdefghjk",' +
        '"user_agent":"curl/8.5.0","v":1}',
    );
    expect(eventHash(EXAMPLE)).toBe('e6011a9f98b221836aa24f9d959f5f5fcfa2cddc93473c5f1b9c04f55f8747b5');
  });

  it('changes with any field, the previous hash included', () => {
    const base = eventHash(EXAMPLE);
    expect(eventHash({ ...EXAMPLE, details: { name: 'web2', environment: 'production' } })).not.toBe(base);
    expect(eventHash({ ...EXAMPLE, prevHash: '0'.repeat(64) })).not.toBe(base);
    expect(eventHash({ ...EXAMPLE, seq: 3 })).not.toBe(base);
    expect(eventHash({ ...EXAMPLE, ip: null })).not.toBe(base);
  });

  it('makes time-ordered UUIDv7 ids', () => {
    const a = newEventId(new Date('2026-11-25T00:00:00Z'));
    const b = newEventId(new Date('2026-11-25T00:00:00.001Z'));
    expect(isAuditEventId(a)).toBe(true);
    expect(a[14]).toBe('7');
    expect(a < b).toBe(true);
    // The first 48 bits are the Unix milliseconds (2026-11-25T00:00:00Z = 0x01a210008800).
    expect(a.slice(0, 13)).toBe('01a21000-8800');
  });
});

import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { newWebhookSecret, webhookHeaders, webhookSecretKey } from './webhook-signature.ts';

describe('webhook signatures (Standard Webhooks)', () => {
  const body = JSON.stringify({
    id: 'evt_1',
    type: 'session.started',
    timestamp: '2026-11-29T05:00:00Z',
    data: {},
  });
  const now = () => Math.floor(Date.now() / 1000);

  it('signs so that the standardwebhooks library verifies the delivery', () => {
    const secret = newWebhookSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const headers = webhookHeaders([secret], 'msg_1', now(), body);
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(new Webhook(secret).verify(body, { ...headers })).toEqual(JSON.parse(body));
  });

  it('signs with both secrets during a rotation: a receiver holding either verifies', () => {
    const previous = newWebhookSecret();
    const current = newWebhookSecret();
    const headers = webhookHeaders([current, previous], 'msg_2', now(), body);
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    for (const secret of [current, previous])
      expect(new Webhook(secret).verify(body, { ...headers })).toBeTruthy();
    expect(() => new Webhook(newWebhookSecret()).verify(body, { ...headers })).toThrow();
  });

  it('is refused by the library when the body, the id or the timestamp changed', () => {
    const secret = newWebhookSecret();
    const headers = webhookHeaders([secret], 'msg_3', now(), body);
    const hook = new Webhook(secret);
    expect(() => hook.verify(`${body} `, { ...headers })).toThrow();
    expect(() => hook.verify(body, { ...headers, 'webhook-id': 'msg_4' })).toThrow();
    expect(() => hook.verify(body, { ...headers, 'webhook-timestamp': String(now() - 1) })).toThrow();
    // Older than the library's tolerance (5 minutes): refused as a replay.
    const stale = webhookHeaders([secret], 'msg_5', now() - 600, body);
    expect(() => hook.verify(body, { ...stale })).toThrow(/too old/i);
  });

  it('reads only whsec_ secrets of 24 to 64 bytes', () => {
    expect(webhookSecretKey(newWebhookSecret())?.length).toBe(32);
    expect(webhookSecretKey('whsec_')).toBeUndefined();
    expect(webhookSecretKey(`whsec_${Buffer.alloc(16).toString('base64')}`)).toBeUndefined();
    expect(webhookSecretKey(`sk_${Buffer.alloc(32).toString('base64')}`)).toBeUndefined();
    expect(() => webhookHeaders([], 'msg', now(), body)).toThrow(/needs a signing secret/);
    expect(() => webhookHeaders(['whsec_!!'], 'msg', now(), body)).toThrow(/whsec_/);
  });
});

/** Admin's webhook messages as the API's JSON (webhook-components.ts). */
import { WEBHOOK_EVENT_TYPES } from '@relayplane/contract/webhook-events';
import type { WebhookDelivery, WebhookEndpoint, WebhookNotice } from '@relayplane/proto/admin';
import { iso, oneOfValues, required } from './present.ts';
import type { Static } from './schemas.ts';
import {
  WEBHOOK_DELIVERY_STATUSES,
  type WebhookDelivery as WebhookDeliverySchema,
  type WebhookEndpoint as WebhookEndpointSchema,
  type WebhookNotice as WebhookNoticeSchema,
} from './webhook-components.ts';

export function presentWebhookEndpoint(e: WebhookEndpoint): Static<typeof WebhookEndpointSchema> {
  return {
    id: e.id,
    project_id: e.projectId,
    url: e.url,
    events: e.events.map((t) => oneOfValues(WEBHOOK_EVENT_TYPES, t, 'webhook_endpoint.events')),
    description: e.description,
    enabled: e.enabled,
    created_at: required(iso(e.createdAt), 'webhook_endpoint.created_at'),
    updated_at: required(iso(e.updatedAt), 'webhook_endpoint.updated_at'),
    failing_since: iso(e.failingSince) ?? null,
    disabled_at: iso(e.disabledAt) ?? null,
    disabled_reason: e.disabledReason || null,
    previous_secret_expires_at: iso(e.previousSecretExpiresAt) ?? null,
  };
}

export function presentWebhookDelivery(d: WebhookDelivery): Static<typeof WebhookDeliverySchema> {
  const answered = d.responseStatus !== 0;
  return {
    id: d.id,
    endpoint_id: d.endpointId,
    message_id: d.messageId,
    event_type: oneOfValues(WEBHOOK_EVENT_TYPES, d.eventType, 'webhook_delivery.event_type'),
    status: oneOfValues(WEBHOOK_DELIVERY_STATUSES, d.status, 'webhook_delivery.status'),
    attempts: d.attempts,
    created_at: required(iso(d.createdAt), 'webhook_delivery.created_at'),
    last_attempt_at: iso(d.lastAttemptAt) ?? null,
    next_attempt_at: iso(d.nextAttemptAt) ?? null,
    response_status: answered ? d.responseStatus : null,
    latency_ms: answered || d.latencyMs !== 0 ? d.latencyMs : null,
    response_body: d.responseBody || null,
    error: d.error || null,
    completed_at: iso(d.completedAt) ?? null,
  };
}

export function presentWebhookNotice(n: WebhookNotice): Static<typeof WebhookNoticeSchema> {
  return {
    type: oneOfValues(['webhook_endpoint.disabled'] as const, n.type, 'webhook_notice.type'),
    endpoint_id: n.endpointId,
    at: required(iso(n.at), 'webhook_notice.at'),
    message: n.message,
  };
}

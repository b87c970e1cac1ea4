/**
 * The shapes of the webhook routes (issue 34, docs/webhooks.md), shared like components.ts's:
 * registered with `app.addSchema` (SHARED_SCHEMAS) and referred to with `ref(...)`.
 */
import { WEBHOOK_EVENT_TYPES } from '@relayplane/contract/webhook-events';
import { dateTime, nullable, nullableDateTime, object, oneOf, Type } from './schemas.ts';

export const WEBHOOK_DELIVERY_STATUSES = ['pending', 'delivering', 'succeeded', 'failed'] as const;

export const WebhookEndpoint = object(
  {
    id: Type.String(),
    project_id: Type.String(),
    url: Type.String(),
    events: Type.Array(oneOf(WEBHOOK_EVENT_TYPES)),
    description: Type.String(),
    enabled: Type.Boolean(),
    created_at: dateTime(),
    updated_at: dateTime(),
    failing_since: nullableDateTime({
      description: 'Since when every attempt has failed; null once one succeeds.',
    }),
    disabled_at: nullableDateTime({
      description: 'When the platform disabled it (failing for the disable period).',
    }),
    disabled_reason: nullable(Type.String()),
    previous_secret_expires_at: nullableDateTime({
      description: 'During a rotation: when the previous secret stops signing (both sign until then).',
    }),
  },
  { $id: 'WebhookEndpoint' },
);

export const WebhookDelivery = object(
  {
    id: Type.String(),
    endpoint_id: Type.String(),
    message_id: Type.String({
      description: 'The `webhook-id` header and the body’s `id`: the same on every attempt.',
    }),
    event_type: oneOf(WEBHOOK_EVENT_TYPES),
    status: oneOf(WEBHOOK_DELIVERY_STATUSES),
    attempts: Type.Integer(),
    created_at: dateTime(),
    last_attempt_at: nullableDateTime(),
    next_attempt_at: nullableDateTime({ description: 'Null once the delivery is finished.' }),
    response_status: nullable(
      Type.Integer({ description: "The last attempt's HTTP status; null: no answer." }),
    ),
    latency_ms: nullable(Type.Integer()),
    response_body: nullable(Type.String({ description: 'The first KiB of the last answer.' })),
    error: nullable(
      Type.String({ description: 'Why the last attempt failed without a status, or what ended it.' }),
    ),
    completed_at: nullableDateTime(),
  },
  { $id: 'WebhookDelivery' },
);

export const WebhookNotice = object(
  {
    type: oneOf(['webhook_endpoint.disabled'] as const),
    endpoint_id: Type.String(),
    at: dateTime(),
    message: Type.String(),
  },
  { $id: 'WebhookNotice' },
);

export const WEBHOOK_SCHEMAS = [WebhookEndpoint, WebhookDelivery, WebhookNotice] as const;

/**
 * Webhook endpoints of a project and their delivery log (issue 34, docs/webhooks.md): permission
 * `webhooks:manage` (owners and admins). The signing secret is answered once, by create and
 * rotate-secret.
 */
import { WEBHOOK_EVENT_TYPES } from '@relayplane/contract/webhook-events';
import { inProject } from '../plugins/auth.ts';
import { required } from '../present.ts';
import { presentWebhookDelivery, presentWebhookEndpoint, presentWebhookNotice } from '../present-webhooks.ts';
import {
  errorResponse,
  noContent,
  nullable,
  object,
  oneOf,
  PAGE_BAD_REQUEST,
  PAGING,
  pageParams,
  pageQuery,
  pathParams,
  ref,
  Type,
} from '../schemas.ts';
import { WebhookDelivery, WebhookEndpoint, WebhookNotice } from '../webhook-components.ts';
import type { Api, RouteDeps } from './deps.ts';

const NOT_FOUND = errorResponse('The project, endpoint or delivery does not exist in the active tenant.');
const BAD_REQUEST = errorResponse(
  'A malformed body: a URL that is not https (http only to loopback where the operator allows it), that names or ' +
    'resolves to a private, loopback or link-local address; no event, or an unknown one; an unknown field.',
);
const EVENTS = Type.Array(oneOf(WEBHOOK_EVENT_TYPES), {
  minItems: 1,
  maxItems: WEBHOOK_EVENT_TYPES.length,
  description: `The events the endpoint receives: ${WEBHOOK_EVENT_TYPES.map((e) => `\`${e}\``).join(', ')}.`,
});
const URL_FIELD = Type.String({
  minLength: 1,
  maxLength: 2048,
  description: 'https://… (docs/webhooks.md, URL rules).',
});
const DESCRIPTION = Type.String({ maxLength: 500 });
const SECRET = Type.String({
  description:
    'The signing secret (`whsec_…`), shown this once: verify deliveries with it (Standard Webhooks).',
});
/** As an API key's creation answers `{api_key, key}` and a relay's `{relay, token}`. */
const WITH_SECRET = object({ webhook: ref(WebhookEndpoint), secret: SECRET });
const WEBHOOK_PARAMS = pathParams('project_id', 'webhook_id');

export function registerWebhooks(app: Api, { clients, guards }: RouteDeps): void {
  const allow = guards.allow('webhooks:manage');

  app.get(
    '/admin/v1/projects/:project_id/webhooks',
    {
      onRequest: allow,
      schema: {
        operationId: 'listWebhookEndpoints',
        summary: "List a project's webhook endpoints",
        description:
          'Oldest first. `notices` says what the platform did to an endpoint (an endpoint disabled after failing ' +
          `for the disable period), on every list while it stays so. ${PAGING}`,
        tags: ['webhooks'],
        params: pathParams('project_id'),
        querystring: pageQuery(),
        response: {
          200: object({
            webhooks: Type.Array(ref(WebhookEndpoint)),
            next_cursor: nullable(
              Type.String({ description: 'Pass as `cursor` for the next page; null on the last page.' }),
            ),
            notices: Type.Array(ref(WebhookNotice)),
          }),
          400: PAGE_BAD_REQUEST,
          404: NOT_FOUND,
        },
      },
    },
    async (request) => {
      const res = await clients.admin.listWebhookEndpoints({
        ...inProject(request),
        ...pageParams(request.query),
      });
      return {
        webhooks: res.endpoints.map(presentWebhookEndpoint),
        next_cursor: res.nextCursor || null,
        notices: res.notices.map(presentWebhookNotice),
      };
    },
  );

  app.post(
    '/admin/v1/projects/:project_id/webhooks',
    {
      onRequest: allow,
      schema: {
        operationId: 'createWebhookEndpoint',
        summary: 'Add a webhook endpoint',
        description:
          'Answers the endpoint and its signing secret, shown this once. Deliveries follow the Standard Webhooks ' +
          "specification (docs/webhooks.md). The plan's endpoint limit per project: 422 naming it.",
        tags: ['webhooks'],
        params: pathParams('project_id'),
        body: object({
          url: URL_FIELD,
          events: EVENTS,
          description: Type.Optional(DESCRIPTION),
          enabled: Type.Optional(Type.Boolean({ default: true })),
        }),
        response: {
          201: WITH_SECRET,
          400: BAD_REQUEST,
          404: NOT_FOUND,
          422: errorResponse("The plan's webhook endpoint limit is reached."),
        },
      },
    },
    async (request, reply) => {
      const res = await clients.admin.createWebhookEndpoint({
        ...inProject(request),
        url: request.body.url,
        events: request.body.events,
        description: request.body.description ?? '',
        ...(request.body.enabled !== undefined ? { enabled: request.body.enabled } : {}),
      });
      return reply.code(201).send({
        webhook: presentWebhookEndpoint(required(res.endpoint, 'createWebhookEndpoint.endpoint')),
        secret: res.secret,
      });
    },
  );

  app.get(
    '/admin/v1/projects/:project_id/webhooks/:webhook_id',
    {
      onRequest: allow,
      schema: {
        operationId: 'getWebhookEndpoint',
        summary: 'One webhook endpoint',
        tags: ['webhooks'],
        params: WEBHOOK_PARAMS,
        response: { 200: ref(WebhookEndpoint), 404: NOT_FOUND },
      },
    },
    async (request) => {
      const res = await clients.admin.getWebhookEndpoint({
        ...inProject(request),
        endpointId: request.params.webhook_id,
      });
      return presentWebhookEndpoint(required(res.endpoint, 'getWebhookEndpoint.endpoint'));
    },
  );

  app.patch(
    '/admin/v1/projects/:project_id/webhooks/:webhook_id',
    {
      onRequest: allow,
      schema: {
        operationId: 'updateWebhookEndpoint',
        summary: 'Change a webhook endpoint',
        description:
          'Fields left out stay as they are (`{}` changes nothing). `enabled: true` re-enables an endpoint the platform disabled (its ' +
          'failure streak starts again); disabling ends its unfinished deliveries as failed (redeliver them later).',
        tags: ['webhooks'],
        params: WEBHOOK_PARAMS,
        body: object({
          url: Type.Optional(URL_FIELD),
          events: Type.Optional(EVENTS),
          description: Type.Optional(DESCRIPTION),
          enabled: Type.Optional(Type.Boolean()),
        }),
        response: { 200: ref(WebhookEndpoint), 400: BAD_REQUEST, 404: NOT_FOUND },
      },
    },
    async (request) => {
      const { url, events, description, enabled } = request.body;
      const res = await clients.admin.updateWebhookEndpoint({
        ...inProject(request),
        endpointId: request.params.webhook_id,
        ...(url !== undefined ? { url } : {}),
        ...(events !== undefined ? { events: { events } } : {}),
        ...(description !== undefined ? { description } : {}),
        ...(enabled !== undefined ? { enabled } : {}),
      });
      return presentWebhookEndpoint(required(res.endpoint, 'updateWebhookEndpoint.endpoint'));
    },
  );

  app.delete(
    '/admin/v1/projects/:project_id/webhooks/:webhook_id',
    {
      onRequest: allow,
      schema: {
        operationId: 'deleteWebhookEndpoint',
        summary: 'Remove a webhook endpoint',
        description: 'Its pending deliveries and its delivery log go with it.',
        tags: ['webhooks'],
        params: WEBHOOK_PARAMS,
        response: { 204: noContent('Removed.'), 404: NOT_FOUND },
      },
    },
    async (request, reply) => {
      await clients.admin.deleteWebhookEndpoint({
        ...inProject(request),
        endpointId: request.params.webhook_id,
      });
      return reply.code(204).send();
    },
  );

  app.post(
    '/admin/v1/projects/:project_id/webhooks/:webhook_id/rotate-secret',
    {
      onRequest: allow,
      schema: {
        operationId: 'rotateWebhookSecret',
        summary: "Rotate a webhook endpoint's signing secret",
        description:
          'Answers the new secret, shown this once. Until `previous_secret_expires_at` (`grace_seconds`, default ' +
          '86400, at most 604800) every delivery is signed with both secrets, so the receiver can switch meanwhile.',
        tags: ['webhooks'],
        params: WEBHOOK_PARAMS,
        body: object({ grace_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 604_800 })) }),
        response: { 200: WITH_SECRET, 400: BAD_REQUEST, 404: NOT_FOUND },
      },
    },
    async (request) => {
      const res = await clients.admin.rotateWebhookSecret({
        ...inProject(request),
        endpointId: request.params.webhook_id,
        graceSeconds: request.body.grace_seconds ?? 0,
      });
      return {
        webhook: presentWebhookEndpoint(required(res.endpoint, 'rotateWebhookSecret.endpoint')),
        secret: res.secret,
      };
    },
  );

  app.get(
    '/admin/v1/projects/:project_id/webhooks/:webhook_id/deliveries',
    {
      onRequest: allow,
      schema: {
        operationId: 'listWebhookDeliveries',
        summary: "An endpoint's delivery log",
        description:
          'Newest first: status, attempts, the last attempt’s status, latency and first KiB of the answer. Finished ' +
          `deliveries are kept RELAYPLANE_WEBHOOKS_RETENTION_DAYS (default 30). ${PAGING}`,
        tags: ['webhooks'],
        params: WEBHOOK_PARAMS,
        querystring: pageQuery(),
        response: {
          200: object({
            deliveries: Type.Array(ref(WebhookDelivery)),
            next_cursor: nullable(
              Type.String({ description: 'Pass as `cursor` for the next page; null on the last page.' }),
            ),
          }),
          400: PAGE_BAD_REQUEST,
          404: NOT_FOUND,
        },
      },
    },
    async (request) => {
      const res = await clients.admin.listWebhookDeliveries({
        ...inProject(request),
        endpointId: request.params.webhook_id,
        ...pageParams(request.query),
      });
      return { deliveries: res.deliveries.map(presentWebhookDelivery), next_cursor: res.nextCursor || null };
    },
  );

  app.post(
    '/admin/v1/projects/:project_id/webhooks/:webhook_id/deliveries/:delivery_id/redeliver',
    {
      onRequest: allow,
      schema: {
        operationId: 'redeliverWebhook',
        summary: 'Send a delivery’s message again',
        description:
          'A new delivery of the same message (the same `webhook-id`, so receivers deduplicate), queued behind ' +
          'the unfinished deliveries of its subject.',
        tags: ['webhooks'],
        params: pathParams('project_id', 'webhook_id', 'delivery_id'),
        response: { 202: object({ delivery: ref(WebhookDelivery) }), 404: NOT_FOUND },
      },
    },
    async (request, reply) => {
      const res = await clients.admin.redeliverWebhook({
        ...inProject(request),
        endpointId: request.params.webhook_id,
        deliveryId: request.params.delivery_id,
      });
      return reply
        .code(202)
        .send({ delivery: presentWebhookDelivery(required(res.delivery, 'redeliverWebhook.delivery')) });
    },
  );
}

/**
 * Webhook endpoints of a project and their delivery log (issue 34, docs/webhooks.md).
 * Permission `webhooks:manage` (owners and admins). Every change is audited in its transaction.
 */
import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { entitlementOf } from '@relayplane/contract/entitlements';
import { AppError } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import { isWebhookEventType, WEBHOOK_EVENT_TYPES } from '@relayplane/contract/webhook-events';
import type {
  AdminService,
  WebhookDeliverySchema,
  WebhookEndpointSchema,
  WebhookNoticeSchema,
} from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { checkTarget, urlProblem } from '@relayplane/shared/webhook-target';
import { auditActor } from '../audit/actor.ts';
import type { JsonValue } from '../audit/canonical.ts';
import type { WebhookDeliveryRecord } from '../webhooks/delivery-store.ts';
import type { WebhookEndpointRecord } from '../webhooks/endpoint-store.ts';
import type { AdminDeps } from './deps.ts';
import { nextCursor, pageRequest } from './list-page.ts';
import { type Actor, requireActor } from './principal.ts';
import { PROJECT_NOT_FOUND_MESSAGE, requireProject } from './project-access.ts';

type Impl = ServiceImpl<typeof AdminService>;

export const WEBHOOK_NOT_FOUND_MESSAGE = 'no webhook endpoint has this id in the project';
export const DELIVERY_NOT_FOUND_MESSAGE = 'no delivery has this id at this endpoint';
const MAX_URL_LENGTH = 2_048;
const MAX_DESCRIPTION_LENGTH = 500;

function ts(date: Date | null) {
  return date ? timestampFromDate(date) : undefined;
}

export function webhookEndpointMessage(
  e: WebhookEndpointRecord,
): MessageInitShape<typeof WebhookEndpointSchema> {
  return {
    id: e.id,
    projectId: e.projectId,
    url: e.url,
    events: e.events,
    description: e.description,
    enabled: e.enabled,
    createdAt: timestampFromDate(e.createdAt),
    updatedAt: timestampFromDate(e.updatedAt),
    failingSince: ts(e.failingSince),
    disabledAt: ts(e.disabledAt),
    disabledReason: e.disabledReason ?? '',
    previousSecretExpiresAt: ts(e.previousSecretExpiresAt),
  };
}

export function webhookDeliveryMessage(
  d: WebhookDeliveryRecord,
): MessageInitShape<typeof WebhookDeliverySchema> {
  return {
    id: d.id,
    endpointId: d.endpointId,
    messageId: d.messageId,
    eventType: d.eventType,
    status: d.status,
    attempts: d.attempts,
    createdAt: timestampFromDate(d.createdAt),
    lastAttemptAt: ts(d.lastAttemptAt),
    // A finished delivery has no next attempt.
    nextAttemptAt: d.completedAt ? undefined : timestampFromDate(d.nextAttemptAt),
    responseStatus: d.responseStatus ?? 0,
    latencyMs: d.latencyMs ?? 0,
    responseBody: d.responseBody ?? '',
    error: d.error ?? '',
    completedAt: ts(d.completedAt),
  };
}

/** The URL checked as the sender will check it (scheme, then every address its host resolves to). */
async function checkUrl(deps: AdminDeps, raw: string): Promise<string> {
  if (raw.length === 0) throw new AppError('invalid_request', 'url is required');
  if (raw.length > MAX_URL_LENGTH)
    throw new AppError('invalid_request', `url must be at most ${MAX_URL_LENGTH} characters`);
  const policy = { allowLoopback: deps.webhookSettings.allowHttpLoopback };
  const problem = urlProblem(raw, policy);
  if (problem) throw new AppError('invalid_request', `url: ${problem}`);
  const decision = await checkTarget(raw, policy, deps.webhookResolve);
  if (!decision.ok) throw new AppError('invalid_request', `url: ${decision.reason}`);
  return decision.url.toString();
}

function checkEvents(events: readonly string[]): string[] {
  if (events.length === 0)
    throw new AppError(
      'invalid_request',
      `events must name at least one of ${WEBHOOK_EVENT_TYPES.join(', ')}`,
    );
  for (const e of events)
    if (!isWebhookEventType(e))
      throw new AppError(
        'invalid_request',
        `events: unknown event type ${JSON.stringify(e)} (known: ${WEBHOOK_EVENT_TYPES.join(', ')})`,
      );
  return [...new Set(events)];
}

function checkDescription(description: string): string {
  if (description.length > MAX_DESCRIPTION_LENGTH)
    throw new AppError('invalid_request', `description must be at most ${MAX_DESCRIPTION_LENGTH} characters`);
  return description;
}

/** What the audit trail keeps of an endpoint: never its secret. */
function endpointDetails(
  e: WebhookEndpointRecord | { projectId: string; url: string; events: string[]; enabled: boolean },
) {
  return { project_id: e.projectId, url: e.url, events: [...e.events], enabled: e.enabled } satisfies Record<
    string,
    JsonValue
  >;
}

async function requireEndpoint(deps: AdminDeps, actor: Actor, projectId: string, endpointId: string) {
  const project = await requireProject(deps, actor, projectId);
  const endpoint = await deps.webhookEndpoints.get(project.tenantId, project.id, endpointId);
  if (!endpoint) throw new AppError('not_found', WEBHOOK_NOT_FOUND_MESSAGE);
  return { project, endpoint };
}

export function createWebhookEndpoint(deps: AdminDeps): Impl['createWebhookEndpoint'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'webhooks:manage');
    const events = checkEvents(req.events);
    const description = checkDescription(req.description);
    const project = await requireProject(deps, actor, req.projectId);
    const url = await checkUrl(deps, req.url);
    const limit = entitlementOf(
      await deps.billing.getEntitlements({ tenantId: project.tenantId }),
      'max_webhook_endpoints',
    );
    const now = deps.clock.now();
    const id = newId('webhookEndpoint');
    const { secret, sealed } = deps.webhooks.newSecret(id);
    const endpoint = {
      id,
      tenantId: project.tenantId,
      projectId: project.id,
      url,
      events,
      description,
      enabled: req.enabled ?? true,
      secretSealed: sealed,
      createdAt: now,
      updatedAt: now,
    };
    const outcome = await deps.webhookEndpoints.create(endpoint, limit.value, (trx) =>
      deps.audit.record(trx, {
        action: 'webhook_endpoint.create',
        tenantId: project.tenantId,
        actor: auditActor(actor),
        target: { type: 'webhook_endpoint', id },
        details: endpointDetails(endpoint),
      }),
    );
    if (outcome === 'project_not_found') throw new AppError('not_found', PROJECT_NOT_FOUND_MESSAGE);
    if (outcome === 'limit_reached') throw limit.exceeded();
    deps.logger.info(
      { webhookEndpointId: id, projectId: project.id, ...actor.log },
      'webhook endpoint created',
    );
    return {
      endpoint: webhookEndpointMessage({
        ...endpoint,
        previousSecretSealed: null,
        previousSecretExpiresAt: null,
        failingSince: null,
        disabledAt: null,
        disabledReason: null,
      }),
      secret,
    };
  };
}

export function listWebhookEndpoints(deps: AdminDeps): Impl['listWebhookEndpoints'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'webhooks:manage');
    const paging = pageRequest(req);
    const project = await requireProject(deps, actor, req.projectId);
    const page = await deps.webhookEndpoints.list(project.tenantId, project.id, paging);
    const notices: MessageInitShape<typeof WebhookNoticeSchema>[] = page.items
      .filter((e) => !e.enabled && e.disabledAt)
      .map((e) => ({
        type: 'webhook_endpoint.disabled',
        endpointId: e.id,
        at: ts(e.disabledAt),
        message: `${e.url} was disabled: ${e.disabledReason ?? 'failing'}; fix it and PATCH enabled: true`,
      }));
    return { endpoints: page.items.map(webhookEndpointMessage), nextCursor: nextCursor(page), notices };
  };
}

export function getWebhookEndpoint(deps: AdminDeps): Impl['getWebhookEndpoint'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'webhooks:manage');
    const { endpoint } = await requireEndpoint(deps, actor, req.projectId, req.endpointId);
    return { endpoint: webhookEndpointMessage(endpoint) };
  };
}

export function updateWebhookEndpoint(deps: AdminDeps): Impl['updateWebhookEndpoint'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'webhooks:manage');
    const events = req.events ? checkEvents(req.events.events) : undefined;
    const description = req.description !== undefined ? checkDescription(req.description) : undefined;
    const project = await requireProject(deps, actor, req.projectId);
    const url = req.url !== undefined ? await checkUrl(deps, req.url) : undefined;
    const change = { url, events, description, enabled: req.enabled };
    const updated = await deps.webhookEndpoints.update(
      project.tenantId,
      project.id,
      req.endpointId,
      change,
      deps.clock.now(),
      (trx, e) =>
        deps.audit.record(trx, {
          action: 'webhook_endpoint.update',
          tenantId: project.tenantId,
          actor: auditActor(actor),
          target: { type: 'webhook_endpoint', id: e.id },
          details: {
            ...endpointDetails(e),
            changed: Object.entries(change)
              .filter(([, v]) => v !== undefined)
              .map(([k]) => k),
          },
        }),
    );
    if (!updated) throw new AppError('not_found', WEBHOOK_NOT_FOUND_MESSAGE);
    // A re-enabled endpoint's waiting deliveries may go now.
    if (req.enabled === true) deps.webhooks.kickSoon();
    return { endpoint: webhookEndpointMessage(updated) };
  };
}

export function deleteWebhookEndpoint(deps: AdminDeps): Impl['deleteWebhookEndpoint'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'webhooks:manage');
    const project = await requireProject(deps, actor, req.projectId);
    const deleted = await deps.webhookEndpoints.delete(
      project.tenantId,
      project.id,
      req.endpointId,
      (trx, e) =>
        deps.audit.record(trx, {
          action: 'webhook_endpoint.delete',
          tenantId: project.tenantId,
          actor: auditActor(actor),
          target: { type: 'webhook_endpoint', id: e.id },
          details: endpointDetails(e),
        }),
    );
    if (!deleted) throw new AppError('not_found', WEBHOOK_NOT_FOUND_MESSAGE);
    return {};
  };
}

export function rotateWebhookSecret(deps: AdminDeps): Impl['rotateWebhookSecret'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'webhooks:manage');
    const now = deps.clock.now();
    const until = deps.webhooks.graceUntil(req.graceSeconds, now);
    const project = await requireProject(deps, actor, req.projectId);
    const { secret, sealed } = deps.webhooks.newSecret(req.endpointId);
    const rotated = await deps.webhookEndpoints.rotate(
      project.tenantId,
      project.id,
      req.endpointId,
      sealed,
      until,
      now,
      (trx, e) =>
        deps.audit.record(trx, {
          action: 'webhook_endpoint.rotate_secret',
          tenantId: project.tenantId,
          actor: auditActor(actor),
          target: { type: 'webhook_endpoint', id: e.id },
          details: { project_id: e.projectId, previous_secret_expires_at: until.toISOString() },
        }),
    );
    if (!rotated) throw new AppError('not_found', WEBHOOK_NOT_FOUND_MESSAGE);
    return { endpoint: webhookEndpointMessage(rotated), secret };
  };
}

export function listWebhookDeliveries(deps: AdminDeps): Impl['listWebhookDeliveries'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'webhooks:manage');
    const paging = pageRequest(req);
    const { endpoint } = await requireEndpoint(deps, actor, req.projectId, req.endpointId);
    const page = await deps.webhookDeliveries.list(endpoint.id, paging);
    return { deliveries: page.items.map(webhookDeliveryMessage), nextCursor: nextCursor(page) };
  };
}

export function redeliverWebhook(deps: AdminDeps): Impl['redeliverWebhook'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'webhooks:manage');
    const { project, endpoint } = await requireEndpoint(deps, actor, req.projectId, req.endpointId);
    const delivery = await deps.webhookDeliveries.get(endpoint.id, req.deliveryId);
    if (!delivery) throw new AppError('not_found', DELIVERY_NOT_FOUND_MESSAGE);
    const again = await deps.audit.change(async (trx) => {
      const created = await deps.webhookDeliveries.redeliver(
        trx,
        delivery,
        project.tenantId,
        deps.clock.now(),
      );
      await deps.audit.record(trx, {
        action: 'webhook_delivery.redeliver',
        tenantId: project.tenantId,
        actor: auditActor(actor),
        target: { type: 'webhook_delivery', id: created.id },
        details: {
          project_id: project.id,
          endpoint_id: endpoint.id,
          message_id: delivery.messageId,
          of: delivery.id,
        },
      });
      return created;
    });
    deps.webhooks.kickSoon();
    return { delivery: webhookDeliveryMessage(again) };
  };
}

/**
 * The response shapes the CLI reads, as the gateway declares them: aliases of the types
 * generated from its OpenAPI document (gen/api.ts, `pnpm generate:api`). A field renamed or
 * removed in the gateway fails the CLI's typecheck here or where the CLI reads it.
 */
import type { components, paths } from './gen/api.ts';

type Schemas = components['schemas'];
type Method = 'get' | 'put' | 'post' | 'delete' | 'patch';
/** The responses of `method path` by status; none (so no status fits) when the path has no such method. */
type Responses<P extends keyof paths, M extends Method> = paths[P][M] extends { responses: infer R }
  ? R
  : Record<never, never>;

/**
 * The JSON body the gateway answers `method path` with, for `status`. A path, method or status
 * the document does not declare fails the typecheck here.
 */
export type ResponseBody<
  P extends keyof paths,
  M extends Method,
  S extends keyof Responses<P, M>,
> = Responses<P, M>[S] extends { content: { 'application/json': infer B } } ? B : never;

export type User = Schemas['User'];
export type Tenant = Schemas['Tenant'];
/** A person: a login or a CLI token from the device flow. */
export type UserSession = Schemas['Session'];
export type Bot = Schemas['Bot'];
export type IdentityToken = Schemas['IdentityToken'];
/** A machine: a bot token, or an identity token acting as its bot. */
export type BotSession = Schemas['BotSession'];
export type AnySession = ResponseBody<'/admin/v1/auth/session', 'get', 200>;

export type Project = Schemas['Project'];
export type ApiKey = Schemas['ApiKey'];
export type BotKey = Schemas['BotKey'];

export type Relay = Schemas['Relay'];
export type RegisteredRelay = Schemas['RegisteredRelay'];
export type RelayCredential = Schemas['RelayCredential'];

export type SigningKey = Schemas['SigningKey'];
/** The signing keys as the CLI shows them: every page's keys, without the paging cursor. */
export type SigningKeyList = Omit<ResponseBody<'/admin/v1/signing-keys', 'get', 200>, 'next_cursor'>;
/** `POST /admin/v1/signing-keys/{kid}/revoke`. */
export type SigningKeyRevocation = ResponseBody<'/admin/v1/signing-keys/{kid}/revoke', 'post', 200>;
/** `POST /admin/v1/signing-keys/rotate`: 200 rotated now, 202 pending until the next key is eligible. */
export type SigningKeyRotation =
  | ResponseBody<'/admin/v1/signing-keys/rotate', 'post', 200>
  | ResponseBody<'/admin/v1/signing-keys/rotate', 'post', 202>;

export type ApiKeyCreated = ResponseBody<'/admin/v1/projects/{project_id}/api-keys', 'post', 201>;
export type BotKeyCreated = ResponseBody<'/admin/v1/projects/{project_id}/bots/{bot_id}/keys', 'post', 201>;
export type CredentialRevocation = ResponseBody<'/admin/v1/credentials/{jti}/revoke', 'post', 200>;

export type MfaStatus = ResponseBody<'/admin/v1/auth/mfa', 'get', 200>;
export type TotpEnrollment = ResponseBody<'/admin/v1/auth/mfa/totp', 'post', 200>;
export type TotpConfirmation = ResponseBody<'/admin/v1/auth/mfa/totp/confirm', 'post', 200>;
export type RecoveryCodes = ResponseBody<'/admin/v1/auth/mfa/recovery-codes', 'post', 200>;

/** One session as `GET /admin/v1/auth/sessions` lists it (never a token). */
export type SessionInfo = ResponseBody<'/admin/v1/auth/sessions', 'get', 200>['sessions'][number];
export type OtherSessionsRevocation = ResponseBody<'/admin/v1/auth/sessions/revoke-others', 'post', 200>;

/** One relay session as `GET /admin/v1/projects/{project_id}/sessions` lists it (no credential). */
export type RelaySession = ResponseBody<
  '/admin/v1/projects/{project_id}/sessions',
  'get',
  200
>['sessions'][number];
export type EndedRelaySession = ResponseBody<'/admin/v1/sessions/{session_id}/end', 'post', 200>;

/** One event as `GET /admin/v1/audit-events` answers it. */
export type AuditEvent = ResponseBody<'/admin/v1/audit-events', 'get', 200>['events'][number];
export type AuditVerification = ResponseBody<'/admin/v1/audit-events/verify', 'get', 200>;
export type AuditCheckpoint = ResponseBody<
  '/admin/v1/audit-events/checkpoints',
  'get',
  200
>['checkpoints'][number];
export type AuditKeys = ResponseBody<'/v1/audit/keys', 'get', 200>;
export type WebhookEndpoint = Schemas['WebhookEndpoint'];
export type WebhookDelivery = Schemas['WebhookDelivery'];
export type WebhookCreated = ResponseBody<'/admin/v1/projects/{project_id}/webhooks', 'post', 201>;
export type WebhookRedelivered = ResponseBody<
  '/admin/v1/projects/{project_id}/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver',
  'post',
  202
>;

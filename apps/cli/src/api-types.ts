/**
 * The response shapes the CLI reads, named from the types generated from the gateway's OpenAPI
 * document (gen/api.ts, `pnpm generate:api`): a field the gateway renames or drops breaks the
 * CLI's typecheck. Types only: the CLI depends on no server package at run time.
 */
import type { components, operations } from './gen/api.ts';

type Schemas = components['schemas'];
type JsonOf<R> = R extends { content: { 'application/json': infer T } } ? T : never;

export type User = Schemas['User'];
export type Tenant = Schemas['Tenant'];
/** A user's session (`authenticated_by`: how it signed in). */
export type UserSession = Schemas['Session'];
export type Bot = Schemas['Bot'];
export type IdentityToken = Schemas['IdentityToken'];
/** A machine: a bot token, or an identity token acting as its bot. */
export type BotSession = Schemas['BotSession'];
export type AnySession = UserSession | BotSession;
export type Project = Schemas['Project'];
export type ApiKey = Schemas['ApiKey'];
export type BotKey = Schemas['BotKey'];
export type Relay = Schemas['Relay'];
export type RegisteredRelay = Schemas['RegisteredRelay'];
export type RelayCredential = Schemas['RelayCredential'];
export type SigningKey = Schemas['SigningKey'];
/** `GET /admin/v1/signing-keys`. */
export type SigningKeyList = JsonOf<operations['listSigningKeys']['responses'][200]>;
/** `POST /admin/v1/signing-keys/{kid}/revoke`. */
export type SigningKeyRevocation = JsonOf<operations['revokeSigningKey']['responses'][200]>;

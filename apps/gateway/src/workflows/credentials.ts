/**
 * A project's credentials and relay sessions, which the issuer holds, behind the project access admin decides
 * (docs/CONTRIBUTING.md, "Use cases across services"): another tenant's project is 404 before
 * the issuer is asked anything.
 */
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { AppError } from '@relayplane/contract/errors';
import type { Principal } from '@relayplane/proto/admin';
import type { ListCredentialsResponse, ListRelaySessionsResponse } from '@relayplane/proto/issuer';
import type { AdminClient, IssuerClient } from '../clients.ts';
import { parseRfc3339 } from '../present.ts';

interface ProjectScope {
  principal: Principal;
  tenantId: string;
  projectId: string;
}

/**
 * The project's API keys with id `keyId` (none or one; empty: the first one). One look-up answers
 * both the project (404 for another tenant's) and the key; looked up by id, not by paging.
 */
async function keysOf(admin: AdminClient, scope: ProjectScope, keyId = ''): Promise<Set<string>> {
  const { apiKeys } = await admin.listApiKeys({
    principal: scope.principal,
    projectId: scope.projectId,
    keyId,
    limit: 1,
  });
  return new Set(apiKeys.map((k) => k.id));
}

/**
 * Revokes the project's credentials of `apiKeyId` and/or issued before `issuedBefore` (RFC 3339):
 * the project first (404 for another tenant's, whatever else is asked), then `issuedBefore`
 * (400 unless a date-time), then the key if named (404 unless it is the project's), then the
 * issuer. Answers how many this call revoked.
 */
export async function revokeProjectCredentials(
  clients: { admin: AdminClient; issuer: IssuerClient },
  input: ProjectScope & { apiKeyId: string | undefined; issuedBefore: string | undefined },
): Promise<number> {
  const keys = await keysOf(clients.admin, input, input.apiKeyId ?? '');
  const issuedBefore = input.issuedBefore === undefined ? undefined : parseRfc3339(input.issuedBefore);
  if (input.issuedBefore !== undefined && issuedBefore === undefined) {
    throw new AppError('invalid_request', 'issued_before must be an RFC 3339 date-time');
  }
  if (input.apiKeyId !== undefined && !keys.has(input.apiKeyId)) {
    throw new AppError('not_found', 'API key not found');
  }
  const res = await clients.issuer.revokeCredentials({
    tenantId: input.tenantId,
    projectId: input.projectId,
    apiKeyId: input.apiKeyId ?? '',
    issuedBefore: issuedBefore === undefined ? undefined : timestampFromMs(issuedBefore),
  });
  return res.revoked;
}

/** A page of the project's credentials, once the project is known to be the caller's (404). */
export async function listProjectCredentials(
  clients: { admin: AdminClient; issuer: IssuerClient },
  input: ProjectScope & { apiKeyId: string; active: boolean; limit: number; cursor: string },
): Promise<ListCredentialsResponse> {
  await keysOf(clients.admin, input);
  return clients.issuer.listCredentials({
    tenantId: input.tenantId,
    projectId: input.projectId,
    apiKeyId: input.apiKeyId,
    active: input.active,
    limit: input.limit,
    cursor: input.cursor,
  });
}

/** A page of the project's relay sessions, once the project is known to be the caller's (404). */
export async function listProjectRelaySessions(
  clients: { admin: AdminClient; issuer: IssuerClient },
  input: ProjectScope & { state: string; limit: number; cursor: string },
): Promise<ListRelaySessionsResponse> {
  await keysOf(clients.admin, input);
  return clients.issuer.listRelaySessions({
    tenantId: input.tenantId,
    projectId: input.projectId,
    state: input.state,
    limit: input.limit,
    cursor: input.cursor,
  });
}

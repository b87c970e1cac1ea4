/**
 * What an issuance request may ask for, decided before any slot is reserved or key touched.
 * Pure: the gateway checks the same bounds against the tenant's plan first, but the issuer
 * answers for its own invariants whoever calls it.
 */
import {
  CREDENTIAL_SCOPES,
  CREDENTIAL_TTL_SECONDS,
  DEFAULT_CREDENTIAL_SCOPES,
  isCredentialScope,
  isKeyMode,
  KEY_MODE_NAMES,
  type KeyMode,
} from '@relayplane/shared/contract';
import { AppError } from '@relayplane/shared/errors';
import { isId } from '@relayplane/shared/ids';
import { isRegion, REGION_MESSAGE } from '../relays/relay-fields.ts';

export interface IssueInput {
  tenantId: string;
  projectId: string;
  apiKeyId: string;
  mode: string;
  scopes: readonly string[];
  /** 0: the default (600). */
  ttlSeconds: number;
  /** Empty: none. */
  region: string;
  /** The tenant plan's cap, as the gateway knows it. */
  maxConcurrentConnections: number;
}

export interface IssueRequest {
  tenantId: string;
  projectId: string;
  apiKeyId: string;
  mode: KeyMode;
  /** The `scope` claim: the asked scopes without repeats, space-separated. */
  scope: string;
  ttlSeconds: number;
  region: string | undefined;
  cap: number;
}

/**
 * The request as it will be issued, or an `invalid_request` naming the first bad field.
 * `maxTtlSeconds` is the key policy's longest credential lifetime; the contract's bound
 * applies on top of it.
 */
export function issueRequest(input: IssueInput, maxTtlSeconds: number): IssueRequest {
  const bad = (message: string) => new AppError('invalid_request', message);
  if (!isId('tenant', input.tenantId)) throw bad('tenant_id must be a tenant id (ten_…)');
  if (!isId('project', input.projectId)) throw bad('project_id must be a project id (prj_…)');
  if (!isId('apiKey', input.apiKeyId)) throw bad('api_key_id must be an API key id (key_…)');
  if (!isKeyMode(input.mode)) throw bad(`mode must be ${KEY_MODE_NAMES.map((m) => `"${m}"`).join(' or ')}`);
  const scopes = input.scopes.length ? [...new Set(input.scopes)] : [...DEFAULT_CREDENTIAL_SCOPES];
  for (const s of scopes) {
    if (!isCredentialScope(s)) {
      throw bad(`unknown scope "${s.slice(0, 64)}" (known: ${CREDENTIAL_SCOPES.join(', ')})`);
    }
  }
  const maxTtl = Math.min(CREDENTIAL_TTL_SECONDS.max, maxTtlSeconds);
  const ttlSeconds =
    input.ttlSeconds === 0 ? Math.min(CREDENTIAL_TTL_SECONDS.default, maxTtl) : input.ttlSeconds;
  if (!Number.isInteger(ttlSeconds) || ttlSeconds < CREDENTIAL_TTL_SECONDS.min || ttlSeconds > maxTtl) {
    throw bad(`ttl_seconds must be between ${CREDENTIAL_TTL_SECONDS.min} and ${maxTtl}`);
  }
  const region = requestedRegion(input.region);
  const cap = input.maxConcurrentConnections;
  if (!Number.isInteger(cap) || cap < 0) throw bad('max_concurrent_connections must not be negative');
  return {
    tenantId: input.tenantId,
    projectId: input.projectId,
    apiKeyId: input.apiKeyId,
    mode: input.mode,
    scope: scopes.join(' '),
    ttlSeconds,
    region,
    cap,
  };
}

/** A client's preferred region (case and surrounding space ignored); undefined: none asked. */
export function requestedRegion(raw: string): string | undefined {
  const region = raw.trim().toLowerCase();
  if (region && !isRegion(region)) throw new AppError('invalid_request', REGION_MESSAGE);
  return region || undefined;
}

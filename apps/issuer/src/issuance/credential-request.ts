/**
 * What an issuance request gets, decided before any slot is reserved or key touched. Pure. The
 * decision is `decideIssuance` (@relayplane/contract/issuance-policy), with the policy billing
 * worded and the gateway sent along: the gateway decided the same to refuse early, the issuer
 * decides as the authority whoever calls it, and adds its own invariants (ids, the key mode, the
 * key policy's longest credential lifetime).
 */
import {
  CREDENTIAL_TTL_SECONDS,
  isKeyMode,
  KEY_MODE_NAMES,
  type KeyMode,
} from '@relayplane/contract/contract';
import { type CredentialPaths, decidePaths, rolesOfScopes } from '@relayplane/contract/credential-paths';
import { AppError } from '@relayplane/contract/errors';
import { isId } from '@relayplane/contract/ids';
import {
  capReached,
  checkPolicy,
  decideIssuance,
  type IssuancePolicy,
  type PolicyLimit,
} from '@relayplane/contract/issuance-policy';
import { isRegion, REGION_MESSAGE } from '../relays/relay-fields.ts';

/** An issuance request as the gateway sends it (structurally IssueCredentialRequest). */
export interface IssueInput {
  tenantId: string;
  projectId: string;
  apiKeyId: string;
  mode: string;
  scopes: readonly string[];
  /** 0: the default. */
  ttlSeconds: number;
  /** Empty: none. */
  region: string;
  /** The tenant's policy as billing worded it; absent from a gateway from before it. */
  policy?: { planId: string; maxConcurrentConnections?: PolicyLimit; maxCredentialTtlSeconds?: PolicyLimit };
  /** The cap alone, read only without `policy` (issuer.proto: deprecated, with its removal plan). */
  maxConcurrentConnections: number;
  /** The paths the gateway decided; absent (a gateway from before them): the whole project. */
  paths?: { root: string; publish: readonly string[]; subscribe: readonly string[] } | undefined;
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
  /** What the credential may publish and subscribe to, within its project. */
  paths: CredentialPaths;
  cap: number;
  /** The refusal at the cap, in the policy's words. */
  capReached(): AppError;
}

/**
 * The request as it will be issued, or an `invalid_request` (`forbidden` is the gateway's: the
 * issuer does not hold the key's grants) naming the first bad field. `maxTtlSeconds` is the key
 * policy's longest credential lifetime, a bound on top of the plan's.
 */
export function issueRequest(input: IssueInput, maxTtlSeconds: number): IssueRequest {
  const bad = (message: string) => new AppError('invalid_request', message);
  if (!isId('tenant', input.tenantId)) throw bad('tenant_id must be a tenant id (ten_…)');
  if (!isId('project', input.projectId)) throw bad('project_id must be a project id (prj_…)');
  if (!isId('apiKey', input.apiKeyId)) throw bad('api_key_id must be an API key id (key_…)');
  if (!isKeyMode(input.mode)) throw bad(`mode must be ${KEY_MODE_NAMES.map((m) => `"${m}"`).join(' or ')}`);
  const maxTtl = Math.min(CREDENTIAL_TTL_SECONDS.max, maxTtlSeconds);
  const policy = policyOf(input, maxTtl);
  const decision = decideIssuance({ scopes: input.scopes, ttlSeconds: input.ttlSeconds }, policy);
  if (!decision.ok) throw new AppError(decision.code, decision.message);
  const { grant } = decision;
  // The default lowered to the key policy's bound; an asked lifetime over it is refused.
  const ttlSeconds = input.ttlSeconds === 0 ? Math.min(grant.ttlSeconds, maxTtl) : grant.ttlSeconds;
  if (ttlSeconds > maxTtl) throw bad(ttlBoundMessage(maxTtl));
  // The gateway decided them with the key's ceiling; checked again here against the scopes.
  const paths = decidePaths(input.paths ?? {}, rolesOfScopes(grant.scopes));
  if (!paths.ok) throw bad(paths.message);
  return {
    tenantId: input.tenantId,
    projectId: input.projectId,
    apiKeyId: input.apiKeyId,
    mode: input.mode,
    scope: grant.scopes.join(' '),
    ttlSeconds,
    region: requestedRegion(input.region),
    paths: paths.paths,
    cap: grant.cap,
    capReached: () => capReached(policy),
  };
}

/**
 * The request's policy; without one (a gateway from before it), the cap it sent, refused in the
 * issuer's words, and the lifetime bounded by the key policy alone, as the issuer did then.
 */
function policyOf(input: IssueInput, maxTtl: number): IssuancePolicy {
  const sent = input.policy;
  if (sent) {
    const policy = {
      planId: sent.planId,
      maxConcurrentConnections: sent.maxConcurrentConnections ?? { value: -1, exceededMessage: '' },
      maxCredentialTtlSeconds: sent.maxCredentialTtlSeconds ?? { value: -1, exceededMessage: '' },
    };
    const problem = checkPolicy(policy);
    if (problem) throw new AppError('invalid_request', problem);
    return policy;
  }
  const cap = input.maxConcurrentConnections;
  if (!Number.isInteger(cap) || cap < 0) {
    throw new AppError('invalid_request', 'max_concurrent_connections must not be negative');
  }
  return {
    planId: '',
    maxConcurrentConnections: {
      value: cap,
      exceededMessage: `concurrent connection limit reached (${cap}); upgrade the plan for more`,
    },
    maxCredentialTtlSeconds: { value: maxTtl, exceededMessage: ttlBoundMessage(maxTtl) },
  };
}

function ttlBoundMessage(maxTtl: number): string {
  return `ttl_seconds must be between ${CREDENTIAL_TTL_SECONDS.min} and ${maxTtl}`;
}

/** A client's preferred region (case and surrounding space ignored); undefined: none asked. */
export function requestedRegion(raw: string): string | undefined {
  const region = raw.trim().toLowerCase();
  if (region && !isRegion(region)) throw new AppError('invalid_request', REGION_MESSAGE);
  return region || undefined;
}

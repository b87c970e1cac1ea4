import { hash } from 'node:crypto';
import { BlockList, isIPv4 } from 'node:net';
import { AppError, INVALID_TOKEN_MESSAGE, MFA_ENROLMENT_REQUIRED_MESSAGE } from '@relayplane/contract/errors';
import { parseToken } from '@relayplane/contract/tokens';
import {
  type ApiKey,
  type Bot,
  type IdentityToken,
  type Principal,
  PrincipalKind,
  type Session,
} from '@relayplane/proto/admin';
import type { Relay } from '@relayplane/proto/issuer';
import { deny, type Permission, subjectOf } from '@relayplane/shared/iam';
import { type AuditActorRef, currentRequestContext } from '@relayplane/shared/request-context';
import { setActiveSpanAttribute } from '@relayplane/shared/tracing';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AdminClient, IssuerClient } from '../clients.ts';
import type { TtlCache } from '../ttl-cache.ts';
import { forwardedClientCertificate } from './client-certificate.ts';
import { requireCsrf, sessionCookieOf } from './csrf.ts';

export interface Authenticated {
  principal: Principal;
  /** Set when a user session token (or a CLI token) authenticated the request. */
  session: Session | undefined;
  /** Set when a bot token or an identity token (its identity) authenticated the request. */
  bot: Bot | undefined;
  /** Set when an identity token authenticated the request. */
  identityToken: IdentityToken | undefined;
  /** How the credential came: the `Authorization` header or the session cookie. */
  via: 'bearer' | 'cookie';
}

/** A valid bot or identity token on an operation that needs a user: 403, the token itself is fine. */
const BOT_TOKEN_REFUSED_MESSAGE =
  'this operation needs a user session; bot tokens and identity tokens are not accepted';
/** Identity token creation: a bot token is refused (contract: a user session or an identity token only). */
const IDENTITY_CALLER_MESSAGE =
  'identity tokens can be created with a user session or an identity token only; bot tokens are not accepted';
/** An API key where a bearer token is needed: the key is valid or not, it is the wrong kind (403). */
const API_KEY_REFUSED_MESSAGE =
  'API keys authenticate credential issuance only; this operation needs a bearer token';

export interface ApiKeyAuth {
  apiKey: ApiKey;
  projectEnvironment: string;
  /** The project's IP allowlist, built once per verification; undefined: any IP. */
  allowlist: BlockList | undefined;
}

/** A BlockList of normalised CIDRs (as admin stores them). */
function allowlistOf(cidrs: readonly string[]): BlockList | undefined {
  if (cidrs.length === 0) return undefined;
  const list = new BlockList();
  for (const cidr of cidrs) {
    const [address = '', prefix = ''] = cidr.split('/');
    list.addSubnet(address, Number(prefix), isIPv4(address) ? 'ipv4' : 'ipv6');
  }
  return list;
}

/** The client address as a family-tagged pair; IPv4-mapped IPv6 is treated as IPv4. */
function clientAddress(ip: string): [string, 'ipv4' | 'ipv6'] {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped?.[1]) return [mapped[1], 'ipv4'];
  return [ip, isIPv4(ip) ? 'ipv4' : 'ipv6'];
}

declare module 'fastify' {
  interface FastifyRequest {
    auth: Authenticated | null;
    apiKey: ApiKeyAuth | null;
    relay: Relay | null;
  }
}

/** `svc_live_` / `svc_test_` + 64 lowercase hex: anything else is rejected before any lookup. */
export const API_KEY_PATTERN = /^svc_(live|test)_[0-9a-f]{64}$/;

function apiKeyHash(key: string): string {
  return hash('sha256', key, 'hex');
}

const BEARER = /^Bearer ([\x21-\x7e]+)$/i;

/** The bearer token of a request, or a 401 that says what is wrong. Never touches a database. */
function bearerToken(request: FastifyRequest): string {
  const header = request.headers.authorization;
  if (header === undefined || header === '') {
    if (request.headers['x-api-key'] !== undefined) throw new AppError('forbidden', API_KEY_REFUSED_MESSAGE);
    throw new AppError('unauthenticated', 'missing bearer token: send "Authorization: Bearer <token>"');
  }
  const match = BEARER.exec(header);
  if (!match?.[1])
    throw new AppError('unauthenticated', 'malformed Authorization header: expected "Bearer <token>"');
  // Unknown prefix or failed checksum: rejected here, without a lookup.
  if (parseToken(match[1]) === undefined) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
  return match[1];
}

const BASIC = /^Basic ([A-Za-z0-9+/]+={0,2})$/i;

/**
 * A relay's node token: `Authorization: Bearer rpr_…`, or HTTP Basic `<relay_id>:<token>` (what
 * an HTTP client sends for a URL with userinfo, as moq-relay's `--auth-url` does).
 */
function relayNodeCredential(request: FastifyRequest): { token: string; user?: string } {
  const basic = BASIC.exec(request.headers.authorization ?? '');
  if (!basic?.[1]) return { token: bearerToken(request) };
  const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0)
    throw new AppError('unauthenticated', 'malformed Basic credentials: expected <relay_id>:<token>');
  let user: string;
  try {
    user = decodeURIComponent(decoded.slice(0, colon));
  } catch {
    throw new AppError(
      'unauthenticated',
      'malformed Basic credentials: the user is not percent-encoded text',
    );
  }
  return { token: decoded.slice(colon + 1), ...(user === '' ? {} : { user }) };
}

/**
 * The session credential of a request: the bearer header when one is sent (it wins over a
 * cookie), else the session cookie. A cookie only ever holds a user session token.
 */
function sessionCredential(request: FastifyRequest): { token: string; via: 'bearer' | 'cookie' } {
  const header = request.headers.authorization;
  const cookie = sessionCookieOf(request);
  if ((header === undefined || header === '') && cookie !== undefined && cookie !== '') {
    if (parseToken(cookie) !== 'userSession') throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
    return { token: cookie, via: 'cookie' };
  }
  return { token: bearerToken(request), via: 'bearer' };
}

/**
 * What a guard asks of a request, for the route inventory and the OpenAPI document (openapi.ts
 * derives each route's security scheme and its 401 and 403 answers from it).
 */
export interface GuardInfo {
  /**
   * The OpenAPI security scheme. `bearerAuth` guards accept a user session, and so also the
   * session cookie (CSRF-checked).
   */
  scheme: 'bearerAuth' | 'apiKey' | 'relayNodeToken';
  /**
   * It also takes HTTP Basic `<relay id>:<node token>` (the relay auth endpoint: what moq-relay
   * sends for an auth URL with userinfo); documented as the `relayNodeBasic` scheme.
   */
  basic?: true;
  /** The IAM permission the guard checks (docs/iam.md), if any. */
  permission?: Permission;
}

const GUARD = Symbol('guard');

function guard<T extends object>(info: GuardInfo, check: T): T {
  return Object.assign(check, { [GUARD]: info });
}

/** What a route hook asks of a request, when it is one of these guards. */
export function guardOf(hook: unknown): GuardInfo | undefined {
  return typeof hook === 'function' && GUARD in hook ? (hook[GUARD] as GuardInfo) : undefined;
}

function machineKind(kind: PrincipalKind): boolean {
  return kind === PrincipalKind.BOT || kind === PrincipalKind.IDENTITY;
}

/** What a member of a tenant that requires a second factor may do without one (docs/iam.md). */
export const MFA_ENROLMENT_ROUTES: ReadonlySet<string> = new Set([
  'GET /admin/v1/auth/session',
  'POST /admin/v1/auth/logout',
  'GET /admin/v1/auth/sessions',
  'DELETE /admin/v1/auth/sessions/:id',
  'POST /admin/v1/auth/sessions/revoke-others',
  'GET /admin/v1/auth/mfa',
  'POST /admin/v1/auth/mfa/totp',
  'POST /admin/v1/auth/mfa/totp/confirm',
]);

export interface AuthGuards {
  /**
   * A project API key in `X-API-Key`. Callback-style: a key verified within the cache lifetime
   * passes without a promise or a microtask (the issuance hot path).
   */
  apiKey(request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void): void;
  /** A relay node token (`rpr_…`) as bearer. */
  relayNode(request: FastifyRequest): Promise<void>;
  /**
   * The relay auth endpoint's: the node token as bearer, or HTTP Basic `<relay_id>:<token>`
   * (moq-relay's `--auth-url` with userinfo), or (without Authorization) a client certificate
   * registered for the relay, forwarded by a trusted TLS-terminating proxy.
   */
  relaySession(request: FastifyRequest): Promise<void>;
  /**
   * A user session token (or a CLI token), as bearer or as the session cookie (then
   * state-changing methods need `X-CSRF-Token`). A valid bot or identity token: 403.
   */
  session(request: FastifyRequest): Promise<void>;
  /** Any authenticated principal: a user session (bearer or cookie), a CLI, bot or identity token. */
  principal(request: FastifyRequest): Promise<void>;
  /**
   * Any principal holding the IAM permission (docs/iam.md; decided by @relayplane/shared/iam):
   * else 403 naming it. Admin decides again with the role it re-reads.
   */
  allow(permission: Permission): (request: FastifyRequest) => Promise<void>;
  /** `allow`, minus bot tokens (403): identity token routes take a user session or an identity token. */
  identityCaller(permission: Permission): (request: FastifyRequest) => Promise<void>;
  /** A platform administrator (operator). 403 for everyone else. */
  platformAdmin(request: FastifyRequest): Promise<void>;
}

export interface GuardCaches {
  apiKeys: TtlCache<string, ApiKeyAuth>;
  relays: TtlCache<string, Relay>;
}

export function authGuards(
  admin: AdminClient,
  issuer: IssuerClient,
  caches: GuardCaches,
  /** Whether a peer is a trusted proxy (GATEWAY_TRUSTED_PROXIES): its forwarded client certificates are believed. */
  trustedProxy: (address: string | undefined) => boolean = () => false,
): AuthGuards {
  /** The registered relay a node token (`rpr_…`) belongs to (cached briefly); else 401. */
  async function relayOf(token: string): Promise<Relay> {
    if (parseToken(token) !== 'relayNode') throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
    return caches.relays.get(token, async () => {
      const res = await issuer.authenticateRelay({ token });
      if (!res.relay) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
      return res.relay;
    });
  }

  /** The registered relay a forwarded client certificate (its SHA-256) belongs to (cached briefly); else 401. */
  async function relayOfCertificate(sha256: string): Promise<Relay> {
    return caches.relays.get(`cert:${sha256}`, async () => {
      const res = await issuer.authenticateRelay({ clientCertificateSha256: sha256 });
      if (!res.relay) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
      return res.relay;
    });
  }

  const principal = guard({ scheme: 'bearerAuth' }, async (request: FastifyRequest) => {
    const { token, via } = sessionCredential(request);
    // `via`: a login session the cookie authenticates is listed as a browser session.
    const res = await admin.authenticate({ token, via });
    if (!res.principal) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
    if (via === 'cookie') {
      if (!res.session || machineKind(res.principal.kind)) {
        throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
      }
      // After authentication: an expired or logged-out cookie answers 401, not 403.
      requireCsrf(request, token);
    }
    // A tenant that requires a second factor: a member without one may only enrol (and read
    // their session, log out, end their sessions); everything else is 403 naming the fix.
    if (
      res.mfaEnrolmentRequired &&
      !MFA_ENROLMENT_ROUTES.has(`${request.method} ${request.routeOptions.url}`)
    ) {
      throw new AppError('forbidden', MFA_ENROLMENT_REQUIRED_MESSAGE);
    }
    request.auth = {
      principal: res.principal,
      session: res.session,
      bot: res.bot,
      identityToken: res.identityToken,
      via,
    };
    const context = currentRequestContext();
    if (context) context.actor = actorOf(res.principal, res.session);
  });
  const session = guard({ scheme: 'bearerAuth' }, async (request: FastifyRequest) => {
    await principal(request);
    if (request.auth && machineKind(request.auth.principal.kind)) {
      throw new AppError('forbidden', BOT_TOKEN_REFUSED_MESSAGE);
    }
  });
  const allow = (permission: Permission, refuseBots = false) =>
    guard({ scheme: 'bearerAuth', permission }, async (request: FastifyRequest) => {
      await principal(request);
      const p = principalOf(request);
      if (refuseBots && p.kind === PrincipalKind.BOT)
        throw new AppError('forbidden', IDENTITY_CALLER_MESSAGE);
      const denied = deny(subjectOf(p), permission);
      if (denied) throw new AppError('forbidden', denied);
    });
  return {
    session,
    principal,
    allow: (permission) => allow(permission),
    identityCaller: (permission) => allow(permission, true),
    apiKey: guard({ scheme: 'apiKey' }, (request, _reply, done) => {
      const header = request.headers['x-api-key'];
      if (header === undefined || header === '') {
        throw new AppError('unauthenticated', 'missing API key: send "X-API-Key: svc_live_…"');
      }
      if (typeof header !== 'string' || !API_KEY_PATTERN.test(header)) {
        throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
      }
      const keyHash = apiKeyHash(header);
      const admit = (auth: ApiKeyAuth) => {
        request.apiKey = auth;
        if (auth.allowlist && !auth.allowlist.check(...clientAddress(request.ip))) {
          throw new AppError('forbidden', "your IP address is not in this project's allowlist");
        }
      };
      const cached = caches.apiKeys.peek(keyHash);
      // The hot path's cache decision, on the request's span (tracing.ts; nothing when off).
      setActiveSpanAttribute('relayplane.api_key.cache', cached ? 'hit' : 'lookup');
      if (cached) {
        admit(cached);
        done();
        return;
      }
      caches.apiKeys
        .get(keyHash, async () => {
          const res = await admin.verifyApiKey({ keyHash });
          if (!res.apiKey) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
          return {
            apiKey: res.apiKey,
            projectEnvironment: res.projectEnvironment,
            allowlist: allowlistOf(res.allowlist),
          };
        })
        .then((auth) => {
          let refused: Error | undefined;
          try {
            admit(auth);
          } catch (err) {
            refused = err as Error;
          }
          done(refused);
        }, done);
    }),
    relayNode: guard({ scheme: 'relayNodeToken' }, async (request) => {
      request.relay = await relayOf(bearerToken(request));
    }),
    relaySession: guard({ scheme: 'relayNodeToken', basic: true }, async (request) => {
      // No Authorization: a client certificate registered for the relay, as a trusted proxy forwarded it.
      if (request.headers.authorization === undefined) {
        const certificate = forwardedClientCertificate(request, trustedProxy);
        if (certificate !== undefined) {
          request.relay = await relayOfCertificate(certificate);
          return;
        }
      }
      const { token, user } = relayNodeCredential(request);
      const relay = await relayOf(token);
      // Basic: the user part names the relay the token belongs to (`https://<relay_id>:<token>@…`).
      if (user !== undefined && user !== relay.id) {
        throw new AppError(
          'unauthenticated',
          'the Basic user is not the id of the relay this token belongs to',
        );
      }
      request.relay = relay;
    }),
    platformAdmin: guard({ scheme: 'bearerAuth' }, async (request: FastifyRequest) => {
      await session(request);
      if (!request.auth?.principal.platformAdmin) {
        throw new AppError('forbidden', 'this operation needs a platform administrator');
      }
    }),
  };
}

/** The audit trail's actor (docs/audit.md) for an authenticated principal. */
export function actorOf(principal: Principal, session: Session | undefined): AuditActorRef {
  switch (principal.kind) {
    case PrincipalKind.BOT:
      return { type: 'bot', id: principal.botId };
    case PrincipalKind.IDENTITY:
      return { type: 'identity_token', id: principal.identityTokenId };
    default:
      return { type: session?.kind === 'cli' ? 'cli' : 'user', id: principal.userId };
  }
}

/** The authenticated principal of a request that passed a guard. */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.auth) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
  return request.auth.principal;
}

/** Who asks, and in which project: what every call about a project's resources starts with. */
export function inProject(request: FastifyRequest & { params: { project_id: string } }): {
  principal: Principal;
  projectId: string;
} {
  return { principal: principalOf(request), projectId: request.params.project_id };
}

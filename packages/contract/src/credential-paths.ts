/**
 * Path-scoped credentials (docs/credentials.md, "Path-scoped credentials"): what a credential may
 * publish and subscribe to, as a root and moq patterns, how an API key's ceiling bounds it, and
 * how it travels in the credential as moq-token's claims. Pure.
 *
 * - A credential's paths live in its project's namespace: the claims' `root` is
 *   `<project id>[/<root>]`, so no credential names another project's broadcasts.
 * - The claims are written as upstream writes them (moq-auth's `wire.rs`): when every pattern is
 *   a subtree (`room/**`, `**`), as moq-token's legacy `put` / `get` prefixes, which every
 *   published moq verifier reads; otherwise as `publish` / `subscribe` patterns, which an older
 *   verifier refuses rather than misreads. One credential never mixes the two.
 */
import {
  type Pattern,
  PatternError,
  parsePattern,
  pathSegments,
  patternPrefix,
  rebasePattern,
  rootedPattern,
  stripPathPrefix,
  subtreePattern,
  unionContains,
} from './moq-pattern.ts';

/** A credential's (or a key ceiling's) paths, relative to its project. */
export interface CredentialPaths {
  /** A normalised literal path; `""` is the project's whole namespace. */
  root: string;
  /** Canonical moq patterns relative to `root`; empty: nothing. */
  publish: string[];
  subscribe: string[];
}

/** What an issuance request (or a key's ceiling) says about paths; every field optional. */
export interface PathRequest {
  root?: string | undefined;
  publish?: readonly string[] | undefined;
  subscribe?: readonly string[] | undefined;
}

/** The roles a credential's scopes allow: relay:session alone is both, relay:publish / relay:subscribe narrow. */
export interface Roles {
  publish: boolean;
  subscribe: boolean;
}

export function rolesOfScopes(scopes: readonly string[]): Roles {
  const narrowed = scopes.includes('relay:publish') || scopes.includes('relay:subscribe');
  return {
    publish: !narrowed || scopes.includes('relay:publish'),
    subscribe: !narrowed || scopes.includes('relay:subscribe'),
  };
}

export const MAX_PATH_PATTERNS = 16;
export const MAX_PATH_LENGTH = 512;

export type PathDecision =
  | { ok: true; paths: CredentialPaths }
  | { ok: false; code: 'invalid_request' | 'forbidden'; message: string };

type Checked<T> = { ok: true; value: T } | { ok: false; message: string };

function checkRoot(field: string, root: string | undefined): Checked<string> {
  if (root === undefined) return { ok: true, value: '' };
  if (root.length > MAX_PATH_LENGTH)
    return { ok: false, message: `${field} must be at most ${MAX_PATH_LENGTH} characters` };
  const segments = pathSegments(root);
  if (segments.some((s) => s.includes('*')))
    return { ok: false, message: `${field} must be a path without wildcards (a root, not a pattern)` };
  // The project id is the root's first segment in the claims: one segment fewer for the rest.
  if (segments.length > 31) return { ok: false, message: `${field} must have at most 31 segments` };
  return { ok: true, value: segments.join('/') };
}

function checkPatterns(field: string, root: string, texts: readonly string[]): Checked<string[]> {
  if (texts.length > MAX_PATH_PATTERNS)
    return { ok: false, message: `${field} must have at most ${MAX_PATH_PATTERNS} patterns` };
  const out: string[] = [];
  for (const text of texts) {
    try {
      const pattern = parsePattern(text);
      // Placed beneath `<project id>/<root>` it must still be a pattern (at most 32 segments).
      rootedPattern(pattern, `project/${root}`);
      if (!out.includes(pattern.text)) out.push(pattern.text);
    } catch (err) {
      if (!(err instanceof PatternError)) throw err;
      return {
        ok: false,
        message: `${field}: ${JSON.stringify(text)} is not a moq pattern (${err.message})`,
      };
    }
  }
  return { ok: true, value: out };
}

/**
 * A key's ceiling as asked at its creation: a root and the patterns of each role; it must grant
 * something (a ceiling naming nothing would make the key useless, as upstream's scope rule).
 */
export function checkCeiling(input: PathRequest): Checked<CredentialPaths> {
  const root = checkRoot('ceiling.root', input.root);
  if (!root.ok) return root;
  const publish = checkPatterns('ceiling.publish', root.value, input.publish ?? []);
  if (!publish.ok) return publish;
  const subscribe = checkPatterns('ceiling.subscribe', root.value, input.subscribe ?? []);
  if (!subscribe.ok) return subscribe;
  if (publish.value.length === 0 && subscribe.value.length === 0)
    return {
      ok: false,
      message: 'ceiling must name publish or subscribe patterns (a ceiling naming nothing allows nothing)',
    };
  return { ok: true, value: { root: root.value, publish: publish.value, subscribe: subscribe.value } };
}

/**
 * The paths a credential is issued with. Without `publish` and `subscribe`, each role the scopes
 * allow gets `**` under `root` (with a ceiling: only the roles the ceiling grants anything), and
 * without anything at all, a key with a ceiling issues its ceiling. Patterns for a role the scopes
 * do not allow: 400. A request that exceeds the key's ceiling: 403, naming the first pattern
 * outside it.
 */
export function decidePaths(request: PathRequest, roles: Roles, ceiling?: CredentialPaths): PathDecision {
  const bad = (message: string): PathDecision => ({ ok: false, code: 'invalid_request', message });
  const asked =
    request.root !== undefined || request.publish !== undefined || request.subscribe !== undefined;
  if (!asked && ceiling) {
    const paths = {
      root: ceiling.root,
      publish: roles.publish ? ceiling.publish : [],
      subscribe: roles.subscribe ? ceiling.subscribe : [],
    };
    if (paths.publish.length === 0 && paths.subscribe.length === 0)
      return {
        ok: false,
        code: 'forbidden',
        message: "the API key's ceiling grants nothing the requested scopes allow",
      };
    return { ok: true, paths };
  }
  const root = checkRoot('root', request.root);
  if (!root.ok) return bad(root.message);
  let publish: string[];
  let subscribe: string[];
  if (request.publish === undefined && request.subscribe === undefined) {
    publish = roles.publish && (!ceiling || ceiling.publish.length > 0) ? ['**'] : [];
    subscribe = roles.subscribe && (!ceiling || ceiling.subscribe.length > 0) ? ['**'] : [];
  } else {
    const p = checkPatterns('publish', root.value, request.publish ?? []);
    if (!p.ok) return bad(p.message);
    const s = checkPatterns('subscribe', root.value, request.subscribe ?? []);
    if (!s.ok) return bad(s.message);
    if (p.value.length > 0 && !roles.publish)
      return bad(
        'publish patterns need scope relay:publish or relay:session alone (the requested scopes do not publish)',
      );
    if (s.value.length > 0 && !roles.subscribe)
      return bad(
        'subscribe patterns need scope relay:subscribe or relay:session alone (the requested scopes do not subscribe)',
      );
    publish = p.value;
    subscribe = s.value;
  }
  if (publish.length === 0 && subscribe.length === 0)
    return bad('the credential would grant nothing: name publish or subscribe patterns');
  const paths = { root: root.value, publish, subscribe };
  if (ceiling) {
    const problem = ceilingProblem(ceiling, paths);
    if (problem) return { ok: false, code: 'forbidden', message: problem };
  }
  return { ok: true, paths };
}

/**
 * Why `paths` exceeds `ceiling`, or undefined: per role, every pattern placed beneath its root
 * must be contained by one of the ceiling's placed beneath the ceiling's (upstream's
 * `Scope::allows`). So a root beside or above the ceiling's, or a role the ceiling does not grant,
 * is outside it.
 */
export function ceilingProblem(ceiling: CredentialPaths, paths: CredentialPaths): string | undefined {
  for (const role of ['publish', 'subscribe'] as const) {
    const allowed = ceiling[role].map((text) => rootedPattern(parsePattern(text), ceiling.root));
    for (const text of paths[role]) {
      const asked = rootedPattern(parsePattern(text), paths.root);
      if (!unionContains(allowed, asked)) {
        const where = paths.root === '' ? '' : ` under root ${JSON.stringify(paths.root)}`;
        return `${role} ${JSON.stringify(text)}${where} exceeds the API key's ceiling (${role} ${JSON.stringify(
          ceiling[role],
        )} under root ${JSON.stringify(ceiling.root)})`;
      }
    }
  }
  return undefined;
}

/** The path claims of a credential, as upstream writes them. */
export interface PathClaims {
  root: string;
  put?: string[];
  get?: string[];
  publish?: string[];
  subscribe?: string[];
}

/** `paths` as the claims of a credential of `projectId` (moq-auth's encoding, see above). */
export function pathClaims(projectId: string, paths: CredentialPaths): PathClaims {
  const root = paths.root === '' ? projectId : `${projectId}/${paths.root}`;
  const prefixes = (texts: string[]) => {
    const out: string[] = [];
    for (const text of texts) {
      const prefix = patternPrefix(parsePattern(text));
      if (prefix === undefined) return undefined;
      out.push(prefix);
    }
    return out;
  };
  const put = prefixes(paths.publish);
  const get = prefixes(paths.subscribe);
  if (put && get) {
    return { root, ...(put.length > 0 ? { put } : {}), ...(get.length > 0 ? { get } : {}) };
  }
  return {
    root,
    ...(paths.publish.length > 0 ? { publish: paths.publish } : {}),
    ...(paths.subscribe.length > 0 ? { subscribe: paths.subscribe } : {}),
  };
}

/** What a credential's claims grant: its root (project id first) and each role's patterns. */
export interface ClaimedPaths {
  root: string;
  publish: Pattern[];
  subscribe: Pattern[];
}

/**
 * The paths a verified credential grants. A credential from before path scoping (no `root`
 * claim) grants its project's whole namespace to the roles its scopes allow.
 */
export function claimedPaths(claims: {
  pid: string;
  scope: string;
  root?: unknown;
  put?: unknown;
  get?: unknown;
  publish?: unknown;
  subscribe?: unknown;
}): ClaimedPaths | undefined {
  const roles = rolesOfScopes(claims.scope.split(' '));
  if (claims.root === undefined) {
    const all = [parsePattern('**')];
    return { root: claims.pid, publish: roles.publish ? all : [], subscribe: roles.subscribe ? all : [] };
  }
  if (typeof claims.root !== 'string' || pathSegments(claims.root)[0] !== claims.pid) return undefined;
  const list = (value: unknown): string[] | undefined => {
    if (value === undefined) return [];
    if (typeof value === 'string') return [value];
    return Array.isArray(value) && value.every((v) => typeof v === 'string') ? value : undefined;
  };
  const legacy = claims.put !== undefined || claims.get !== undefined;
  if (legacy && (claims.publish !== undefined || claims.subscribe !== undefined)) return undefined;
  try {
    const read = (value: unknown, asPrefix: boolean) => {
      const texts = list(value);
      if (!texts) throw new PatternError('invalid-segment', 'not a list of strings');
      return texts.map((text) => (asPrefix ? subtreePattern(text) : parsePattern(text)));
    };
    return {
      root: pathSegments(claims.root).join('/'),
      publish: roles.publish ? read(legacy ? claims.put : claims.publish, legacy) : [],
      subscribe: roles.subscribe ? read(legacy ? claims.get : claims.subscribe, legacy) : [],
    };
  } catch (err) {
    if (err instanceof PatternError) return undefined;
    throw err;
  }
}

export type PathAuthorization =
  | { ok: true; publish: string[]; subscribe: string[] }
  | { ok: false; reason: string };

/**
 * What `claimed` grants at `path` (project id first), each pattern relative to `path`: upstream's
 * `Claims::authorize`. The path may reach into the credential's root (the extra segments narrow
 * each pattern) or sit above it (the root's extra segments are prepended); otherwise, or when
 * nothing is left, it is refused.
 */
export function authorizePath(claimed: ClaimedPaths, path: string): PathAuthorization {
  const suffix = stripPathPrefix(path, claimed.root);
  const prefix = suffix === undefined ? stripPathPrefix(claimed.root, path) : '';
  if (suffix === undefined && prefix === undefined)
    return {
      ok: false,
      reason: `the credential's root ${claimed.root} does not cover the path ${pathSegments(path).join('/')}`,
    };
  const scope = (patterns: Pattern[]): string[] => {
    const out = new Set<string>();
    for (const pattern of patterns) {
      if (suffix !== undefined) for (const p of rebasePattern(pattern, suffix)) out.add(p.text);
      else out.add(rootedPattern(pattern, prefix as string).text);
    }
    return [...out].sort();
  };
  const publish = scope(claimed.publish);
  const subscribe = scope(claimed.subscribe);
  if (publish.length === 0 && subscribe.length === 0)
    return { ok: false, reason: `the credential grants nothing at ${pathSegments(path).join('/')}` };
  return { ok: true, publish, subscribe };
}

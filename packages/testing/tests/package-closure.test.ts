/**
 * What installing a client package pulls in: the CLI and the verifier are installed by
 * customers and relay operators, so their production dependency closure (as pnpm resolves it
 * from the lockfile) must hold none of the server runtime: no PGlite, bullmq, OpenTelemetry,
 * gRPC, PostgreSQL or Redis client. They depend on @relayplane/contract, which depends on nothing.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

interface Listed {
  dependencies?: Record<string, Listed>;
}

/** Every package name in `pkg`'s production closure. */
function closureOf(pkg: string): Set<string> {
  const out = execFileSync(
    'corepack',
    ['pnpm', 'list', '--filter', pkg, '--prod', '--depth', 'Infinity', '--json'],
    { cwd: ROOT, encoding: 'utf8', env: { ...process.env, COREPACK_ENABLE_DOWNLOAD_PROMPT: '0' } },
  );
  const [root] = JSON.parse(out) as Listed[];
  const names = new Set<string>();
  const walk = (deps: Record<string, Listed> | undefined) => {
    for (const [name, dep] of Object.entries(deps ?? {})) {
      if (names.has(name)) continue;
      names.add(name);
      walk(dep.dependencies);
    }
  };
  walk(root?.dependencies);
  return names;
}

const SERVER_RUNTIME = [
  /^@electric-sql\/pglite/,
  /^bullmq$/,
  /^@opentelemetry\//,
  /^@grpc\//,
  /^@bufbuild\//,
  /^pg$/,
  /^ioredis$/,
  /^kysely$/,
  /^@relayplane\/(shared|proto)$/,
];
const serverPackagesIn = (names: Set<string>) =>
  [...names].filter((name) => SERVER_RUNTIME.some((pattern) => pattern.test(name))).sort();

describe('client packages install without the server runtime', () => {
  it('the check sees the server runtime where it is (@relayplane/shared)', () => {
    const shared = serverPackagesIn(closureOf('@relayplane/shared'));
    expect(shared).toEqual(expect.arrayContaining(['@electric-sql/pglite', 'bullmq', 'ioredis', 'pg']));
    expect(shared.some((name) => name.startsWith('@opentelemetry/'))).toBe(true);
  });

  it('@relayplane/contract depends on nothing', () => {
    expect([...closureOf('@relayplane/contract')]).toEqual([]);
  });

  it('@relayplane/cli: the contract and its own few dependencies, no server runtime', () => {
    const cli = closureOf('@relayplane/cli');
    expect(cli.has('@relayplane/contract')).toBe(true);
    expect(serverPackagesIn(cli)).toEqual([]);
  });

  it('@relayplane/verifier: jose, no server runtime', () => {
    const verifier = closureOf('@relayplane/verifier');
    expect(verifier.has('jose')).toBe(true);
    expect(serverPackagesIn(verifier)).toEqual([]);
  });
});

/**
 * Builds the workspace with its own build scripts and makes `pnpm deploy --prod` bundles of
 * the apps, the way the Dockerfile's build stage does, then inspects what a bundle holds.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const dockerfilePath = join(repoRoot, 'deploy/docker/Dockerfile');

export const APPS = ['gateway', 'issuer', 'admin', 'billing'] as const;
export type App = (typeof APPS)[number];

/** The deploy flags the Dockerfile uses too (the test checks it does). */
export const DEPLOY_FLAGS = ['--prod', '--legacy', '--prefer-offline'] as const;

export interface RunResult {
  code: number | null;
  output: string;
}

/** Runs a command to completion, collecting stdout and stderr together. */
export function run(
  command: string,
  args: readonly string[],
  options: { cwd: string; env?: Record<string, string | undefined>; timeoutMs?: number },
): Promise<RunResult> {
  return new Promise((done, fail) => {
    const child = spawn(command, [...args], {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const collect = (chunk: Buffer) => {
      output += chunk.toString();
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 180_000);
    child.once('error', (err) => {
      clearTimeout(timer);
      fail(err);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      done({ code, output });
    });
  });
}

async function pnpm(args: readonly string[]): Promise<string> {
  // pnpm runs on the machine's Node through corepack; the scripts it runs find the repo's
  // Node 24 first on PATH (node_modules/.bin), as in `corepack pnpm run build`.
  const env = { ...process.env, CI: 'true', COREPACK_ENABLE_DOWNLOAD_PROMPT: '0' };
  const result = await run('corepack', ['pnpm', ...args], { cwd: repoRoot, env });
  if (result.code !== 0) {
    throw new Error(`corepack pnpm ${args.join(' ')} exited with ${result.code}:\n${result.output}`);
  }
  return result.output;
}

/** Runs the `build` script of the apps and every workspace package they depend on. */
export async function buildApps(apps: readonly App[]): Promise<void> {
  await pnpm([...apps.flatMap((app) => ['--filter', `@relayplane/${app}...`]), 'run', 'build']);
}

/** `pnpm --filter @relayplane/<app> deploy --prod --legacy --prefer-offline <dir>` */
export async function deployBundle(app: App, dir: string): Promise<void> {
  await pnpm(['--filter', `@relayplane/${app}`, 'deploy', ...DEPLOY_FLAGS, dir]);
}

interface Manifest {
  name: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

export function readManifest(path: string): Manifest {
  return JSON.parse(readFileSync(path, 'utf8')) as Manifest;
}

/** Package names directly under a node_modules folder (scopes expanded, dot entries skipped). */
function listPackages(nodeModules: string): string[] {
  if (!existsSync(nodeModules)) return [];
  const names: string[] = [];
  for (const entry of readdirSync(nodeModules)) {
    if (entry.startsWith('.')) continue;
    if (entry.startsWith('@')) {
      for (const sub of readdirSync(join(nodeModules, entry))) names.push(`${entry}/${sub}`);
    } else names.push(entry);
  }
  return names.sort();
}

export interface BundleContents {
  /** Packages linked at the bundle's top level (the app's direct dependencies). */
  topLevel: string[];
  /** Every package installed in the bundle's virtual store. */
  installed: Set<string>;
  /** Every package some installed third-party package declares as a (peer/optional) dependency. */
  requiredByInstalled: Set<string>;
}

/** What a legacy `pnpm deploy` bundle (node_modules/.pnpm layout) installed. */
export function bundleContents(dir: string): BundleContents {
  const store = join(dir, 'node_modules/.pnpm');
  const installed = new Set<string>();
  const requiredByInstalled = new Set<string>();
  for (const entry of readdirSync(store)) {
    const inner = join(store, entry, 'node_modules');
    if (!existsSync(inner)) continue;
    // `<name>@<version>[_peers]` with the scope's slash spelled `+`.
    const name = entry.replace(/^(@?[^@]+)@.*$/, '$1').replace('+', '/');
    installed.add(name);
    const manifestPath = join(inner, name, 'package.json');
    if (name.startsWith('@relayplane/') || !existsSync(manifestPath)) continue;
    const manifest = readManifest(manifestPath);
    for (const deps of [manifest.dependencies, manifest.optionalDependencies, manifest.peerDependencies]) {
      for (const dep of Object.keys(deps ?? {})) requiredByInstalled.add(dep);
    }
  }
  return { topLevel: listPackages(join(dir, 'node_modules')), installed, requiredByInstalled };
}

/** Workspace packages (name → folder) from the repo's own manifests. */
export function workspacePackages(): Map<string, string> {
  const packages = new Map<string, string>();
  for (const group of ['apps', 'packages']) {
    for (const entry of readdirSync(join(repoRoot, group))) {
      const manifest = join(repoRoot, group, entry, 'package.json');
      if (existsSync(manifest)) packages.set(readManifest(manifest).name, join(repoRoot, group, entry));
    }
  }
  return packages;
}

/** The workspace packages an app needs at run time (production dependencies, transitively). */
export function workspaceProductionClosure(app: App): string[] {
  const workspace = workspacePackages();
  const seen = new Set<string>();
  const visit = (name: string) => {
    const dir = workspace.get(name);
    if (!dir || seen.has(name)) return;
    seen.add(name);
    for (const dep of Object.keys(readManifest(join(dir, 'package.json')).dependencies ?? {})) visit(dep);
  };
  visit(`@relayplane/${app}`);
  return [...seen].sort();
}

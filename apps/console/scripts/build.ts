/**
 * Builds the console into dist/ when it is stale: `pnpm start` calls `ensureConsoleBuilt()`
 * before the services start, so a fresh clone needs only install and start; `pnpm build`
 * (the Docker image) runs this file with `--force`.
 *
 * Stale means the SHA-256 over the build's inputs (index.html, vite.config.ts, package.json,
 * every file under src/, and the lockfile, which pins the bundled libraries) differs from the one
 * the last build wrote to dist/.inputs-sha256. A fresh build takes a few seconds on this
 * machine (docs/console.md).
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { extname, join, relative } from 'node:path';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

export const CONSOLE_ROOT = join(import.meta.dirname, '..');
export const CONSOLE_DIST = join(CONSOLE_ROOT, 'dist');
const STAMP = '.inputs-sha256';

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)]))
    .sort();
}

/** The digest of everything the build reads. */
export function inputsDigest(root = CONSOLE_ROOT): string {
  const hash = createHash('sha256');
  const lock = join(root, '..', '..', 'pnpm-lock.yaml');
  const inputs = [
    join(root, 'index.html'),
    join(root, 'vite.config.ts'),
    join(root, 'package.json'),
    ...files(join(root, 'src')),
    ...(existsSync(lock) ? [lock] : []),
  ];
  for (const file of inputs) {
    hash.update(relative(root, file)).update('\0').update(readFileSync(file)).update('\0');
  }
  return hash.digest('hex');
}

export function isStale(root = CONSOLE_ROOT): boolean {
  const stamp = join(root, 'dist', STAMP);
  if (!existsSync(join(root, 'dist', 'index.html')) || !existsSync(stamp)) return true;
  return readFileSync(stamp, 'utf8').trim() !== inputsDigest(root);
}

/**
 * Writes `<file>.br` (quality 11) and `<file>.gz` (level 9) next to every script, style and
 * HTML file of a build, so the gateway serves compressed bytes without compressing at runtime.
 */
export function precompress(dist: string): void {
  for (const file of files(dist)) {
    if (!['.js', '.css', '.html', '.svg'].includes(extname(file))) continue;
    const body = readFileSync(file);
    if (body.length < 1024) continue;
    writeFileSync(
      `${file}.br`,
      brotliCompressSync(body, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }),
    );
    writeFileSync(`${file}.gz`, gzipSync(body, { level: 9 }));
  }
}

/** Builds dist/ (Vite, production), precompresses it and stamps it with the inputs' digest. */
export async function buildConsole(root = CONSOLE_ROOT): Promise<void> {
  const digest = inputsDigest(root);
  const { build } = await import('vite');
  await build({ root, configFile: join(root, 'vite.config.ts'), mode: 'production', logLevel: 'warn' });
  precompress(join(root, 'dist'));
  writeFileSync(join(root, 'dist', STAMP), `${digest}\n`);
}

/**
 * Builds when stale; answers whether it built. Without the build tools (a production bundle
 * holds dist/ only) a present dist/ is used as it is.
 */
export async function ensureConsoleBuilt(
  log: (line: string) => void = () => {},
  root = CONSOLE_ROOT,
): Promise<boolean> {
  if (!existsSync(join(root, 'src'))) return false;
  if (!isStale(root)) return false;
  const started = performance.now();
  log('building the web console (its sources changed since the last build)…');
  await buildConsole(root);
  log(`built the web console in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return true;
}

if (import.meta.main) {
  const force = process.argv.includes('--force');
  if (force) await buildConsole();
  else await ensureConsoleBuilt((line) => console.log(line));
}

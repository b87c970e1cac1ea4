/**
 * The web console (apps/console, docs/console.md): a single-page app every gateway serves at `/`.
 *
 * - Its build (dist/: index.html and hashed files under /assets/) is read into memory when the
 *   app is built; a rebuild on disk changes nothing until the next start. The build writes
 *   compressed copies (`.br`, `.gz`, apps/console/scripts/build.ts) which are served as the
 *   client accepts; a build without them is compressed on first request and kept.
 * - `index.html` is answered for the console's own URLs (CONSOLE_PATHS: every page is a URL that
 *   can be bookmarked or reloaded), `no-store`, with CONSOLE_CSP; the API, `/docs`, `/device` and
 *   the checkout pages keep their paths.
 * - /assets/* are immutable (their names carry the content hash): cached for a year.
 * - Not built (a gateway bundle without it, or tests): the pages answer 503 `{"error"}` saying
 *   how to build it, and `/activate` (the device flow's `verification_uri`) redirects to the
 *   server-rendered `/device` page with the same query, so `relayplane login` works either way.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { VERIFICATION_PATH } from './html.ts';

/** The console's device-flow approval page: the `verification_uri` the CLI prints. */
export const CONSOLE_ACTIVATE_PATH = '/activate';

/** Every URL pattern the console's router knows (apps/console/src/routes.ts). */
export const CONSOLE_PATHS = [
  '/',
  '/sign-in',
  CONSOLE_ACTIVATE_PATH,
  '/projects',
  '/projects/*',
  '/members',
  '/audit',
  '/account',
  '/billing',
  '/platform/*',
] as const;

/**
 * Scripts, styles, fonts and images from this origin only, no inline script or style, no
 * `eval`; the page talks to this gateway only; no plugin, no framing, no `<base>`, forms post here.
 */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; " +
  "connect-src 'self'; manifest-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; " +
  "object-src 'none'";

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
  '.json': 'application/json',
};

interface Asset {
  type: string;
  body: Buffer;
  br?: Buffer;
  gzip?: Buffer;
}

export interface ConsoleBuild {
  index: Asset;
  assets: Map<string, Asset>;
}

/** Where the console's build is by default: the @relayplane/console package's dist/. */
export function defaultConsoleDir(): string | undefined {
  try {
    return join(dirname(fileURLToPath(import.meta.resolve('@relayplane/console/package.json'))), 'dist');
  } catch {
    return undefined;
  }
}

/** A file and the compressed copies the build wrote next to it, if any. */
function readAsset(file: string, type: string): Asset {
  const asset: Asset = { type, body: readFileSync(file) };
  if (existsSync(`${file}.br`)) asset.br = readFileSync(`${file}.br`);
  if (existsSync(`${file}.gz`)) asset.gzip = readFileSync(`${file}.gz`);
  return asset;
}

/** Reads a build into memory; undefined when `dir` holds none. */
export function loadConsole(dir: string | undefined): ConsoleBuild | undefined {
  if (dir === undefined || !existsSync(join(dir, 'index.html'))) return undefined;
  const assets = new Map<string, Asset>();
  const assetDir = join(dir, 'assets');
  if (existsSync(assetDir)) {
    for (const name of readdirSync(assetDir)) {
      const type = TYPES[extname(name)];
      if (type) assets.set(name, readAsset(join(assetDir, name), type));
    }
  }
  return { index: readAsset(join(dir, 'index.html'), 'text/html; charset=utf-8'), assets };
}

const compressible = (asset: Asset) => !asset.type.startsWith('image/png') && !asset.type.startsWith('font/');

/** The asset's bytes in the best encoding the client accepts (made once, then kept). */
function encoded(request: FastifyRequest, reply: FastifyReply, asset: Asset): Buffer {
  reply.header('vary', 'accept-encoding');
  const accepts = String(request.headers['accept-encoding'] ?? '');
  if (!compressible(asset) || asset.body.length < 1024) return asset.body;
  if (/\bbr\b/.test(accepts)) {
    asset.br ??= brotliCompressSync(asset.body, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } });
    reply.header('content-encoding', 'br');
    return asset.br;
  }
  if (/\bgzip\b/.test(accepts)) {
    asset.gzip ??= gzipSync(asset.body, { level: 9 });
    reply.header('content-encoding', 'gzip');
    return asset.gzip;
  }
  return asset.body;
}

const NOT_BUILT =
  'the web console is not built on this gateway: run `pnpm --filter @relayplane/console build` (or `pnpm start`, which builds it)';

/** Registers the console's pages and assets (hidden from the OpenAPI document: they are not API). */
export function registerConsole(app: FastifyInstance, build: ConsoleBuild | undefined): void {
  const page = async (request: FastifyRequest, reply: FastifyReply) => {
    if (!build) {
      if (request.routeOptions.url === CONSOLE_ACTIVATE_PATH) {
        const query = request.url.includes('?') ? request.url.slice(request.url.indexOf('?')) : '';
        return reply.redirect(`${VERIFICATION_PATH}${query}`, 302);
      }
      return reply.code(503).send({ error: NOT_BUILT });
    }
    return reply
      .headers({
        'cache-control': 'no-store',
        'content-security-policy': CONSOLE_CSP,
        'x-frame-options': 'DENY',
        'referrer-policy': 'no-referrer',
        'x-content-type-options': 'nosniff',
      })
      .type(build.index.type)
      .send(encoded(request, reply, build.index));
  };
  for (const url of CONSOLE_PATHS) {
    app.get(url, { schema: { hide: true }, config: { commonErrors: false } }, page);
  }
  app.get<{ Params: { file: string } }>(
    '/assets/:file',
    { schema: { hide: true }, config: { commonErrors: false } },
    async (request, reply) => {
      const asset = build?.assets.get(request.params.file);
      if (!asset) return reply.code(404).send({ error: 'no such console asset' });
      return reply
        .headers({
          'cache-control': 'public, max-age=31536000, immutable',
          'x-content-type-options': 'nosniff',
        })
        .type(asset.type)
        .send(encoded(request, reply, asset));
    },
  );
}

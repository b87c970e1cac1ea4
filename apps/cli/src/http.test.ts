import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError, CliError, EXIT, exitCodeForStatus } from './errors.ts';
import { ApiClient, apiPath } from './http.ts';

describe('exit codes', () => {
  it('maps HTTP statuses to the documented exit codes', () => {
    expect([401, 403, 404, 400, 402, 409, 422, 429, 500, 503].map(exitCodeForStatus)).toEqual([
      3, 4, 5, 1, 1, 1, 1, 1, 1, 1,
    ]);
  });
});

describe('ApiClient against a real HTTP server', () => {
  let server: Server;
  let base: string;
  const seen: { url: string; headers: Record<string, string | string[] | undefined>; body: string }[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => {
        body += c;
      });
      req.on('end', () => {
        seen.push({ url: req.url ?? '', headers: req.headers, body });
        const status = Number(/^\/status\/(\d+)/.exec(req.url ?? '')?.[1] ?? 200);
        if (req.url === '/status/502') {
          res.writeHead(502, { 'content-type': 'text/html' }).end('<html>bad gateway</html>');
          return;
        }
        const headers: Record<string, string> = { 'content-type': 'application/json' };
        if (status === 429) headers['retry-after'] = '7';
        res
          .writeHead(status, headers)
          .end(JSON.stringify(status < 300 ? { ok: true } : { error: `boom ${status}` }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    base = `http://127.0.0.1:${address.port}`;
  });

  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  const api = () => new ApiClient(base, (input, init) => fetch(input, init));

  async function failure(path: string, auth?: Parameters<ApiClient['request']>[2]): Promise<ApiError> {
    const err = await api()
      .request('GET', path, auth)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    return err as ApiError;
  }

  it('answers the parsed JSON of a 2xx and sends bearer, API key and JSON bodies as headers say', async () => {
    const res = await api().request('POST', '/status/201', {
      auth: { kind: 'bearer', token: 'rpu_abc', fromEnv: false },
      json: { name: 'demo' },
    });
    expect(res).toMatchObject({ status: 201, body: { ok: true } });
    const last = seen.at(-1);
    expect(last?.headers.authorization).toBe('Bearer rpu_abc');
    expect(last?.headers['content-type']).toBe('application/json');
    expect(last?.body).toBe('{"name":"demo"}');
    await api().request('POST', '/status/200', {
      auth: { kind: 'apiKey', key: 'svc_x' },
      form: { a: 'b c' },
    });
    expect(seen.at(-1)?.headers['x-api-key']).toBe('svc_x');
    expect(seen.at(-1)?.body).toBe('a=b+c');
  });

  it('turns {"error"} bodies into the message, with the exit code of the status and a hint', async () => {
    const unauth = await failure('/status/401');
    expect([unauth.message, unauth.exitCode, unauth.hint]).toEqual([
      'boom 401',
      EXIT.unauthenticated,
      'run `relayplane login`',
    ]);
    const envToken = await failure('/status/401', { auth: { kind: 'bearer', token: 't', fromEnv: true } });
    expect(envToken.hint).toContain('RELAYPLANE_TOKEN');
    const forbidden = await failure('/status/403');
    expect(forbidden.exitCode).toBe(EXIT.forbidden);
    expect(forbidden.hint).toContain('permission denied');
    expect((await failure('/status/404')).exitCode).toBe(EXIT.notFound);
    expect((await failure('/status/409')).exitCode).toBe(EXIT.api);
    expect((await failure('/status/429')).hint).toBe('rate limited: retry after 7 s');
  });

  it('names the status when the body is not JSON', async () => {
    const err = await failure('/status/502');
    expect(err.message).toBe('HTTP 502 Bad Gateway');
    expect(err.exitCode).toBe(EXIT.api);
  });

  it('reports an unreachable server as exit 6', async () => {
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const closed = new ApiClient(`http://127.0.0.1:${port}`, (input, init) => fetch(input, init));
    const err = await closed.request('GET', '/healthz').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CliError);
    expect((err as CliError).exitCode).toBe(EXIT.network);
    expect((err as CliError).message).toBe(`cannot reach http://127.0.0.1:${port} (ECONNREFUSED)`);
  });

  it('percent-encodes ids so they stay one path segment', () => {
    expect(apiPath`/admin/v1/projects/${'a/b?c'}/api-keys/${'k#1'}`).toBe(
      '/admin/v1/projects/a%2Fb%3Fc/api-keys/k%231',
    );
  });
});

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll } from 'vitest';
import { run as relayplane } from '../../../cli/src/cli.ts';

/**
 * The CLI run in-process against the app (read once the suite starts, as stacks are built in
 * `beforeAll`) listening on a free port, with a config home of its own
 * (removed after the suite): call inside a `describe`. Answers how a run ended and what it printed.
 */
export function inProcessCli(
  app: () => FastifyInstance,
  label: string,
): (argv: string[], token: string) => Promise<{ code: number; stdout: string; stderr: string }> {
  let apiUrl: string;
  let home: string;
  beforeAll(async () => {
    apiUrl = await app().listen({ host: '127.0.0.1', port: 0 });
    home = mkdtempSync(join(tmpdir(), `relayplane-${label}-cli-`));
  });
  afterAll(() => {
    if (home) rmSync(home, { recursive: true, force: true });
  });
  return async (argv, token) => {
    let stdout = '';
    let stderr = '';
    const code = await relayplane(argv, {
      env: { RELAYPLANE_API_URL: apiUrl, RELAYPLANE_TOKEN: token, NO_COLOR: '1' },
      stdout: { write: (t: string) => (stdout += t), isTTY: false },
      stderr: { write: (t: string) => (stderr += t), isTTY: false },
      fetch: (input, init) => fetch(input, init),
      sleep: async () => {},
      now: () => Date.now(),
      configPath: join(home, 'relayplane', 'config.json'),
      readStdin: async () => '',
    });
    return { code, stdout, stderr };
  };
}

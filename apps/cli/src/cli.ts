/** `relayplane`: resolves the command, builds its context, runs it, maps failures to exit codes. */
import { readFileSync } from 'node:fs';
import type { CommandSpec, Context, Values } from './command.ts';
import { API_KEY_COMMANDS } from './commands/api-keys.ts';
import { AUDIT_COMMANDS } from './commands/audit.ts';
import { AUTH_COMMANDS } from './commands/auth.ts';
import { BOT_COMMANDS } from './commands/bots.ts';
import { CREDENTIAL_COMMANDS } from './commands/credentials.ts';
import { MFA_COMMANDS } from './commands/mfa.ts';
import { PLATFORM_COMMANDS } from './commands/platform.ts';
import { PROJECT_COMMANDS } from './commands/projects.ts';
import { RELAY_SESSION_COMMANDS } from './commands/relay-sessions.ts';
import { SESSION_COMMANDS } from './commands/sessions.ts';
import { WEBHOOK_COMMANDS } from './commands/webhooks.ts';
import { ConfigStore, type SavedConfig } from './config.ts';
import { CliError, EXIT, type ExitCode, UsageError } from './errors.ts';
import { commandHelp, groupHelp, topHelp, usageLine } from './help.ts';
import { ApiClient } from './http.ts';
import type { Io } from './io.ts';
import { safe, styleFor } from './output.ts';
import { resolve, stringValue } from './parse.ts';

const DEFAULT_API_URL = 'http://127.0.0.1:8080';

export const COMMANDS: readonly CommandSpec[] = [
  ...AUTH_COMMANDS,
  ...SESSION_COMMANDS,
  ...MFA_COMMANDS,
  ...PROJECT_COMMANDS,
  ...API_KEY_COMMANDS,
  ...BOT_COMMANDS,
  ...CREDENTIAL_COMMANDS,
  ...RELAY_SESSION_COMMANDS,
  ...WEBHOOK_COMMANDS,
  ...AUDIT_COMMANDS,
  ...PLATFORM_COMMANDS,
];

const VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

/** An http(s) URL without a trailing slash, or a usage error. */
function normalizeApiUrl(raw: string, source: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`${source} is not a URL: "${raw}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UsageError(`${source} must be an http:// or https:// URL (got "${raw}")`);
  }
  if (url.username || url.password || url.search || url.hash) {
    throw new UsageError(`${source} must not carry credentials, a query or a fragment`);
  }
  return url.toString().replace(/\/+$/, '');
}

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

function apiUrlOf(flag: string | undefined, io: Io, saved: SavedConfig): string {
  if (flag !== undefined) return normalizeApiUrl(flag, '--api-url');
  const fromEnv = io.env.RELAYPLANE_API_URL;
  if (fromEnv) return normalizeApiUrl(fromEnv, 'RELAYPLANE_API_URL');
  if (saved.api_url) return normalizeApiUrl(saved.api_url, 'api_url in the config file');
  return DEFAULT_API_URL;
}

/** Runs one invocation; answers the exit code. Never throws. */
export async function run(argv: readonly string[], io: Io): Promise<ExitCode> {
  const errStyle = styleFor(io.stderr.isTTY === true, io.env);
  const fail = (err: CliError): ExitCode => {
    io.stderr.write(`relayplane: ${safe(err.message)}\n`);
    if (err instanceof UsageError) {
      io.stderr.write(`${usageLine(err.command, COMMANDS)}\n`);
      const helpOf = ['relayplane', ...err.command, '--help'].join(' ');
      io.stderr.write(`Run \`${helpOf}\` for help.\n`);
    } else if (err.hint) {
      io.stderr.write(`${errStyle.dim(`hint: ${safe(err.hint)}`)}\n`);
    }
    return err.exitCode;
  };

  try {
    // `relayplane help projects create` is `relayplane projects create --help`.
    const args = argv[0] === 'help' ? [...argv.slice(1), '--help'] : argv;
    const resolution = resolve(args, COMMANDS);
    if (resolution.version && !resolution.help) {
      io.stdout.write(`relayplane ${VERSION}\n`);
      return EXIT.ok;
    }
    if (resolution.kind === 'help') {
      io.stdout.write(
        resolution.path.length === 0 ? topHelp(COMMANDS, VERSION) : groupHelp(resolution.path, COMMANDS),
      );
      return EXIT.ok;
    }
    if (resolution.help) {
      io.stdout.write(commandHelp(resolution.command));
      return EXIT.ok;
    }
    const ctx = createContext(io, resolution.parsed.values);
    await resolution.command.run(ctx, resolution.parsed);
    return EXIT.ok;
  } catch (err) {
    if (err instanceof CliError) return fail(err);
    return fail(
      new CliError(EXIT.api, `unexpected failure: ${err instanceof Error ? err.message : String(err)}`),
    );
  }
}

function createContext(io: Io, values: Values): Context {
  const config = new ConfigStore(io.configPath);
  const warn = (message: string) => io.stderr.write(`relayplane: warning: ${message}\n`);
  const saved = config.read(warn);
  const apiUrl = apiUrlOf(stringValue(values, 'api-url'), io, saved);
  const url = new URL(apiUrl);
  if (url.protocol === 'http:' && !LOOPBACK.has(url.hostname)) {
    warn(`${apiUrl} is not HTTPS: tokens and keys would cross the network unencrypted`);
  }
  const json = values.json === true;
  const style = styleFor(io.stdout.isTTY === true, io.env);
  return {
    io,
    style,
    errStyle: styleFor(io.stderr.isTTY === true, io.env),
    json,
    apiUrl,
    api: new ApiClient(apiUrl, io.fetch),
    config,
    saved,
    bearer() {
      const fromEnv = io.env.RELAYPLANE_TOKEN?.trim();
      if (fromEnv && !/^[\x21-\x7e]+$/.test(fromEnv)) {
        throw new UsageError('RELAYPLANE_TOKEN contains spaces or control characters');
      }
      if (fromEnv) return { kind: 'bearer', token: fromEnv, fromEnv: true };
      if (saved.token && saved.api_url === apiUrl)
        return { kind: 'bearer', token: saved.token, fromEnv: false };
      if (saved.token && saved.api_url) {
        throw new CliError(
          EXIT.unauthenticated,
          `not logged in to ${apiUrl} (the saved login is for ${saved.api_url})`,
          `run \`relayplane login --api-url ${apiUrl}\``,
        );
      }
      throw new CliError(
        EXIT.unauthenticated,
        'not logged in',
        'run `relayplane login` (or set RELAYPLANE_TOKEN)',
      );
    },
    out: (text) => io.stdout.write(text),
    note: (text) => io.stderr.write(text),
    print(body, human) {
      if (json) {
        if (body !== undefined) io.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
        return;
      }
      io.stdout.write(human());
    },
  };
}

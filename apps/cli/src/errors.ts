/**
 * Exit codes scripts can rely on, and the errors that carry them. The table is part of the
 * command's public surface: `relayplane --help` and the README print it.
 */
export const EXIT = {
  ok: 0,
  api: 1,
  usage: 2,
  unauthenticated: 3,
  forbidden: 4,
  notFound: 5,
  network: 6,
  loginRefused: 7,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

export const EXIT_CODE_HELP: readonly (readonly [ExitCode, string])[] = [
  [EXIT.ok, 'success'],
  [EXIT.api, 'the API answered an error (4xx/5xx other than below)'],
  [EXIT.usage, 'usage error: unknown command, bad flag or argument'],
  [EXIT.unauthenticated, 'not logged in, or the token was refused (401)'],
  [EXIT.forbidden, 'permission denied (403)'],
  [EXIT.notFound, 'not found (404)'],
  [EXIT.network, 'the server could not be reached (network error, timeout)'],
  [EXIT.loginRefused, 'device login denied or expired'],
];

/** The exit code for an HTTP error status. */
export function exitCodeForStatus(status: number): ExitCode {
  if (status === 401) return EXIT.unauthenticated;
  if (status === 403) return EXIT.forbidden;
  if (status === 404) return EXIT.notFound;
  return EXIT.api;
}

/** A failure the command reports as `relayplane: <message>` (plus an optional hint) and exits with. */
export class CliError extends Error {
  readonly exitCode: ExitCode;
  readonly hint: string | undefined;

  constructor(exitCode: ExitCode, message: string, hint?: string) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
    this.hint = hint;
  }
}

/** Bad flags or arguments: exit 2, with the command's usage line. */
export class UsageError extends CliError {
  /** The command path whose usage to print (empty: the top level). */
  readonly command: readonly string[];

  constructor(message: string, command: readonly string[] = []) {
    super(EXIT.usage, message);
    this.name = 'UsageError';
    this.command = command;
  }
}

/** The API answered a non-2xx status. `body` is the parsed JSON body, when there was one. */
export class ApiError extends CliError {
  readonly status: number;
  readonly body: unknown;

  constructor(status: number, message: string, body: unknown, hint?: string) {
    super(exitCodeForStatus(status), message, hint);
    this.name = 'ApiError';
    this.status = status;
    this.body = body;
  }
}

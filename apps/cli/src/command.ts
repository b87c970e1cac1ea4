/** What a command is: its words, flags, positionals, help text and what it does. */

import type { ConfigStore, SavedConfig } from './config.ts';
import type { ApiClient, Auth } from './http.ts';
import type { Io } from './io.ts';
import type { Style } from './output.ts';

export interface OptionSpec {
  type: 'string' | 'boolean';
  multiple?: boolean;
  short?: string;
  /** Shown in help as `--name <value>`. */
  value?: string;
  choices?: readonly string[];
  description: string;
}

export interface PositionalSpec {
  name: string;
  optional?: boolean;
}

export type Values = Record<string, string | boolean | string[] | undefined>;

export interface Parsed {
  values: Values;
  positionals: string[];
}

export interface Context {
  io: Io;
  /** For stdout. */
  style: Style;
  /** For stderr (it may be a terminal when stdout is not). */
  errStyle: Style;
  json: boolean;
  /** The API base URL in effect (flag, RELAYPLANE_API_URL, saved config, default). */
  apiUrl: string;
  api: ApiClient;
  config: ConfigStore;
  /** The saved config as read at start. */
  saved: SavedConfig;
  /** The bearer token in effect, or exit 3. */
  bearer(): Auth & { kind: 'bearer' };
  /** stdout */
  out(text: string): void;
  /** stderr, for progress, warnings and hints: never a secret. */
  note(text: string): void;
  /** `--json`: the API's JSON as is; otherwise the human rendering. */
  print(body: unknown, human: () => string): void;
}

export interface CommandSpec {
  path: readonly string[];
  summary: string;
  description?: string;
  positionals?: readonly PositionalSpec[];
  options?: Readonly<Record<string, OptionSpec>>;
  examples?: readonly string[];
  /** The usage error for an argument beyond the positionals, when the generic one would not help. */
  unexpectedArgument?: string;
  /** An alias (e.g. `projects list`): works, but help lists the canonical form only. */
  hidden?: boolean;
  run(ctx: Context, args: Parsed): Promise<void>;
}

export const GLOBAL_OPTIONS: Readonly<Record<string, OptionSpec>> = {
  'api-url': {
    type: 'string',
    value: 'url',
    description: 'API base URL (env RELAYPLANE_API_URL; saved at login; default http://127.0.0.1:8080)',
  },
  json: { type: 'boolean', description: "print the API's JSON response as is on stdout" },
  help: { type: 'boolean', short: 'h', description: 'show help for the command' },
  version: { type: 'boolean', description: 'print the version' },
};

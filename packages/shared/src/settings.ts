/**
 * Configuration as data. Every environment variable an app reads is declared once, in the app's
 * `src/settings.ts`: its name, kind, default, bounds and description. The app's `config.ts` reads
 * each through `EnvReader.read(setting)` (or, for the few with a parser of their own, by the
 * setting's `env`), and `pnpm docs:config` renders the declarations into docs/configuration.md
 * (CI fails when the page differs). A default, a range or a name therefore lives in one place.
 */

export type SettingKind =
  /** Free text. */
  | 'string'
  /** A whole number within [min, max]. */
  | 'integer'
  /** true/false (also 1/0, yes/no, on/off). */
  | 'boolean'
  /** One of `values`. */
  | 'enum'
  /** A URL of one of `protocols`. */
  | 'url'
  /** host:port to listen on or reach. */
  | 'address'
  /** A gRPC target: host:port, dns:///host:port, or an ipv4:/ipv6: list. */
  | 'target'
  /** A comma-separated list, parsed by the app (its description says of what). */
  | 'list'
  /** A path to a file, read at start. */
  | 'file'
  /** A secret value (a key, a token); never logged. */
  | 'secret';

export interface Setting {
  readonly env: string;
  readonly kind: SettingKind;
  /** What it sets, for the operator (Markdown). */
  readonly description: string;
  /** The value when unset; absent: `required`, or none (the description says what unset means). */
  readonly default?: string | number | boolean;
  readonly required?: boolean;
  readonly min?: number;
  readonly max?: number;
  readonly values?: readonly string[];
  readonly protocols?: readonly string[];
  /** Deployment-wide variables read, in order, when this one is unset (`DATABASE_URL`). */
  readonly fallback?: readonly string[];
}

/** A setting read through `EnvReader.read`: the value's type follows the kind. */
export type IntegerSetting = Setting & { kind: 'integer'; default?: number };
export type BooleanSetting = Setting & { kind: 'boolean'; default: boolean };
export type TextSetting = Setting & {
  kind: 'string' | 'enum' | 'url' | 'address' | 'target';
  default?: string;
};

type Options = Omit<Setting, 'env' | 'kind'>;

export const integer = (env: string, o: Options & { default?: number }): IntegerSetting => ({
  env,
  kind: 'integer',
  ...o,
});
export const boolean = (env: string, o: Options & { default: boolean }): BooleanSetting => ({
  env,
  kind: 'boolean',
  ...o,
});
export const text = (
  env: string,
  kind: TextSetting['kind'],
  o: Options & { default?: string },
): TextSetting => ({ env, kind, ...o });
/** A setting whose value an app parses itself (a list, a file, a secret, a composite). */
export const other = (env: string, kind: SettingKind, o: Options): Setting => ({ env, kind, ...o });

/** The Markdown table of `settings` (docs/configuration.md, between an app's markers). */
export function settingsTable(settings: readonly Setting[]): string {
  const cell = (value: string) => value.replaceAll('|', '\\|').replaceAll('\n', ' ');
  const rows = settings.map((s) => {
    const name = [`\`${s.env}\``, ...(s.fallback ?? []).map((f) => `(or \`${f}\`)`)].join(' ');
    const bounds = [
      s.kind === 'integer' && (s.min !== undefined || s.max !== undefined)
        ? `${s.min ?? '−∞'}..${s.max ?? '∞'}`
        : '',
      s.values ? s.values.map((v) => `\`${v}\``).join(', ') : '',
      s.protocols ? s.protocols.join(' ') : '',
    ]
      .filter(Boolean)
      .join(' ');
    const kind = bounds ? `${s.kind}, ${bounds}` : s.kind;
    const value =
      s.default !== undefined ? `\`${String(s.default)}\`` : s.required ? '**required**' : 'unset';
    return `| ${name} | ${cell(kind)} | ${value} | ${cell(s.description)} |`;
  });
  return ['| variable | kind | default | meaning |', '|---|---|---|---|', ...rows].join('\n');
}

/** From argv to a command and its flags: node:util parseArgs, strict, per command. */
import { parseArgs } from 'node:util';
import { type CommandSpec, GLOBAL_OPTIONS, type OptionSpec, type Parsed } from './command.ts';
import { UsageError } from './errors.ts';

export type Resolution =
  | { kind: 'command'; command: CommandSpec; parsed: Parsed; help: boolean; version: boolean }
  /** `--help` / `--version` on a group or the top level, or nothing at all. */
  | { kind: 'help'; path: string[]; help: boolean; version: boolean };

const isPrefix = (prefix: readonly string[], of: readonly string[]) =>
  prefix.length <= of.length && prefix.every((w, i) => of[i] === w);

/**
 * The command words at the start of argv (flags may sit between them), and the first word
 * after them that is not a command word.
 */
export function commandWords(
  argv: readonly string[],
  commands: readonly CommandSpec[],
): { words: string[]; next: string | undefined } {
  const valued = new Set<string>();
  for (const spec of [GLOBAL_OPTIONS, ...commands.map((c) => c.options ?? {})]) {
    for (const [name, opt] of Object.entries(spec)) if (opt.type === 'string') valued.add(name);
  }
  const words: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i] ?? '';
    if (token === '--') break;
    if (token.startsWith('-') && token !== '-') {
      if (token.startsWith('--') && !token.includes('=') && valued.has(token.slice(2))) i++;
      continue;
    }
    if (!commands.some((c) => isPrefix([...words, token], c.path))) return { words, next: token };
    words.push(token);
  }
  return { words, next: undefined };
}

function parseOptions(spec: Readonly<Record<string, OptionSpec>>) {
  const out: Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }> = {};
  for (const [name, opt] of Object.entries(spec)) {
    out[name] = {
      type: opt.type,
      ...(opt.multiple ? { multiple: true } : {}),
      ...(opt.short ? { short: opt.short } : {}),
    };
  }
  return out;
}

function wantsFlag(argv: readonly string[], ...flags: string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).some((t) => flags.includes(t));
}

export function resolve(argv: readonly string[], commands: readonly CommandSpec[]): Resolution {
  const { words, next: unknown } = commandWords(argv, commands);
  const help = wantsFlag(argv, '--help', '-h');
  const version = wantsFlag(argv, '--version');
  const command = commands.find((c) => c.path.length === words.length && isPrefix(c.path, words));

  if (!command) {
    if (help || (version && words.length === 0)) return { kind: 'help', path: words, help, version };
    if (words.length === 0 && unknown === undefined) throw new UsageError('no command given', []);
    if (unknown !== undefined) {
      const where = words.length > 0 ? `${words.join(' ')} ` : '';
      throw new UsageError(`unknown command "${where}${unknown}"`, words);
    }
    throw new UsageError(`"${words.join(' ')}" needs a subcommand`, words);
  }
  if (help || version)
    return { kind: 'command', command, parsed: { values: {}, positionals: [] }, help, version };

  let values: Parsed['values'];
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: [...argv],
      options: parseOptions({ ...GLOBAL_OPTIONS, ...(command.options ?? {}) }),
      allowPositionals: true,
      strict: true,
    }) as { values: Parsed['values']; positionals: string[] });
  } catch (err) {
    throw new UsageError(parseErrorMessage(err), command.path);
  }
  positionals = positionals.slice(words.length);

  const specs = command.positionals ?? [];
  const required = specs.filter((p) => !p.optional);
  if (positionals.length < required.length) {
    const missing = required.slice(positionals.length).map((p) => `<${p.name}>`);
    throw new UsageError(
      `missing argument${missing.length > 1 ? 's' : ''} ${missing.join(' ')}`,
      command.path,
    );
  }
  if (positionals.length > specs.length) {
    throw new UsageError(
      command.unexpectedArgument ?? `unexpected argument "${positionals[specs.length]}"`,
      command.path,
    );
  }
  for (const [name, opt] of Object.entries(command.options ?? {})) {
    const v = values[name];
    if (!opt.choices || v === undefined) continue;
    for (const one of Array.isArray(v) ? v : [v]) {
      if (typeof one === 'string' && !opt.choices.includes(one)) {
        throw new UsageError(
          `--${name} must be one of ${opt.choices.join(', ')} (got "${one}")`,
          command.path,
        );
      }
    }
  }
  return { kind: 'command', command, parsed: { values, positionals }, help: false, version: false };
}

function parseErrorMessage(err: unknown): string {
  const e = err as { code?: string; message?: string };
  if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const name = /'([^']+)'/.exec(e.message ?? '')?.[1];
    return name ? `unknown option ${name}` : 'unknown option';
  }
  if (e.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    const m = /'(--?[\w-]+)/.exec(e.message ?? '');
    return m ? `option ${m[1]} needs a value` : (e.message ?? 'invalid option value');
  }
  return e.message ?? String(err);
}

/** A string flag's value (last one wins), or undefined. */
export function stringValue(values: Parsed['values'], name: string): string | undefined {
  const v = values[name];
  if (Array.isArray(v)) return v.at(-1);
  return typeof v === 'string' ? v : undefined;
}

export function listValue(values: Parsed['values'], name: string): string[] | undefined {
  const v = values[name];
  if (Array.isArray(v)) return v;
  return typeof v === 'string' ? [v] : undefined;
}

/** A positive whole number flag, or a usage error naming it. */
export function intValue(
  values: Parsed['values'],
  name: string,
  path: readonly string[],
): number | undefined {
  const raw = stringValue(values, name);
  if (raw === undefined) return undefined;
  if (!/^[0-9]+$/.test(raw))
    throw new UsageError(`--${name} must be a whole number of seconds (got "${raw}")`, path);
  return Number(raw);
}

/** An id that goes into a URL path: `.` and `..` would change the path itself. */
export function idArg(value: string, name: string, path: readonly string[]): string {
  if (value === '' || value === '.' || value === '..')
    throw new UsageError(`invalid <${name}> "${value}"`, path);
  return value;
}

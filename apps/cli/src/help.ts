/** Help text for the top level, a group of commands and a single command. */
import { type CommandSpec, GLOBAL_OPTIONS, type OptionSpec } from './command.ts';
import { EXIT_CODE_HELP } from './errors.ts';

const NAME = 'relayplane';

function synopsis(c: CommandSpec): string {
  const args = (c.positionals ?? []).map((p) => (p.optional ? `[<${p.name}>]` : `<${p.name}>`));
  const flags = Object.keys(c.options ?? {}).length > 0 ? ['[flags]'] : [];
  return [NAME, ...c.path, ...args, ...flags].join(' ');
}

function optionLines(options: Readonly<Record<string, OptionSpec>>): string[] {
  const rows = Object.entries(options).map(([name, o]) => {
    const flag = `${o.short ? `-${o.short}, ` : '    '}--${name}${o.type === 'string' ? ` <${o.value ?? 'value'}>` : ''}`;
    const extra = [o.choices ? `one of ${o.choices.join(', ')}` : '', o.multiple ? 'repeatable' : '']
      .filter(Boolean)
      .join('; ');
    return [flag, extra ? `${o.description} (${extra})` : o.description] as const;
  });
  const width = Math.max(0, ...rows.map(([f]) => f.length));
  return rows.map(([f, d]) => `  ${f.padEnd(width)}  ${d}`);
}

function commandList(commands: readonly CommandSpec[]): string[] {
  const visible = commands.filter((c) => !c.hidden);
  const rows = visible.map((c) => [synopsis(c).slice(NAME.length + 1), c.summary] as const);
  const width = Math.max(0, ...rows.map(([s]) => s.length));
  return rows.map(([s, d]) => `  ${s.padEnd(width)}  ${d}`);
}

export function usageLine(path: readonly string[], commands: readonly CommandSpec[]): string {
  const exact = commands.find((c) => c.path.join(' ') === path.join(' '));
  if (exact) return `usage: ${synopsis(exact)}`;
  return `usage: ${[NAME, ...path, '<command>'].join(' ')} [flags]`;
}

export function topHelp(commands: readonly CommandSpec[], version: string): string {
  return [
    `${NAME} ${version}: the command-line client of the Relayplane control plane`,
    '',
    `usage: ${NAME} <command> [arguments] [flags]`,
    '',
    'Commands:',
    ...commandList(commands),
    '',
    'Global flags:',
    ...optionLines(GLOBAL_OPTIONS),
    '',
    'Environment:',
    '  RELAYPLANE_API_URL    API base URL (overridden by --api-url)',
    '  RELAYPLANE_TOKEN      bearer token to use instead of the saved login',
    '  RELAYPLANE_API_KEY    project API key for `credentials issue`',
    '  NO_COLOR              disable colour (also off when output is not a terminal)',
    '  XDG_CONFIG_HOME       the saved login is in $XDG_CONFIG_HOME/relayplane/config.json (mode 0600)',
    '',
    'Exit codes:',
    ...EXIT_CODE_HELP.map(([code, what]) => `  ${code}  ${what}`),
    '',
    `Run \`${NAME} <command> --help\` (or \`${NAME} help <command>\`) for a command's arguments and flags.`,
    '',
  ].join('\n');
}

export function groupHelp(path: readonly string[], commands: readonly CommandSpec[]): string {
  const members = commands.filter((c) => path.every((w, i) => c.path[i] === w));
  return [
    usageLine(path, commands),
    '',
    'Commands:',
    ...commandList(members),
    '',
    'Global flags:',
    ...optionLines(GLOBAL_OPTIONS),
    '',
  ].join('\n');
}

export function commandHelp(c: CommandSpec): string {
  const lines = [`usage: ${synopsis(c)}`, '', c.summary + (c.summary.endsWith('.') ? '' : '.')];
  if (c.description) lines.push('', c.description);
  if (c.options && Object.keys(c.options).length > 0) lines.push('', 'Flags:', ...optionLines(c.options));
  lines.push('', 'Global flags:', ...optionLines(GLOBAL_OPTIONS));
  if (c.examples && c.examples.length > 0) lines.push('', 'Examples:', ...c.examples.map((e) => `  ${e}`));
  lines.push('');
  return lines.join('\n');
}

/** Human output: aligned tables and key/value blocks, colour only on a terminal without NO_COLOR. */

export interface Style {
  bold(s: string): string;
  dim(s: string): string;
  green(s: string): string;
  yellow(s: string): string;
  red(s: string): string;
}

const sgr =
  (open: number, close: number) =>
  (s: string): string =>
    `\u001b[${open}m${s}\u001b[${close}m`;

const PLAIN: Style = { bold: String, dim: String, green: String, yellow: String, red: String };
const COLOURED: Style = {
  bold: sgr(1, 22),
  dim: sgr(2, 22),
  green: sgr(32, 39),
  yellow: sgr(33, 39),
  red: sgr(31, 39),
};

/** https://no-color.org: any non-empty NO_COLOR disables colour; so does a non-terminal. */
export function styleFor(isTTY: boolean, env: Readonly<Record<string, string | undefined>>): Style {
  if (!isTTY) return PLAIN;
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return PLAIN;
  if (env.TERM === 'dumb') return PLAIN;
  return COLOURED;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escapes are what this strips.
const ANSI = /\u001b\[[0-9;]*m/g;

/** Display width, ignoring colour escapes. */
export function visibleLength(s: string): number {
  return [...s.replace(ANSI, '')].length;
}

function padEnd(s: string, width: number): string {
  return s + ' '.repeat(Math.max(0, width - visibleLength(s)));
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this replaces.
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/** Text from the server, made harmless for a terminal: no escape sequences or other control characters. */
export function safe(text: string): string {
  return text.replace(CONTROL, '?');
}

export type Cell = string | number | boolean | null | undefined;

/** What a table shows for a value: `-` for none, ISO timestamps without milliseconds. */
export function cellText(value: Cell): string {
  if (value === null || value === undefined || value === '') return '-';
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  if (typeof value === 'number') return String(value);
  return safe(shortTime(value));
}

function shortTime(value: string): string {
  return /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(value) ? value.replace(/\.\d+Z$/, 'Z') : value;
}

/**
 * Columns separated by two spaces, each as wide as its widest cell; no trailing spaces.
 * Headers are upper case (bold on a terminal).
 */
export function renderTable(
  headers: readonly string[],
  rows: readonly (readonly Cell[])[],
  style: Style = PLAIN,
): string {
  const texts = rows.map((row) => headers.map((_, i) => cellText(row[i])));
  const widths = headers.map((h, i) =>
    Math.max(visibleLength(h), ...texts.map((r) => visibleLength(r[i] ?? ''))),
  );
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : padEnd(c, widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  const head = line(headers.map((h) => style.bold(h.toUpperCase())));
  return `${[head, ...texts.map(line)].join('\n')}\n`;
}

/** `label: value` lines with the values aligned. */
export function renderFields(fields: readonly (readonly [string, Cell])[], style: Style = PLAIN): string {
  const width = Math.max(0, ...fields.map(([k]) => k.length + 1));
  return `${fields.map(([k, v]) => `${style.dim(padEnd(`${k}:`, width))}  ${cellText(v)}`).join('\n')}\n`;
}

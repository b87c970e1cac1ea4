import { describe, expect, it } from 'vitest';
import { cellText, renderFields, renderTable, safe, styleFor, visibleLength } from './output.ts';

describe('table rendering', () => {
  it('aligns columns to the widest cell, two spaces apart, without trailing spaces', () => {
    const out = renderTable(
      ['id', 'name', 'environment'],
      [
        ['prj_1', 'demo', 'production'],
        ['prj_22', 'a', null],
      ],
    );
    expect(out).toBe(
      ['ID      NAME  ENVIRONMENT', 'prj_1   demo  production', 'prj_22  a     -', ''].join('\n'),
    );
  });

  it('measures width without colour escapes, so coloured headers still align', () => {
    const style = styleFor(true, {});
    const out = renderTable(['a', 'b'], [['long value', 'x']], style);
    const [head, row] = out.split('\n');
    expect(head).toContain('\u001b[1m');
    expect(visibleLength(head ?? '')).toBe(visibleLength('A           B'));
    expect(row).toBe('long value  x');
  });

  it('shows nothing as "-", booleans as yes/no and ISO times without milliseconds', () => {
    expect(cellText(undefined)).toBe('-');
    expect(cellText('')).toBe('-');
    expect(cellText(false)).toBe('no');
    expect(cellText(0)).toBe('0');
    expect(cellText('2026-11-22T23:57:57.241Z')).toBe('2026-11-22T23:57:57Z');
    expect(cellText('not-a-time.123Z')).toBe('not-a-time.123Z');
  });

  it('never passes terminal escape sequences from the server through', () => {
    expect(cellText('evil\u001b]0;title\u0007name')).toBe('evil?]0;title?name');
    expect(safe('line\r\u009bX')).toBe('line??X');
    expect(safe('tab\tand\nnewline')).toBe('tab\tand\nnewline');
  });

  it('aligns key/value blocks', () => {
    expect(
      renderFields([
        ['ID', 'x'],
        ['Environment', 'y'],
      ]),
    ).toBe('ID:           x\nEnvironment:  y\n');
  });
});

describe('colour', () => {
  it('is on only for a terminal without NO_COLOR or TERM=dumb', () => {
    expect(styleFor(true, {}).bold('x')).toBe('\u001b[1mx\u001b[22m');
    expect(styleFor(false, {}).bold('x')).toBe('x');
    expect(styleFor(true, { NO_COLOR: '1' }).bold('x')).toBe('x');
    expect(styleFor(true, { TERM: 'dumb' }).green('x')).toBe('x');
    expect(styleFor(true, { NO_COLOR: '' }).green('x')).toBe('\u001b[32mx\u001b[39m');
  });
});
